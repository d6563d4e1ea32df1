"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { usePathname } from "next/navigation";
import { useState } from "react";
import { Button, cx } from "@/components/ui";
import { endpoints } from "@/lib/endpoints";
import { GatehouseError } from "@/lib/errors";
import { errorMessage } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";
import { useLiveEvents } from "@/lib/use-live-events";
import { usePendingCalls } from "@/lib/use-pending-calls";

export interface NavLink {
  href: string;
  label: string;
}

/**
 * The console's header: product name, the links this person may use, who is signed in, and
 * "Sign out", with live counts on "Changes" (unread) and "Approvals" (waiting calls). It also
 * holds the page's one live-event stream, since it stays mounted across navigation between
 * console pages.
 */
export function ConsoleHeader({ links, userName }: { links: NavLink[]; userName: string }) {
  useLiveEvents();
  const pathname = usePathname();
  const unread = useUnreadChanges(links.some((link) => link.href === CHANGES_HREF));
  const pending = usePendingCalls(links.some((link) => link.href === APPROVALS_HREF)).data?.length ?? 0;

  return (
    <header className="border-b border-zinc-200 bg-white">
      <div className="mx-auto flex max-w-7xl flex-wrap items-center gap-x-6 gap-y-2 px-4 py-3 sm:px-6">
        <Link href="/" prefetch={false} className="text-base font-semibold tracking-tight text-zinc-900">
          Gatehouse
        </Link>
        <nav aria-label="Main" className="flex flex-1 flex-wrap items-center gap-1">
          {links.map((link) => {
            const active = pathname === link.href || pathname.startsWith(`${link.href}/`);
            return (
              <Link
                key={link.href}
                href={link.href}
                // Prefetching every page on each load made six server renders compete with the
                // page's own data on a small server; a click costs one round trip instead.
                prefetch={false}
                aria-current={active ? "page" : undefined}
                className={cx(
                  "rounded-md px-3 py-1.5 text-sm font-medium",
                  active
                    ? "bg-indigo-50 text-indigo-700"
                    : "text-zinc-600 hover:bg-zinc-100 hover:text-zinc-900",
                )}
              >
                {link.label}
                {link.href === CHANGES_HREF && unread > 0 ? (
                  <CountBadge count={unread} testId="changes-unread" tone="indigo" what="unread" />
                ) : null}
                {link.href === APPROVALS_HREF && pending > 0 ? (
                  <CountBadge count={pending} testId="approvals-pending" tone="amber" what="waiting" />
                ) : null}
              </Link>
            );
          })}
        </nav>
        <div className="flex items-center gap-3">
          <span className="max-w-48 truncate text-sm text-zinc-600" title={userName}>
            Signed in as <span className="font-medium text-zinc-900">{userName}</span>
          </span>
          <SignOutButton />
        </div>
      </div>
    </header>
  );
}

const CHANGES_HREF = "/changes";
const APPROVALS_HREF = "/approvals";

/**
 * The owner's unread catalogue changes, for the badge on "Changes" (only asked for when the link
 * is shown: the feed is for owners). Live "catalogue" events refresh it; nothing polls.
 */
function useUnreadChanges(enabled: boolean): number {
  const query = useQuery({
    queryKey: queryKeys.changes.unread(),
    queryFn: ({ signal }) => endpoints.changes.page({ limit: 1 }, { signal }),
    enabled,
  });
  return enabled ? (query.data?.unread ?? 0) : 0;
}

/**
 * A count beside a menu item: unread catalogue changes (indigo) or calls waiting for a decision
 * (amber, for everyone who may approve). Screen readers hear ", 3 waiting" after the label.
 */
function CountBadge({
  count,
  testId,
  tone,
  what,
}: {
  count: number;
  testId: string;
  tone: "indigo" | "amber";
  what: string;
}) {
  return (
    <>
      <span
        aria-hidden="true"
        data-testid={testId}
        className={cx(
          "ml-1.5 inline-flex min-w-5 items-center justify-center rounded-full px-1.5 py-px text-xs font-semibold tabular-nums",
          tone === "indigo"
            ? "bg-indigo-600 text-white"
            : "bg-amber-100 text-amber-900 ring-1 ring-inset ring-amber-300",
        )}
      >
        {count > 99 ? "99+" : count}
      </span>
      <span className="sr-only">{`, ${count} ${what}`}</span>
    </>
  );
}

function SignOutButton() {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function signOut() {
    setPending(true);
    setError(null);
    try {
      await endpoints.session.signOut();
    } catch (err) {
      // A session that has already expired is as signed out as it gets.
      if (!(err instanceof GatehouseError && err.code === "unauthenticated")) {
        setError(errorMessage(err));
        setPending(false);
        return;
      }
    }
    // A full load drops every cached query of this user.
    window.location.assign("/login");
  }

  return (
    <div className="flex items-center gap-2">
      <Button onClick={signOut} disabled={pending}>
        Sign out
      </Button>
      {error ? (
        <span role="alert" className="text-sm text-rose-700">
          {error}
        </span>
      ) : null}
    </div>
  );
}
