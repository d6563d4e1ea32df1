import "server-only";
import { childPath } from "./display";
import { writeRefs } from "./expand";
import type { Expander, Issues, Json } from "./readers";
import { checkKeys, describeGiven, isObject, show, typeName } from "./readers";
import type { ServerAuthConfig, ServerConfig } from "./types";

/**
 * A server's `auth`: how Gatehouse signs in to an HTTP server rather than what static headers it
 * sends. Only `"type": "oauth"` exists. The client secret is the one secret here: no message
 * describes it beyond its type, and it must come from the environment, never from the file.
 */

/** Most entries in one server's `auth.scopes`. */
export const MAX_SCOPES = 50;
/** Longest scope name, and longest `clientId` (after `${VAR}` expansion). */
export const MAX_SCOPE_CHARS = 256;
export const MAX_CLIENT_ID_CHARS = 256;

const KEYS = ["type", "scopes", "clientId", "clientSecret", "issuer", "allowPrivate"] as const;
const EXAMPLE = '{"type": "oauth", "scopes": ["read", "write"]}';
const SECRET_EXAMPLE = '"${TASKS_CLIENT_SECRET}"';
const NOT_HERE = "Gatehouse discovers it from the server's metadata (RFC 9728, RFC 8414); remove it";

/** Keys of other clients' OAuth settings, answered with what Gatehouse does instead. */
const HINTS: Record<string, string> = {
  scope: 'use "scopes", an array of scope names, e.g. ["read", "write"]',
  client_id: 'use "clientId" instead',
  client_secret: 'use "clientSecret" instead',
  callbackPort: "the sign-in returns to /oauth/callback on Gatehouse's public origin; remove it",
  redirectUri: "the sign-in returns to /oauth/callback on Gatehouse's public origin; remove it",
  redirect_uri: "the sign-in returns to /oauth/callback on Gatehouse's public origin; remove it",
  authorizationUrl: NOT_HERE,
  tokenUrl: NOT_HERE,
  issuer_url: 'use "issuer" instead (only with "clientId")',
};

/** RFC 6749 §3.3 scope-token: printable ASCII except space, `"` and `\`. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
/** RFC 6749 Appendix A.1 client_id (printable ASCII), without a space at either end (a slip, never meant). */
const CLIENT_ID = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
/** The only form `clientSecret` takes: one whole `${NAME}` reference, no default, nothing around it. */
const WHOLE_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/;

/**
 * `auth` of an HTTP server entry; undefined when absent, or when not usable (reported).
 * `headerNames`: the entry's `headers` keys as written, since an `Authorization` header beside
 * `auth` would fight the access token for the same header. `expand` is the entry's own expander
 * (an unset `${VAR}` is an error on an enabled server, a warning on a dark one, as in headers).
 */
