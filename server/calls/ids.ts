import "server-only";
import { randomUUID } from "node:crypto";

/**
 * A new call id: a UUID version 7 (RFC 9562), the creation time in milliseconds followed by
 * 74 random bits. Ids made later sort later, so the calls table's key and the audit log's
 * call index grow at their right edge: a new call touches the pages the previous one did,
 * where random (version 4) ids touched a random page of each index per call.
 */
export function newCallId(now = Date.now()): string {
  // A version 4 UUID (Node draws those from a cached entropy pool) with its first 48 bits
  // replaced by the time and its version nibble by 7: 74 random bits stay, as version 7 has.
  const time = now.toString(16).padStart(12, "0").slice(-12);
  const v4 = randomUUID();
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${v4.slice(15)}`;
}
