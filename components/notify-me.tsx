"use client";

import { Button } from "@/components/ui";
import { useNotificationPermission } from "@/lib/use-pending-alerts";

const WHAT = "A system notification for each new call while this tab is in the background.";

/**
 * The approvals pages' "Notify me": asks for the browser's notification permission when clicked
 * (never by itself), then says whether notifications are on. Nothing is shown where the browser
 * has no notifications, or before the permission is known (the server render).
 */
export function NotifyMe() {
  const { permission, request } = useNotificationPermission();
  if (permission === null || permission === "unsupported") return null;
  if (permission === "granted") {
    return (
      <p className="text-sm text-zinc-600" title={WHAT} data-testid="notify-state">
        Notifications on
      </p>
    );
  }
  if (permission === "denied") {
    return (
      <p className="max-w-xs text-sm text-zinc-500" data-testid="notify-state">
        Notifications are blocked for this site; allow them in the browser's site settings to be told of new
        calls.
      </p>
    );
  }
  return (
    <Button onClick={() => void request()} title={WHAT}>
      Notify me
    </Button>
  );
}
