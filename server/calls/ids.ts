import "server-only";
import { randomBytes } from "node:crypto";

/**
 * A new call id: a UUID version 7 (RFC 9562), the creation time in milliseconds followed by
 * 74 random bits. Ids made later sort later, so the calls table's key and the audit log's
 * call index grow at their right edge: a new call touches the pages the previous one did,
 * where random (version 4) ids touched a random page of each index per call.
 */
export function newCallId(now = Date.now()): string {
  const b = randomBytes(16);
  b.writeUIntBE(now, 0, 6);
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x70;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
