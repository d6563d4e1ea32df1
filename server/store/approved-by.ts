import "server-only";

/**
 * `calls.approved_by` is a JSON array of reviewer names; read here, by the broker and by the
 * outbox alike. A damaged column reads as no approvals (a call never runs on an unreadable one:
 * the broker counts again from this list).
 */
export function parseApprovedBy(column: string): string[] {
  try {
    const list = JSON.parse(column) as unknown;
    return Array.isArray(list) ? list.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}
