import "server-only";
import { isIP } from "node:net";

/**
 * What an incoming web `Request` says about itself, read the same way by the edge
 * (server/http), `/mcp` (server/agent-mcp) and sign-in (server/auth). A room of its own, below
 * all three and importing none of them, so none has to import another to share it.
 */

/** Largest request body an API route or `/mcp` accepts (4 MiB); each refuses more in its own format. */
export const MAX_REQUEST_BODY_BYTES = 4 * 1024 * 1024;

/** A request body read as JSON: its value, or why there is none. */
export type JsonBody = { ok: true; value: unknown } | { ok: false; problem: "too_large" | "not_json" };

/**
 * Reads `req`'s body as JSON, at most `maxBytes` (default {@link MAX_REQUEST_BODY_BYTES}). A
 * declared `Content-Length` over the cap is `too_large` before a byte is read; otherwise reading
 * stops as soon as more than the cap has arrived. A body that is not JSON is `not_json`; so is an
 * empty one, unless `emptyAs` is given (then an empty body reads as that value). A failing body stream rejects. The caller turns a problem into its
 * own answer (a REST `payload_too_large`, a JSON-RPC 413 or parse error).
 */
export async function readJsonBody(
  req: Request,
  maxBytes = MAX_REQUEST_BODY_BYTES,
  opts: { emptyAs?: unknown } = {},
): Promise<JsonBody> {
  const body = await readBody(req, maxBytes);
  if (body.tooLarge) return { ok: false, problem: "too_large" };
  return parsedJson(body.text, opts);
}

/** {@link readJsonBody} for a body the edge has read already (server/http/hot-path.ts). */
export function jsonBodyOf(
  bytes: Buffer,
  maxBytes = MAX_REQUEST_BODY_BYTES,
  opts: { emptyAs?: unknown } = {},
): JsonBody {
  if (bytes.byteLength > maxBytes) return { ok: false, problem: "too_large" };
  return parsedJson(bytes.toString("utf8"), opts);
}

function parsedJson(text: string, opts: { emptyAs?: unknown }): JsonBody {
  if (text === "" && "emptyAs" in opts) return { ok: true, value: opts.emptyAs };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, problem: "not_json" };
  }
}

/**
 * `req`'s body as text, at most `maxBytes`: a declared `Content-Length` over it is refused before
 * a byte is read, otherwise reading stops as soon as more than `maxBytes` has arrived. A failing
 * body stream rejects. (The MCP SDK's `readRequestBody` does the same; importing that package for
 * it would load the whole MCP server wherever a body is read: every API route, sign-in.)
 */
async function readBody(
  req: Request,
  maxBytes: number,
): Promise<{ tooLarge: true } | { tooLarge: false; text: string }> {
  if (Number(req.headers.get("content-length")) > maxBytes) return { tooLarge: true };
  if (req.body === null) return { tooLarge: false, text: "" };
  const reader = req.body.getReader();
  const decoder = new TextDecoder();
  let received = 0;
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received += value.byteLength;
      if (received > maxBytes) return { tooLarge: true };
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    reader.releaseLock();
  }
  return { tooLarge: false, text: text + decoder.decode() };
}

/**
 * Whether the proxy in front says the client reached it over https: the first value of
 * `X-Forwarded-Proto` (the hop nearest the client) is `https`. The header is taken on trust: a
 * client that sends it itself only marks its own request https (and its own cookie Secure).
 */
export function forwardedHttps(headers: Headers): boolean {
  return headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "https";
}

/**
 * The header through which the production server (server/main.ts, with `clientAddressStamper`
 * in server/http/node-bridge.ts) tells handlers the client's address. It sets it on every
 * request, replacing or removing whatever the client sent.
 */
export const CLIENT_ADDRESS_HEADER = "x-gatehouse-client-address";

const STAMPING = Symbol.for("gatehouse.client-address-stamping");

/**
 * Declares that this process's edge sets {@link CLIENT_ADDRESS_HEADER} on every request. Until
 * then the header is not believed: under `next dev` nothing removes a client's own copy.
 */
export function trustClientAddressHeader(): void {
  (globalThis as Record<symbol, unknown>)[STAMPING] = true;
}

/**
 * The client's address as the edge stamped it, or null when no edge stamps it (`next dev`,
 * tests that call handlers directly) or it found none.
 */
export function clientAddress(headers: Headers): string | null {
  if ((globalThis as Record<symbol, unknown>)[STAMPING] !== true) return null;
  return headers.get(CLIENT_ADDRESS_HEADER) || null;
}

/**
 * How many proxies `GATEHOUSE_TRUST_PROXY` says stand in front of Gatehouse: 0 when unset, empty,
 * `0` or `false`; 1 for `true`; a whole number as it is. Null when it says anything else.
 */
export function trustedProxyCount(value: string | undefined): number | null {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "" || v === "false") return 0;
  if (v === "true") return 1;
  return /^\d{1,2}$/.test(v) ? Number(v) : null;
}

/**
 * Who the client is. With no trusted proxy, the socket's remote address: `X-Forwarded-For` is
 * the client's own word then. With `trusted` proxies in front, the `trusted`-th entry of
 * `X-Forwarded-For` from the right: each proxy appends the address it was reached from, so that
 * is the right-most hop no trusted proxy stands for, and anything left of it may be the
 * client's invention (a shorter list: its left-most entry). No header, or an entry that is no
 * IP address: the socket's address (the proxy's, so such requests share one bucket). Null when
 * there is no address at all.
 */
export function clientAddressOf(
  socketAddress: string | undefined,
  forwardedFor: string | null,
  trusted: number,
): string | null {
  const socket = socketAddress || null;
  if (trusted <= 0 || !forwardedFor) return socket;
  const hops = forwardedFor.split(",").map((h) => h.trim());
  const hop = bareAddress(hops[Math.max(0, hops.length - trusted)] ?? "");
  return isIP(hop) ? hop : socket;
}

/** An address without the port or brackets some proxies add (`[2001:db8::1]:443`, `203.0.113.7:5678`). */
function bareAddress(hop: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(hop);
  if (bracketed?.[1]) return bracketed[1];
  const v4 = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(hop);
  return v4?.[1] ?? hop;
}
