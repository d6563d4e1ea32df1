import { redirect } from "next/navigation";
import type { ReactNode } from "react";
import { ConsoleHeader, type NavLink } from "@/components/console-header";
import { canReview, isOwner } from "@/components/roles";
import type { UserView } from "@/lib/api-types";
import { currentPageUser } from "@/server/http/page";

function linksFor(user: UserView): NavLink[] {
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

export default async function ConsoleLayout({ children }: { children: ReactNode }) {
  const user = await currentPageUser();
  if (!user) redirect("/login");

  return (
    <div className="min-h-screen">
      <ConsoleHeader links={linksFor(user)} userName={user.name} />
      <main className="mx-auto max-w-7xl px-4 py-8 sm:px-6">{children}</main>
    </div>
  );
}
