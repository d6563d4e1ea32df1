import "server-only";
import { randomBytes } from "node:crypto";

/**
 * A new grant id: `g_` and 128 random bits in base64url, so it can stand in a URL path as it is
 * (`DELETE /api/grants/:id`) and the prefix tells it from a call id at a glance.
 */
export function newGrantId(): string {
  return `g_${randomBytes(16).toString("base64url")}`;
}
