/**
 * The browser's only way to talk to the Gatehouse HTTP API. Every non-2xx answer is turned
 * back into the same `GatehouseError` the server threw, so UI code can branch on `code`.
 */
import { type ErrorCode, GatehouseError, isErrorCode } from "@/lib/errors";

export interface ApiInit extends Omit<RequestInit, "body"> {
  /** Sent as a JSON body with `Content-Type: application/json`. */
  json?: unknown;
  body?: BodyInit | null;
}

/** A code for an error body we could not read, or one whose code this build does not know. */
function codeForStatus(status: number): ErrorCode {
  if (status === 400) return "bad_request";
  if (status === 401) return "unauthenticated";
  if (status === 403) return "forbidden";
  if (status === 404) return "not_found";
  if (status === 409) return "conflict";
  if (status === 422) return "invalid_arguments";
  if (status === 429) return "too_many_attempts";
  if (status === 502 || status === 503) return "server_unavailable";
  if (status === 504) return "upstream_timeout";
  return "internal";
}

function readErrorBody(value: unknown): { code: unknown; message: unknown } | null {
  if (typeof value !== "object" || value === null || !("error" in value)) return null;
  const inner = (value as { error: unknown }).error;
  if (typeof inner !== "object" || inner === null) return null;
  const { code, message } = inner as { code?: unknown; message?: unknown };
  return { code, message };
}

async function errorFromResponse(response: Response): Promise<GatehouseError> {
  let parsed: unknown = null;
  try {
    parsed = await response.json();
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): fall back to the status line below.
  }
  const body = readErrorBody(parsed);
  const code = body && isErrorCode(body.code) ? body.code : codeForStatus(response.status);
  const message =
    body && typeof body.message === "string" && body.message.length > 0
      ? body.message
      : `Request failed: ${response.status} ${response.statusText}`.trim();
  return new GatehouseError(code, message);
}

/**
 * Fetch `path` (same-origin, cookies included) and return its JSON body as `T`.
 * A `204 No Content` resolves to `undefined`. Throws `GatehouseError` on non-2xx answers and
 * when the network fails (code `internal`, the original error kept as `cause`).
 */
export async function api<T>(path: string, init: ApiInit = {}): Promise<T> {
  const { json, headers, ...rest } = init;
  const merged = new Headers(headers);
  if (!merged.has("Accept")) merged.set("Accept", "application/json");
  let body = rest.body;
  if (json !== undefined) {
    merged.set("Content-Type", "application/json");
    body = JSON.stringify(json);
  }

  let response: Response;
  try {
    response = await fetch(path, { ...rest, body, headers: merged, credentials: "same-origin" });
  } catch (cause) {
    if (cause instanceof DOMException && cause.name === "AbortError") throw cause;
    throw new GatehouseError("internal", "Could not reach Gatehouse. Check your connection and try again.", {
      cause,
    });
  }

  if (!response.ok) throw await errorFromResponse(response);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  if (text.length === 0) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch (cause) {
    throw new GatehouseError("internal", "Gatehouse sent an answer that is not JSON.", { cause });
  }
}

/** Path segment escaping for names and ids that come from data. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}
