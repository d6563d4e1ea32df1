import "server-only";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { cleanDescription } from "../catalogue/definition";
import { SERVER_NAME_PATTERN } from "../config";
import type { StoredLinks } from "./stored-links";

/**
 * Resource URIs as agents see them over `/mcp`, and the URIs a server handed out in tool results.
 *
 * A `resource_link` or embedded `resource` block of a tool's result names a URI of the server's
 * own (`demo://…`, `file://…`) that an agent could not read through Gatehouse; over `/mcp` such
 * a URI is rewritten to the `gatehouse://<server>/…` form and counts as offered by that server,
 * like one it listed: the agent may read it (resources.ts), audited as "linked by a tool result".
 */

/** Longest resource URI listed, linked or read; a longer one is never recorded as readable. */
export const MAX_URI_CHARS = 2048;
/** Most URIs kept as linked per server; past it, the one linked longest ago is dropped. */
export const MAX_LINKED_PER_SERVER = 1000;
/** Longest name, title or MIME type of a link as the agent sees it. */
const LINK_FIELD_MAX_CHARS = 200;

/**
 * A server's resource URI under Gatehouse's prefix: `gatehouse://<server>/<original, encoded>`.
 * The server name is the URI's host, so an agent sees where each resource comes from, and two
 * servers' identical URIs never collide.
 */
export function wrapUri(server: string, uri: string): string {
  return `gatehouse://${server}/${encodeURIComponent(uri)}`;
}

/** The server and original URI of a wrapped URI, or null when it is not one of ours. */
export function unwrapUri(uri: string): { server: string; uri: string } | null {
  const m = /^gatehouse:\/\/([^/]+)\/(.+)$/s.exec(uri);
  if (!m?.[1] || !m[2] || !SERVER_NAME_PATTERN.test(m[1])) return null;
  try {
    return { server: m[1], uri: decodeURIComponent(m[2]) };
  } catch {
    return null;
  }
}

/**
 * The URIs each server put in tool results passed to agents over `/mcp`, kept apart from what it
 * listed (a new `resources/list` does not forget them), at most `maxPerServer` per server (default
 * {@link MAX_LINKED_PER_SERVER}): linking one again makes it the newest, and past the bound the
 * oldest is dropped, so a server cannot grow this without end. Held in memory with the listings:
 * a restart forgets them, and the agent calls the tool again.
 */
export class LinkedUris {
  private readonly byServer = new Map<string, Set<string>>();

  /** Store writes under way, awaited by {@link settled}. */
  private readonly pending = new Set<Promise<void>>();

  /**
   * `stored`: where the links are shared with the other replicas of the store (given on
   * PostgreSQL); without it they live in this process alone.
   */
  constructor(
    private readonly maxPerServer = MAX_LINKED_PER_SERVER,
    private readonly stored?: StoredLinks,
  ) {}

  /**
   * Whether `server` linked `uri`: here ({@link has}), or on another replica of the store, in
   * which case it is kept here too.
   */
  async knows(server: string, uri: string): Promise<boolean> {
    if (this.has(server, uri)) return true;
    if (!this.stored || !(await this.stored.knows(server, uri))) return false;
    this.keep(server, uri);
    return true;
  }

  /** Resolves once the links added so far are in the store (a result carrying them may go out then). */
  async settled(): Promise<void> {
    await Promise.all(this.pending);
  }

  /** Whether `server` linked `uri` in a tool result (among its latest `maxPerServer`). */
  has(server: string, uri: string): boolean {
    return this.byServer.get(server)?.has(uri) ?? false;
  }

  /** `server` linked `uri`; a URI over {@link MAX_URI_CHARS} is not recorded. */
  add(server: string, uri: string): void {
    if (uri.length > MAX_URI_CHARS) return;
    this.keep(server, uri);
    if (!this.stored) return;
    // Each leaves the set when done: results that nobody waits on (a task's) hold none for long.
    const write: Promise<void> = this.stored.remember(server, uri).finally(() => this.pending.delete(write));
    this.pending.add(write);
  }

  private keep(server: string, uri: string): void {
    let uris = this.byServer.get(server);
    if (!uris) {
      uris = new Set();
      this.byServer.set(server, uris);
    }
    // A Set keeps insertion order: deleting first moves a linked-again URI to the newest end.
    uris.delete(uri);
    uris.add(uri);
    for (const oldest of uris) {
      if (uris.size <= this.maxPerServer) break;
      uris.delete(oldest);
    }
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object";

/** `value[key]` cleaned like other server text, or the key removed when nothing is left of it. */
function cleanField(value: Record<string, unknown>, key: string, maxChars: number): void {
  const v = value[key];
  if (v === undefined) return;
  const cleaned = typeof v === "string" ? cleanDescription(v, maxChars) : "";
  if (cleaned) value[key] = cleaned;
  else delete value[key];
}

/**
 * One content block as the agent gets it: a `resource_link` or embedded `resource` with its URI
 * wrapped and recorded in `linked`, its name, title, description and MIME type cleaned; any other
 * block as it is. A link or embedded resource without a string URI is dropped (null): the agent
 * could do nothing with it.
 */
function linkBlock(
  server: string,
  block: unknown,
  linked: LinkedUris,
  descriptionMaxChars: number,
): unknown | null {
  if (!isObject(block)) return block;
  if (block.type === "resource_link") {
    if (typeof block.uri !== "string") return null;
    linked.add(server, block.uri);
    const out: Record<string, unknown> = { ...block, uri: wrapUri(server, block.uri) };
    cleanField(out, "title", LINK_FIELD_MAX_CHARS);
    cleanField(out, "description", descriptionMaxChars);
    cleanField(out, "mimeType", LINK_FIELD_MAX_CHARS);
    // `name` is required: the original URI stands in when nothing is left of it (as in resources/list).
    cleanField(out, "name", LINK_FIELD_MAX_CHARS);
    if (out.name === undefined) out.name = block.uri;
    return out;
  }
  if (block.type === "resource") {
    const resource = block.resource;
    if (!isObject(resource) || typeof resource.uri !== "string") return null;
    linked.add(server, resource.uri);
    const inner: Record<string, unknown> = { ...resource, uri: wrapUri(server, resource.uri) };
    cleanField(inner, "mimeType", LINK_FIELD_MAX_CHARS);
    return { ...block, resource: inner };
  }
  return block;
}

/**
 * A tool result of `server` as an agent gets it over `/mcp`: the URIs of its `resource_link`
 * and embedded `resource` blocks in the `gatehouse://<server>/…` form ({@link wrapUri}) and
 * recorded in `linked`, so the agent can read them through Gatehouse; their names and
 * descriptions cleaned of hidden characters like other server text. Everything else —
 * text blocks (even one that spells out a URI), `structuredContent`, `isError`, `_meta` —
 * passes unchanged.
 *
 * Over `/mcp` only: results over REST (`POST /api/calls`, `GET /api/calls/<id>`) keep the
 * server's own URIs, because REST has no route to read a resource through, so a wrapped URI
 * would be one more name for something a REST agent still cannot reach; and the stored call,
 * which the owner reviews, stays what the server sent.
 */
export function linkResult(
  server: string,
  result: CallToolResult,
  linked: LinkedUris,
  descriptionMaxChars: number,
): CallToolResult {
  if (!Array.isArray(result.content)) return result;
  const content = result.content
    .map((block) => linkBlock(server, block, linked, descriptionMaxChars))
    .filter((block) => block !== null);
  return { ...result, content: content as CallToolResult["content"] };
}
