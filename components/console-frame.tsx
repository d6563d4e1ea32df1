import type { ReactNode } from "react";
import { ConsoleHeader, type NavLink } from "@/components/console-header";
import { canReview, isOwner } from "@/components/roles";
import type { UserView } from "@/lib/api-types";

/** The header's links: the pages `user`'s roles open, in the console's order. */
export function consoleLinks(user: UserView): NavLink[] {
  const owner = isOwner(user);
  const reviewer = canReview(user);
  const links: NavLink[] = [];
  if (owner) {
    links.push(
      { href: "/servers", label: "Servers" },
      { href: "/tools", label: "Tools" },
      { href: "/changes", label: "Changes" },
    );
  }
  if (reviewer) {
    // Grants and Rules right after Activity: both explain what did or did not reach the queue.
    links.push(
      { href: "/approvals", label: "Approvals" },
      { href: "/activity", label: "Activity" },
      { href: "/grants", label: "Grants" },
      { href: "/rules", label: "Rules" },
    );
  }
  // Everyone who signs in has a password of their own to change there.
  links.push({ href: "/settings", label: "Settings" });
  return links;
}

/**
 * A signed-in person's page: the console's header (their links, their name, the live stream)
 * above `children`. The console's pages get it from their layout; a page outside the console
 * (no such page) uses it for someone signed in, so they keep their way around.
 */
export function ConsoleFrame({ user, children }: { user: UserView; children: ReactNode }) {
  return (
    <div className="min-h-screen">
      <ConsoleHeader links={consoleLinks(user)} userName={user.name} />
      <main className="mx-auto max-w-7xl px-4 py-8 sm:px-6">{children}</main>
    </div>
  );
}
