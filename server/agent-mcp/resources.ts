import "server-only";
import { ProtocolErrorCode, type ReadResourceResult, type Resource } from "@modelcontextprotocol/server";
import { GatehouseError } from "@/lib/errors";
import { cleanDescription } from "../catalogue/definition";
import type { Logger } from "../log";
import { collectPages } from "../mcp/pages";
import { anyGlobMatches } from "../rules/glob";
import { writeAudit } from "../store/audit";
import { type Db, postgresUrlOf } from "../store/db";
import { LinkedUris, MAX_LINKED_PER_SERVER, MAX_URI_CHARS, unwrapUri, wrapUri } from "./links";
import { clean, Listings, RELIST_MIN_INTERVAL_MS, type ResourceDeps, resourceServers } from "./listings";
import { percentDecodings } from "./percent";
import { rpcFailure } from "./rpc";
import { StoredLinks } from "./stored-links";
import {
  holdsDotSegment,
  ListedTemplates,
  relistTemplates,
  unwrapVerbatimUri,
  wrapVerbatim,
} from "./templates";

/**
 * Resources over `/mcp`: what agents may read of the resources of servers with an enabled tool.
 *
 * The rule: a `resources/read` reaches the server only for a URI the server itself listed in
 * the latest `resources/list` Gatehouse fetched of it, or put in a tool result passed to an
 * agent over `/mcp` (links.ts), or one matching a glob of the server's `resources.allow` in the
 * config (an owner's decision, made ahead, for resources a server serves without listing them),
 * or an expansion of one of the templates it listed last (templates.ts). Every read, allowed or
 * refused, writes an audit row with the agent's token name; a refusal answers "resource not
 * found" (-32002) with the same words whatever the reason, so an agent cannot probe what exists.
 */

/** MCP's "resource not found" error code (not in the SDK's `ErrorCode` enum). */
export const RESOURCE_NOT_FOUND = -32002;
/** Pages of `resources/list` followed per server. */
const MAX_PAGES = 10;
/** Most resources listed per server; a read of one past it is refused like any unlisted URI. */
const MAX_PER_SERVER = 500;
/**
 * Most bytes one read returns to the agent: texts (as UTF-8), blobs (as base64) and content URIs
 * together. A text is cut there; a blob that does not fit is left out (half a blob is no file).
 */
export const RESOURCE_READ_MAX_BYTES = 1024 * 1024;
/** `_meta` key set on a read's result, and on a cut text, when the read was cut to its bound. */
export const TRUNCATED_META_KEY = "gatehouse/truncated";
/** Audit subjects and details are cut to this many characters. */
const AUDIT_TEXT_MAX_CHARS = 512;
/** What every refused read answers: the same words, whether the URI exists or not. */
const REFUSED_MESSAGE =
  "Resource not found: only the resources listed by resources/list, and expansions of the templates listed by resources/templates/list, can be read";

/**
 * Whether an owner's `resources.allow` globs admit `uri`. Only a URI in canonical form can match:
 * exactly what URL parsing gives back (no `.` or `..` segments, no `localhost` file host, no
 * backslash, nothing it would percent-encode), with no percent-encoded `.`, `/`, `\` or NUL
 * either, however many times over it is encoded ({@link percentDecodings}: `%252e` is `%2e` to a
 * server that decodes twice). Otherwise a glob's `*` could be walked out of: `file:///srv/docs/*`
 * must never admit `file:///srv/docs/../../etc/passwd`, `file:///srv/docs/%2e%2e/secret` or
 * `file:///srv/docs/%252e%252e/secret`, which a server would resolve outside the folder.
 */
