"use client";

import { cx } from "@/components/ui";
import { useNow } from "@/components/use-now";
import { formatCountdown, formatDateTime } from "@/lib/format";

/** Under this, the countdown turns red: a reviewer should decide now or let it expire. */
const URGENT_MS = 60_000;

/**
 * "expires in 14:32", ticking every second, with the exact time in the tooltip. Once the
 * deadline passes it says "expiring…" until the server's expiry removes the call (a live event).
 */
export function ExpiryCountdown({ at }: { at: string }) {
  const now = useNow(1_000);
  const left = Date.parse(at) - now;
  return (
    <time
      dateTime={at}
      title={`Expires at ${formatDateTime(at)}`}
      className={cx("tabular-nums", left < URGENT_MS ? "font-medium text-rose-700" : "text-zinc-600")}
    >
      {left > 0 ? `expires in ${formatCountdown(left)}` : "expiring…"}
    </time>
  );
}
