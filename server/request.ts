import "server-only";
import { readRequestBody } from "@modelcontextprotocol/sdk/server/requestBody.js";

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
  const body = await readRequestBody(req, maxBytes);
  if (body.tooLarge) return { ok: false, problem: "too_large" };
  if (body.text === "" && "emptyAs" in opts) return { ok: true, value: opts.emptyAs };
  try {
    return { ok: true, value: JSON.parse(body.text) as unknown };
  } catch {
    return { ok: false, problem: "not_json" };
  }
}

/**
 * Whether the proxy in front says the client reached it over https: the first value of
 * `X-Forwarded-Proto` (the hop nearest the client) is `https`. The header is taken on trust: a
 * client that sends it itself only marks its own request https (and its own cookie Secure).
 */
export function forwardedHttps(headers: Headers): boolean {
  return headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "https";
}