export function allowedByOwner(globs: readonly string[], uri: string): boolean {
  if (globs.length === 0 || uri.length > MAX_URI_CHARS) return false;
  const decodings = percentDecodings(uri);
  if (!decodings || decodings.some((d) => /%(2e|2f|5c|00)/i.test(d) || holdsDotSegmentBetween(d, /[/:]/)))
    return false;
  // What the URL parser leaves alone but a server may still resolve: a query or fragment (a
  // server that strips `file://` reads `/srv/docs/?/../../etc/passwd` as a path), a backslash
  // (kept as is in schemes the parser does not know), and dot segments in an opaque path.
  if (/[?#\\]/.test(uri)) return false;
  try {
    if (new URL(uri).href !== uri) return false;
  } catch {
    return false;
  }
  return anyGlobMatches(globs, uri);
}

/** Whether `text`, cut at each `separators` match, has a `.` or `..` piece. */
function holdsDotSegmentBetween(text: string, separators: RegExp): boolean {
  return text.split(separators).some((seg) => seg === "." || seg === "..");
}

/**
 * The resource URIs each server listed last ({@link Listings}); beside them, kept apart, the URIs
 * each linked in tool results ({@link LinkedUris}: bounded, not replaced by a new list), and,
 * under the rules of listings, the templates (templates.ts) and the names of the prompts
 * (prompts.ts) each listed last.
 */
export class ListedResources extends Listings {
  readonly prompts: Listings;
  readonly templates: ListedTemplates;
  readonly linked: LinkedUris;

  /**
   * `maxLinkedPerServer`: default `MAX_LINKED_PER_SERVER` (links.ts). `storedLinks`: where linked
   * URIs are shared with the other replicas (PostgreSQL); default none.
   */
  constructor(
    minIntervalMs = RELIST_MIN_INTERVAL_MS,
    now: () => number = Date.now,
    maxLinkedPerServer?: number,
    storedLinks?: StoredLinks,
  ) {
    super(minIntervalMs, now);
    this.prompts = new Listings(minIntervalMs, now);
    this.templates = new ListedTemplates(minIntervalMs, now);
    this.linked = new LinkedUris(maxLinkedPerServer, storedLinks);
  }

  /** The listings of an endpoint on `db`: linked URIs shared with the other replicas on PostgreSQL. */
  static forStore(db: Db, log: Logger): ListedResources {
    const stored = postgresUrlOf(db) ? new StoredLinks(db, log, MAX_LINKED_PER_SERVER) : undefined;
    return new ListedResources(RELIST_MIN_INTERVAL_MS, Date.now, MAX_LINKED_PER_SERVER, stored);
  }
}

/**
 * A text for an audit row: hidden characters stripped, cut to a sane length, then one line
 * (cleaning turns U+2028/2029 into newlines, so the line breaks go after it).
 */
const auditText = (text: string): string =>
  cleanDescription(text, AUDIT_TEXT_MAX_CHARS).replace(/[\t\n\r\u2028\u2029]/g, " ");

/** Who is reading, and what their session has seen listed. */
export interface ReadContext {
  /** The agent token's name: the audit rows' actor. */
  agent: string;
  listed: ListedResources;
}

/**
 * One server's resources as it lists them (bounded pages and count), those with a URI over
 * {@link MAX_URI_CHARS} left out; recorded into `listed` when given. Null when the server offers
 * no resources.
 */
async function listServer(
  deps: ResourceDeps,
  server: string,
  listed?: ListedResources,
): Promise<Resource[] | null> {
  const resources = await deps.manager.get(server).read(async (client, options) => {
    if (!client.getServerCapabilities()?.resources) return null;
    return collectPages(
      async (params) => {
        // One request per page: the client's own listResources() walks every page itself, past these bounds.
        const res = await client.request({ method: "resources/list", ...(params && { params }) }, options);
        return { items: res.resources, nextCursor: res.nextCursor };
      },
      { maxPages: MAX_PAGES, maxItems: MAX_PER_SERVER },
    );
  });
  const kept = resources?.filter((r) => typeof r.uri === "string" && r.uri.length <= MAX_URI_CHARS) ?? null;
  listed?.record(server, kept?.map((r) => r.uri) ?? []);
  return kept;
}

/**
 * `resources/list`: the resources of every server with an enabled tool, asked in parallel, each
 * within its server's deadline, and recorded in `listed` as what the agent may read. A server
 * that is down or fails is left out (and logged) rather than failing the whole list.
 */
export async function listResources(deps: ResourceDeps, listed?: ListedResources): Promise<Resource[]> {
  const lists = await Promise.all(
    (await resourceServers(deps)).map(async (server) => {
      try {
        const resources = (await listServer(deps, server, listed)) ?? [];
        return resources.map((r) => {
          const resource: Resource = {
            uri: wrapUri(server, r.uri),
            name: clean(r.name, 200) || r.uri,
          };
          const title = clean(r.title, 200);
          const description = clean(r.description, deps.descriptionMaxChars);
          const mimeType = clean(r.mimeType, 200);
          if (title) resource.title = title;
          if (description) resource.description = description;
          if (mimeType) resource.mimeType = mimeType;
          if (typeof r.size === "number") resource.size = r.size;
          return resource;
        });
      } catch (err) {
        deps.log.warn(`resources of ${server} left out of resources/list: ${String(err)}`);
        return [];
      }
    }),
  );
  return lists.flat();
}

/**
 * Writes the audit row of a read (or of a prompt's get: `what`, default "read"). A request nobody
 * could record is not answered: the agent gets an internal error (and may try again), never
 * content that left no trace.
 */
export async function audit(
  deps: ResourceDeps,
  row: {
    actor: string;
    action: "resource.read" | "resource.refused" | "prompt.get" | "prompt.refused";
    subject: string;
    detail: string;
    durationMs?: number;
  },
  what = "read",
): Promise<void> {
  try {
    await writeAudit(deps.db, { ...row, subject: auditText(row.subject), detail: auditText(row.detail) });
  } catch (err) {
    deps.log.error(`a ${row.action} could not be recorded`, { error: String(err) });
    throw rpcFailure(ProtocolErrorCode.InternalError, `Gatehouse could not record this ${what}; try again`);
  }
  deps.bus?.publish({ type: "resources" });
}

/** Refuses a read: its audit row, then the one answer every refusal gets. */
async function refuse(
  deps: ResourceDeps,
  ctx: ReadContext,
  subject: string,
  why: string,
  uri: string,
): Promise<never> {
  await audit(deps, { actor: ctx.agent, action: "resource.refused", subject, detail: why });
  throw rpcFailure(RESOURCE_NOT_FOUND, REFUSED_MESSAGE, { uri });
}

/**
 * Whether `uri` may be read through one of `server`'s latest templates: allowed, naming the
 * template; refused, saying why; or null when it matches none.
 */
function throughTemplate(
  deps: ResourceDeps,
  ctx: ReadContext,
  server: string,
  uri: string,
): { allowed: string } | { refused: string } | null {
  const { template, exhausted } = ctx.listed.templates.matching(server, uri);
  if (exhausted) deps.log.warn(`a read gave up matching the templates of ${server}: they are too costly`);
  if (template === null) return null;
  if (holdsDotSegment(uri))
    return { refused: `matches template ${template} but holds a dot segment or an encoded NUL` };
  return { allowed: `through template ${template}` };
}

/**
 * Why `target` may be read — "listed", "linked by a tool result", "allowed by resources.allow"
 * or "through template <template>" — or why not. A URI that is none of these gets its server's
 * resources and templates listed again ({@link ListedResources.refresh}: bounded), once, and is
 * then judged on those lists.
 */
async function permission(
  deps: ResourceDeps,
  ctx: ReadContext,
  target: { server: string; uri: string },
): Promise<{ allowed: string } | { refused: string }> {
  const { server, uri } = target;
  const notListed = { refused: "not listed by the server" };
  if (ctx.listed.has(server, uri)) return { allowed: "listed" };
  if (await ctx.listed.linked.knows(server, uri)) return { allowed: "linked by a tool result" };
  const allow = deps.manager.servers.find((s) => s.name === server)?.resources?.allow ?? [];
  if (allowedByOwner(allow, uri)) return { allowed: "allowed by resources.allow" };
  if (uri.length > MAX_URI_CHARS) return notListed;
  const templated = throughTemplate(deps, ctx, server, uri);
  if (templated) return templated;
  await Promise.all([
    ctx.listed.refresh(server, async () => {
      try {
        await listServer(deps, server, ctx.listed);
      } catch (err) {
        deps.log.warn(`resources of ${server} could not be listed again for a read: ${String(err)}`);
      }
    }),
    relistTemplates(deps, server, ctx.listed.templates),
  ]);
  if (ctx.listed.has(server, uri)) return { allowed: "listed" };
  return throughTemplate(deps, ctx, server, uri) ?? notListed;
}

/**
 * `resources/read` of a wrapped URI (`gatehouse://<server>/<percent-encoded URI>`, or
 * `gatehouse://<server>/-/<URI>` as templates expand), passed to its server while that server
 * still has an enabled tool and the URI is one the server listed or linked, an owner allowed, or
 * an expansion of a template the server listed (see the top of this file); refused with -32002
 * otherwise. Content URIs come back wrapped too, in the form the read was asked in; what comes
 * back is bounded by {@link RESOURCE_READ_MAX_BYTES}. Every read writes one audit row,
 * `resource.read` (allowed: why, size, any cut, or the server's error) or `resource.refused`
 * (why), with the agent as actor and `<server> <original URI>` as subject.
 */
export async function readResource(
  deps: ResourceDeps,
  ctx: ReadContext,
  uri: string,
): Promise<ReadResourceResult> {
  const verbatim = unwrapVerbatimUri(uri);
  const target = verbatim ?? unwrapUri(uri);
  if (!target) return refuse(deps, ctx, uri, "not a gatehouse://<server>/<uri> URI", uri);
  const subject = `${target.server} ${target.uri}`;
  if (!(await resourceServers(deps)).includes(target.server)) {
    return refuse(deps, ctx, subject, "the server has no enabled tool", uri);
  }
  const permitted = await permission(deps, ctx, target);
  if ("refused" in permitted) return refuse(deps, ctx, subject, permitted.refused, uri);
  const why = permitted.allowed;

  const started = Date.now();
  const read = (detail: string) =>
    audit(deps, {
      actor: ctx.agent,
      action: "resource.read",
      subject,
      detail: `${why}; ${detail}`,
      durationMs: Date.now() - started,
    });
  let res: ReadResourceResult | null;
  try {
    res = await deps.manager.get(target.server).read(async (client, options) => {
      if (!client.getServerCapabilities()?.resources) return null;
      return client.readResource({ uri: target.uri }, options);
    });
  } catch (err) {
    if (!(err instanceof GatehouseError)) {
      await read("failed unexpectedly");
      throw err;
    }
    await read(`failed: ${err.message}`);
    if (saysNotFound(err.cause)) throw rpcFailure(RESOURCE_NOT_FOUND, "Resource not found", { uri });
    throw rpcFailure(ProtocolErrorCode.InternalError, err.message);
  }
  if (!res) {
    await read("failed: the server offers no resources");
    throw rpcFailure(RESOURCE_NOT_FOUND, "Resource not found", { uri });
  }
  const bounded = boundContents(
    target.server,
    res.contents,
    RESOURCE_READ_MAX_BYTES,
    verbatim ? (u) => wrapVerbatim(target.server, u) : undefined,
  );
  await read(
    bounded.cut
      ? `${bounded.bytes} of ${bounded.given} bytes returned (cut to ${RESOURCE_READ_MAX_BYTES})`
      : `${bounded.bytes} bytes`,
  );
  return bounded.cut
    ? { contents: bounded.contents, _meta: { [TRUNCATED_META_KEY]: true } }
    : { contents: bounded.contents };
}

/**
 * Whether `error` is a resource-not-found as SDK v2 and the 2026-07-28 revision code it (SEP-2164):
 * -32602 whose data is exactly `{uri}`, the SDK's own reading of that code. Any other -32602, one
 * with more data than the URI included, is a bad request, not an absence.
 */
export function isModernNotFound(error: { code?: unknown; data?: unknown }): boolean {
  const { code, data } = error;
  if (code !== ProtocolErrorCode.InvalidParams || typeof data !== "object" || data === null) return false;
  const keys = Object.keys(data);
  return keys.length === 1 && keys[0] === "uri" && typeof (data as { uri?: unknown }).uri === "string";
}

/**
 * Whether a tool server's error answer to `resources/read` means "no such resource": -32002
 * from a 2025 server, or {@link isModernNotFound} from a 2026-07-28 one or any on SDK v2.
 */
function saysNotFound(cause: unknown): boolean {
  if (typeof cause !== "object" || cause === null) return false;
  return (cause as { code?: unknown }).code === RESOURCE_NOT_FOUND || isModernNotFound(cause);
}

type Contents = ReadResourceResult["contents"];

/** The first `maxBytes` bytes of `text` as UTF-8, never cutting a character in two. */
export function utf8Prefix(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  let end = Math.min(maxBytes, bytes.length);
  // Step back over continuation bytes (10xxxxxx) to the start of the character cut in two.
  while (end > 0 && end < bytes.length && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString("utf8");
}

/**
 * A read's contents as the agent gets them: URIs wrapped (by `wrap`, default `wrapUri`), MIME
 * types cleaned, parts that are neither text nor blob dropped, and at most `maxBytes` in all
 * (see {@link RESOURCE_READ_MAX_BYTES}). `bytes`: what is returned; `given`: what the server
 * sent; `cut`: whether anything was cut or left out.
 */
export function boundContents(
  server: string,
  contents: Contents,
  maxBytes: number,
  wrap: (uri: string) => string = (uri) => wrapUri(server, uri),
): { contents: Contents; bytes: number; given: number; cut: boolean } {
  const out: Contents = [];
  let budget = maxBytes;
  let given = 0;
  let cut = false;
  for (const c of contents) {
    const mimeType = clean(c.mimeType, 200);
    const base = { uri: wrap(c.uri), ...(mimeType ? { mimeType } : {}) };
    const text = "text" in c && typeof c.text === "string" ? c.text : null;
    const blob = "blob" in c && typeof c.blob === "string" ? c.blob : null;
    if (text === null && blob === null) continue;
    const size = base.uri.length + (text !== null ? Buffer.byteLength(text, "utf8") : (blob?.length ?? 0));
    given += size;
    if (size <= budget) {
      out.push(text !== null ? { ...base, text } : { ...base, blob: blob ?? "" });
      budget -= size;
      continue;
    }
    cut = true;
    const room = budget - base.uri.length;
    if (text === null || room <= 0) continue;
    const part = utf8Prefix(text, room);
    out.push({ ...base, text: part, _meta: { [TRUNCATED_META_KEY]: true } });
    budget -= base.uri.length + Buffer.byteLength(part, "utf8");
  }
  return { contents: out, bytes: maxBytes - budget, given, cut };
}
