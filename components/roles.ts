/** Who may see what in the console. The API enforces the same rules; this only shapes the UI. */
import type { UserView } from "@/lib/api-types";

type HasRoles = Pick<UserView, "roles">;

export function isOwner(user: HasRoles): boolean {
  return user.roles.includes("owner");
}

/** Owners may approve too. */
export function canReview(user: HasRoles): boolean {
  return isOwner(user) || user.roles.includes("reviewer");
}

/** Where a signed-in person lands: reviewers who are not owners have only the approvals page. */
export function homePathFor(user: HasRoles): "/servers" | "/approvals" {
  return isOwner(user) ? "/servers" : "/approvals";
}
