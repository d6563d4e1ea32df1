import "server-only";
import { childPath } from "./display";
import type { Expander, Issues, Json } from "./readers";
import { checkKeys, describeGiven, isObject, show, typeName } from "./readers";
import type { ServerRoot } from "./types";

/**
 * A server's `roots`, the one field of an `mcpServers` entry that is about what the server is
 * told rather than how it is reached or bounded (the others are in server-fields.ts).
 */

/** Most entries in one server's `roots`. */
export const MAX_ROOTS = 50;
/** Longest root URI (after `${VAR}` expansion), and longest root name. */
const MAX_ROOT_URI_CHARS = 4096;
const MAX_ROOT_NAME_CHARS = 200;
const ROOT_EXAMPLE = '"file:///srv/notes"';

/**
 * `roots`: what the server is told its roots are when it asks (`roots/list`); absent when the
 * entry has none (the server is then told none). Each entry is a URI string or `{"uri", "name"}`;
 * a URI, `${VAR}`-expanded, must be an absolute `file://` URI (the MCP spec allows no other
 * scheme for now) without a host, query or fragment, written as URL parsing gives it back (no
 * `..`, spaces as `%20`), so the server is told exactly the folder the owner reads in the file.
 * At most {@link MAX_ROOTS}, no URI twice.
 */
export function readRoots(
  raw: Json,
  path: string,
  expand: Expander,
  issues: Issues,
): ServerRoot[] | undefined {
  const value = raw.roots;
  if (value === undefined) return undefined;
  const where = childPath(path, "roots");
  if (!Array.isArray(value)) {
    issues.error(
      where,
      `must be an array of file:// URIs, e.g. [${ROOT_EXAMPLE}], not ${typeName(value)}; leave it out to give the server no roots`,
    );
    return undefined;
  }
  if (value.length > MAX_ROOTS) {
    issues.error(
      where,
      `lists ${value.length} roots; at most ${MAX_ROOTS} are allowed, so give a parent folder instead`,
    );
  }
  const roots: ServerRoot[] = [];
  value.forEach((entry: unknown, i) => {
    const at = childPath(where, i);
    let uriValue: unknown = entry;
    let uriAt = at;
    let name: string | undefined;
    if (isObject(entry)) {
      checkKeys(entry, ["uri", "name"], at, {}, issues);
      uriValue = entry.uri;
      uriAt = childPath(at, "uri");
      if (entry.name !== undefined) name = readRootName(entry.name, childPath(at, "name"), expand, issues);
    } else if (typeof entry !== "string") {
      issues.error(
        at,
        `must be a file:// URI like ${ROOT_EXAMPLE} or {"uri": ${ROOT_EXAMPLE}, "name": "Notes"}, not ${typeName(entry)}`,
      );
      return;
    }
    const uri = readRootUri(uriValue, uriAt, expand, issues);
    if (uri === null) return;
    if (roots.some((r) => r.uri === uri)) {
      issues.error(uriAt, `${show(uri)} is listed twice; remove one`);
      return;
    }
    roots.push(name === undefined ? { uri } : { uri, name });
  });
  return roots;
}

/** One root's URI, `${VAR}`-expanded; as written when a reference is unset (reported), null when wrong. */
function readRootUri(value: unknown, where: string, expand: Expander, issues: Issues): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(where, `must be an absolute file:// URI like ${ROOT_EXAMPLE}, not ${describeGiven(value)}`);
    return null;
  }
  const expanded = expand(value, where);
  // The real URI is unknown; the expander has said why.
  if (expanded.unset.length > 0 || expanded.malformed) return value;
  const uri = expanded.value;
  // Echo the text as written: a `${VAR}` stays a reference in the message.
  const echo = show(value);
  if (uri.length > MAX_ROOT_URI_CHARS) {
    issues.error(where, `is ${uri.length} characters long; at most ${MAX_ROOT_URI_CHARS} are allowed`);
    return null;
  }
  if (!uri.startsWith("file:///")) {
    const fix = /^file:\/\/[^/]/.test(uri)
      ? 'a root on this machine has no host: write three slashes, e.g. "file:///srv/notes"'
      : `roots are file:// URIs of folders (the MCP spec allows no other scheme), e.g. ${ROOT_EXAMPLE}`;
    issues.error(where, `${echo} is not an absolute file:// URI; ${fix}`);
    return null;
  }
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    issues.error(where, `${echo} is not a URI; write it like ${ROOT_EXAMPLE}`);
    return null;
  }
  if (parsed.search !== "" || parsed.hash !== "" || uri.includes("?") || uri.includes("#")) {
    issues.error(
      where,
      `${echo} has a query or fragment, which a folder has not; remove the part from "?" or "#"`,
    );
    return null;
  }
  if (parsed.href !== uri) {
    const as = expanded.names.length === 0 ? ` (${show(parsed.href)})` : "";
    issues.error(
      where,
      `${echo} is not written as URL parsing gives it back${as}: no "." or ".." segments, spaces and non-ASCII percent-encoded; write it in that form`,
    );
    return null;
  }
  if (parsed.pathname === "/") {
    issues.warn(
      where,
      `${echo} tells the server it may work on the whole filesystem; name a folder, e.g. ${ROOT_EXAMPLE}`,
    );
  }
  return uri;
}

/** One root's optional name, `${VAR}`-expanded; undefined when wrong (reported). */
function readRootName(value: unknown, where: string, expand: Expander, issues: Issues): string | undefined {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a non-empty string naming the root, e.g. "Notes", not ${describeGiven(value)}; or leave it out`,
    );
    return undefined;
  }
  const name = expand(value, where).value;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused here.
  if (name.length > MAX_ROOT_NAME_CHARS || /[\u0000-\u001f\u007f]/.test(name)) {
    issues.error(where, `must be at most ${MAX_ROOT_NAME_CHARS} characters on one line; shorten it`);
    return undefined;
  }
  return name;
}
