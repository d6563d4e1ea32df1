import { useRouter } from "next/navigation";
import { useCallback, useEffect, useRef, useState } from "react";
import type { CallView } from "@/lib/api-types";

/** The count this module puts in front of a title: "(3) Approvals · Gatehouse". */
const COUNT_PREFIX = /^\(\d+\) /;
/** More new calls than this in one refresh raise one notification for all of them, not a flood. */
const MAX_NOTIFICATIONS_AT_ONCE = 3;

/** `title` without a count this module put in front of it. */
export function plainTitle(title: string): string {
  return title.replace(COUNT_PREFIX, "");
}

/** "(3) Approvals · Gatehouse" for 3 pending calls; the plain title for none. */
export function titleWithCount(title: string, count: number): string {
  const plain = plainTitle(title);
  return count > 0 ? `(${count}) ${plain}` : plain;
}

/**
 * While mounted, the document's title starts with the number of pending calls, "(3) Approvals ·
 * Gatehouse", and is plain when there are none (or while `count` is still unknown). Next writes a
 * page's own title when its metadata arrives, which can be after this effect ran, so a change of
 * the title element is answered by putting the count back. On unmount only the count is removed,
 * leaving whatever title the next page has set.
 */
export function usePendingTitle(count: number | undefined): void {
  useEffect(() => {
    if (count === undefined) return;
    const apply = () => {
      const wanted = titleWithCount(document.title, count);
      // Only a real change writes, so this observer's own write does not loop.
      if (document.title !== wanted) document.title = wanted;
    };
    apply();
    const observer = new MutationObserver(apply);
    observer.observe(document.head, { subtree: true, childList: true, characterData: true });
    return () => {
      observer.disconnect();
      const plain = plainTitle(document.title);
      if (document.title !== plain) document.title = plain;
    };
  }, [count]);
}

/** `"unsupported"` where the browser has no Notification API; null until known (first render). */
export type NotifyPermission = NotificationPermission | "unsupported";

function notificationsSupported(): boolean {
  return typeof window !== "undefined" && "Notification" in window;
}

/**
 * The browser's notification permission for this site, kept current when the person changes it in
 * the site settings, and `request()`, which asks for it. Asking is only ever done from a click:
 * browsers ignore (or punish) a prompt nobody asked for.
 */
export function useNotificationPermission(): {
  permission: NotifyPermission | null;
  request: () => Promise<void>;
} {
  const [permission, setPermission] = useState<NotifyPermission | null>(null);

  useEffect(() => {
    if (!notificationsSupported()) {
      setPermission("unsupported");
      return;
    }
    setPermission(Notification.permission);
    let stopped = false;
    let status: PermissionStatus | null = null;
    const onChange = () => setPermission(Notification.permission);
    navigator.permissions
      ?.query({ name: "notifications" })
      .then((s) => {
        if (stopped) return;
        status = s;
        s.addEventListener("change", onChange);
      })
      .catch(() => {
        // No Permissions API for notifications here: the state is re-read after each request.
      });
    return () => {
      stopped = true;
      status?.removeEventListener("change", onChange);
    };
  }, []);

  const request = useCallback(async () => {
    if (!notificationsSupported()) return;
    try {
      setPermission(await Notification.requestPermission());
    } catch {
      setPermission(Notification.permission);
    }
  }, []);

  return { permission, request };
}

/** One system notification to raise: its text, and the page its click opens. */
export interface PendingAlert {
  title: string;
  options: NotificationOptions;
  path: string;
}

/**
 * The notifications for calls that just arrived: one per call (tool, who asked, which server;
 * tagged by call, so the same call never shows twice), or one for all of them when more than
 * three came at once.
 */
export function alertsFor(arrived: readonly CallView[]): PendingAlert[] {
  if (arrived.length > MAX_NOTIFICATIONS_AT_ONCE) {
    return [
      {
        title: `${arrived.length} calls need approval`,
        options: { body: "Open Gatehouse to decide.", tag: "gatehouse-pending" },
        path: "/approvals",
      },
    ];
  }
  return arrived.map((call) => ({
    title: `Approval needed: ${call.tool}`,
    options: {
      body: `Requested by ${call.requester.kind} ${call.requester.name} on ${call.server}`,
      tag: `gatehouse-call-${call.id}`,
    },
    path: `/approvals/${encodeURIComponent(call.id)}`,
  }));
}

/** Shows one system notification; its click brings this tab forward and runs `open`. */
function raise({ title, options }: PendingAlert, open: () => void): void {
  let notification: Notification;
  try {
    notification = new Notification(title, options);
  } catch {
    // Some mobile browsers allow notifications only from a service worker: then there is none.
    return;
  }
  notification.addEventListener("click", () => {
    window.focus();
    notification.close();
    open();
  });
}

/**
 * Raises a system notification for each call that becomes pending while this hook is mounted —
 * never for those already pending when it first saw the list — if notifications are allowed and
 * the page is in the background (`document.visibilityState === "hidden"`): a reviewer looking at
 * the page sees the call arrive anyway. Its text is the tool and who asked; a click focuses the
 * tab and opens `/approvals/<id>`. More than three at once become one notification that opens
 * the queue.
 *
 * @param pending the pending calls as `usePendingCalls` gives them; undefined while loading.
 */
export function usePendingNotifications(pending: readonly CallView[] | undefined): void {
  const router = useRouter();
  const seen = useRef<Set<string> | null>(null);

  useEffect(() => {
    if (!pending) return;
    const known = seen.current;
    if (!known) {
      seen.current = new Set(pending.map((call) => call.id));
      return;
    }
    const arrived = pending.filter((call) => !known.has(call.id));
    for (const call of arrived) known.add(call.id);
    if (arrived.length === 0 || document.visibilityState !== "hidden") return;
    if (!notificationsSupported() || Notification.permission !== "granted") return;
    for (const alert of alertsFor(arrived)) raise(alert, () => router.push(alert.path));
  }, [pending, router]);
}