export function readAuth(
  raw: Json,
  path: string,
  headerNames: readonly string[],
  expand: Expander,
  issues: Issues,
): ServerAuthConfig | undefined {
  const value = raw.auth;
  if (value === undefined) return undefined;
  const where = childPath(path, "auth");
  for (const name of headerNames) {
    if (name.toLowerCase() !== "authorization") continue;
    issues.error(
      childPath(childPath(path, "headers"), name),
      'cannot be sent beside "auth": the OAuth access token goes in the Authorization header; remove this header, or remove "auth" to keep sending it',
    );
  }
  if (!isObject(value)) {
    issues.error(where, `must be an object like ${EXAMPLE}, not ${typeName(value)}`);
    return undefined;
  }
  checkKeys(value, KEYS, where, HINTS, issues);
  const at = (key: (typeof KEYS)[number]) => childPath(where, key);

  const type = value.type;
  let known = true;
  if (type === undefined) {
    issues.error(at("type"), 'is required; write "type": "oauth"');
    known = false;
  } else if (type !== "oauth") {
    const given = typeof type === "string" ? show(type) : typeName(type);
    issues.error(
      at("type"),
      `${given} is not an auth type; use "oauth" (a static token goes in "headers" instead, e.g. "Authorization": "Bearer \${TOKEN}")`,
    );
    known = false;
  }

  const scopes = readScopes(value.scopes, at("scopes"), issues);
  const clientId =
    value.clientId === undefined ? null : readClientId(value.clientId, at("clientId"), expand, issues);
  let clientSecret: string | null = null;
  if (value.clientSecret !== undefined) {
    if (value.clientId === undefined) {
      issues.error(
        at("clientSecret"),
        'needs "clientId": a client secret belongs to a client registered in advance; add its "clientId", or remove "clientSecret"',
      );
    }
    clientSecret = readClientSecret(value.clientSecret, at("clientSecret"), expand, issues);
  }
  let issuer: string | null = null;
  if (value.issuer !== undefined) issuer = readIssuer(value.issuer, at("issuer"), issues);
  else if (value.clientId !== undefined) {
    issues.error(
      at("issuer"),
      'required with clientId: a client registered in advance belongs to one authorization server, and its secret goes to no other; write that server\'s issuer URL, e.g. "issuer": "https://auth.example.com"',
    );
  }
  let allowPrivate = false;
  if (value.allowPrivate !== undefined) {
    if (typeof value.allowPrivate === "boolean") allowPrivate = value.allowPrivate;
    else issues.error(at("allowPrivate"), `must be true or false, not ${typeName(value.allowPrivate)}`);
  }
  return known ? { type: "oauth", scopes, clientId, clientSecret, issuer, allowPrivate } : undefined;
}

/**
 * `issuer`: the RFC 8414 issuer identifier of the authorization server a configured client is
 * registered with, as written: https (plain http only on a loopback host, for a development
 * server), no query or fragment. Null when wrong (reported).
 */
function readIssuer(value: unknown, where: string, issues: Issues): string | null {
  const shape =
    'must be an https URL, the issuer of the authorization server the client is registered with, e.g. "https://auth.example.com"';
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(where, `${shape}, not ${describeGiven(value)}`);
    return null;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    issues.error(where, `${shape}; ${show(value)} is not a URL`);
    return null;
  }
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const loopback = host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
  if (!(url.protocol === "https:" || (url.protocol === "http:" && loopback))) {
    issues.error(where, `${shape} (plain http only on a loopback host), not a ${url.protocol} URL`);
    return null;
  }
  if (url.search !== "" || url.hash !== "" || value.includes("?") || value.includes("#")) {
    issues.error(where, "is an issuer identifier, with no query or fragment (RFC 8414); remove them");
    return null;
  }
  if (url.username || url.password) {
    issues.error(where, "must not hold credentials; remove the user and password from the URL");
    return null;
  }
  return value;
}

/** `scopes`: 1..{@link MAX_SCOPES} distinct RFC 6749 scope tokens; [] when absent or unusable (reported). */
function readScopes(value: unknown, where: string, issues: Issues): string[] {
  if (value === undefined) return [];
  const absent = 'leave "scopes" out to ask for what the server says it needs';
  if (!Array.isArray(value)) {
    const words = typeof value === "string" ? value.trim().split(/\s+/).filter(Boolean) : [];
    const fix = words.length > 0 ? `; write [${words.map(show).join(", ")}]` : "";
    issues.error(
      where,
      `must be an array of scope names like ["read", "write"], not ${typeName(value)}${fix}`,
    );
    return [];
  }
  if (value.length === 0) {
    issues.error(where, `lists no scope; name at least one, or ${absent}`);
    return [];
  }
  if (value.length > MAX_SCOPES) {
    issues.error(where, `lists ${value.length} scopes; at most ${MAX_SCOPES} are allowed`);
  }
  const scopes: string[] = [];
  value.forEach((scope: unknown, i) => {
    const at = childPath(where, i);
    if (typeof scope !== "string" || scope === "") {
      issues.error(at, `must be a non-empty scope name like "read", not ${describeGiven(scope)}`);
    } else if (scope.length > MAX_SCOPE_CHARS) {
      issues.error(at, `is ${scope.length} characters long; at most ${MAX_SCOPE_CHARS} are allowed`);
    } else if (/\s/.test(scope)) {
      const words = scope.trim().split(/\s+/).filter(Boolean);
      const fix =
        words.length > 1 ? `list each on its own: ${words.map(show).join(", ")}` : "remove the whitespace";
      issues.error(at, `${show(scope)} holds whitespace, and a scope is one word (RFC 6749); ${fix}`);
    } else if (!SCOPE_TOKEN.test(scope)) {
      issues.error(
        at,
        `${show(scope)} holds a character no scope may hold; RFC 6749 allows printable ASCII except space, '"' and '\\'`,
      );
    } else if (scopes.includes(scope)) {
      issues.error(at, `${show(scope)} is listed twice; remove one`);
    } else {
      scopes.push(scope);
    }
  });
  return scopes;
}

