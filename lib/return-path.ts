/**
 * Where sign-in sends a person afterwards: the page they were on (`/login?next=/approvals/<id>`),
 * and never anywhere else. Used by the server (building the redirect) and by the sign-in page
 * (reading it back), so both sides agree on what a safe `next` is.
 */

/** A return path longer than this is dropped; no console page needs one near it. */
const MAX_RETURN_PATH = 2048;
/** Any origin works: a path that resolves against it to another origin is refused. */
const PROBE_ORIGIN = "http://gatehouse.invalid";

/**
 * `raw` as a same-origin relative path (`/approvals/abc?x=1`), or null when it is anything else:
 * not a string, empty, not starting with "/", a scheme-relative `//host` or `/\host` (browsers
 * read a backslash as a slash), any backslash, control character or space (the URL parser drops
 * tabs and newlines, so `/\t/host` would become `//host`), over 2048 characters, or a path that
 * still resolves to another origin. The sign-in page itself is refused too (it would loop).
 */
export function safeReturnPath(raw: unknown): string | null {
  if (typeof raw !== "string" || raw.length === 0 || raw.length > MAX_RETURN_PATH) return null;
  if (!raw.startsWith("/") || raw.startsWith("//")) return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses.
  if (/[\\\s\u0000-\u001f\u007f]/.test(raw)) return null;
  let url: URL;
  try {
    url = new URL(raw, PROBE_ORIGIN);
  } catch {
    return null;
  }
  if (url.origin !== PROBE_ORIGIN) return null;
  if (url.pathname === "/login" || url.pathname.startsWith("/login/")) return null;
  // Dot segments can collapse into a scheme-relative path (`/..//evil.example` → `//evil.example`):
  // the answer must be safe on its own, for a caller that does not check it again.
  if (url.pathname.startsWith("//")) return null;
  return `${url.pathname}${url.search}${url.hash}`;
}

/**
 * The sign-in page's address that returns to `path` afterwards: `/login?next=<path>`, or plain
 * `/login` when `path` is not a safe return path or is the home page (where sign-in lands anyway).
 */
export function signInHref(path: string | null | undefined): string {
  const next = safeReturnPath(path);
  if (!next || next === "/") return "/login";
  return `/login?${new URLSearchParams({ next }).toString()}`;
}
