import "server-only";
import { createHash, createHmac, type KeyObject, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * How replicas prove to each other that a request on the internal route comes from one of them:
 * an HMAC-SHA256 over the method, path, time, a nonce and the body's digest, with a key derived
 * from the secret key every replica shares (`SecretBox.derive(INTERNAL_KEY_PURPOSE)`), so there is
 * no second secret to distribute. A request older or newer than {@link SKEW_MS} is refused, and a
 * nonce is accepted once: a request caught on the network cannot be sent again (a tool call would
 * run twice).
 */

/** The purpose the internal route's key is derived for. */
export const INTERNAL_KEY_PURPOSE = "gatehouse internal route v1";

/** How far a request's time may be from the receiver's clock. */
export const SKEW_MS = 30_000;

const TIME = "x-gatehouse-time";
const NONCE = "x-gatehouse-nonce";
const SIGNATURE = "x-gatehouse-signature";

function mac(
  key: KeyObject,
  method: string,
  path: string,
  time: string,
  nonce: string,
  body: string,
): string {
  const digest = createHash("sha256").update(body).digest("base64url");
  return createHmac("sha256", key)
    .update([method.toUpperCase(), path, time, nonce, digest].join("\n"))
    .digest("base64url");
}

/** The headers that sign a request of `method` to `path` (with its query) carrying `body`. */
export function signInternal(
  key: KeyObject,
  method: string,
  path: string,
  body: string,
): Record<string, string> {
  const time = String(Date.now());
  const nonce = randomBytes(16).toString("base64url");
  return { [TIME]: time, [NONCE]: nonce, [SIGNATURE]: mac(key, method, path, time, nonce, body) };
}

/**
 * Checks signed requests, remembering the nonces it accepted for twice {@link SKEW_MS} (after
 * which their time alone refuses them).
 */
export class InternalVerifier {
  private readonly seen = new Map<string, number>();

  constructor(private readonly key: KeyObject) {}

  /** Null when the request is signed by a replica and new; else why it is refused (for the log, not the caller). */
  refusal(
    method: string,
    path: string,
    headers: { get(name: string): string | null },
    body: string,
    now = Date.now(),
  ): string | null {
    const time = headers.get(TIME) ?? "";
    const nonce = headers.get(NONCE) ?? "";
    const signature = headers.get(SIGNATURE) ?? "";
    if (!/^[0-9]{1,16}$/.test(time) || !/^[A-Za-z0-9_-]{16,64}$/.test(nonce) || !signature) return "unsigned";
    if (Math.abs(now - Number(time)) > SKEW_MS) return "outside the time window";
    const expected = Buffer.from(mac(this.key, method, path, time, nonce, body));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return "bad signature";
    this.forgetOld(now);
    if (this.seen.has(nonce)) return "replayed";
    this.seen.set(nonce, now);
    return null;
  }

  private forgetOld(now: number): void {
    // Insertion order is time order.
    for (const [nonce, at] of this.seen) {
      if (now - at <= 2 * SKEW_MS) break;
      this.seen.delete(nonce);
    }
  }
}