/**
 * `clientId`, `${VAR}`-expanded: at most {@link MAX_CLIENT_ID_CHARS} printable ASCII characters.
 * As written when a reference is unset (reported), null when wrong. Not a secret, but it may come
 * from the environment, so messages do not echo it.
 */
function readClientId(value: unknown, where: string, expand: Expander, issues: Issues): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a non-empty string, the client ID the authorization server issued, not ${describeGiven(value)}`,
    );
    return null;
  }
  const expanded = expand(value, where);
  if (expanded.unset.length > 0 || expanded.malformed) return value;
  const id = expanded.value;
  const afterExpansion = expanded.names.length > 0 ? " (after ${VAR} expansion)" : "";
  if (id.length > MAX_CLIENT_ID_CHARS) {
    issues.error(
      where,
      `is ${id.length} characters long${afterExpansion}; at most ${MAX_CLIENT_ID_CHARS} are allowed`,
    );
    return null;
  }
  if (!CLIENT_ID.test(id)) {
    issues.error(
      where,
      `holds a character a client ID cannot${afterExpansion}; RFC 6749 allows printable ASCII, and no space at either end`,
    );
    return null;
  }
  return id;
}

/**
 * `clientSecret`: exactly one `${NAME}` reference, expanded; a secret, so never described beyond
 * its type. Null when wrong, and when the reference is unset (reported, as an unset header
 * reference is; only a dark server gets that far): no `${VAR}` text is ever taken for a secret,
 * to be sent to a token endpoint or registered for redaction.
 */
function readClientSecret(value: unknown, where: string, expand: Expander, issues: Issues): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a \${VAR} reference to the secret, e.g. ${SECRET_EXAMPLE}, not ${describeGiven(value)}`,
    );
    return null;
  }
  if (!WHOLE_REFERENCE.test(value)) {
    issues.error(
      where,
      `must be one \${VAR} reference and nothing else, e.g. ${SECRET_EXAMPLE}: a secret written here (or as a \${VAR:-default}) would sit in gatehouse.json for anyone who can read the file or its backups; set it in Gatehouse's environment`,
    );
    return null;
  }
  const expanded = expand(value, where);
  if (expanded.unset.length > 0) return null;
  if (expanded.value === "") {
    issues.error(
      where,
      `is empty once ${writeRefs(expanded.names)} is expanded; set ${expanded.names.join(", ")} to the client secret`,
    );
    return null;
  }
  if (/[\r\n\0]/.test(expanded.value)) {
    issues.error(
      where,
      `contains a line break or NUL character once ${writeRefs(expanded.names)} is expanded; set ${expanded.names.join(", ")} to the secret alone`,
    );
    return null;
  }
  return expanded.value;
}

/**
 * The client secrets of `servers`, for the log's redaction (`registerSecrets`), as header values
 * are registered: a token endpoint's error may echo the secret it was sent.
 */
export function authSecrets(servers: readonly ServerConfig[]): string[] {
  return servers.flatMap((s) => (s.auth?.clientSecret ? [s.auth.clientSecret] : []));
}
