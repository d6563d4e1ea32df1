"use client";

import { useNow } from "@/components/use-now";
import { formatAge, formatDateTime } from "@/lib/format";

/** "12 s ago", ticking every second; the exact time is in the tooltip and the datetime attribute. */
export function Age({ at }: { at: string }) {
  const now = useNow(1_000);
  return (
    <time dateTime={at} title={formatDateTime(at)}>
      {formatAge(at, now)}
    </time>
  );
}
