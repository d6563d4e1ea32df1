import "server-only";
import {
  ErrorCode,
  McpError,
  type ReadResourceResult,
  type Resource,
} from "@modelcontextprotocol/sdk/types.js";
import { GatehouseError } from "@/lib/errors";
import { listEnabledTools } from "../catalogue/catalogue";
import { cleanDescription } from "../catalogue/definition";
import { SERVER_NAME_PATTERN } from "../config";
import type { Logger } from "../log";
import type { McpManager } from "../mcp/manager";
import { collectPages } from "../mcp/pages";
import type { Db } from "../store/db";
import { serverOf } from "./tools";

/** MCP's "resource not found" error code (not in the SDK's `ErrorCode` enum). */
export const RESOURCE_NOT_FOUND = -32002;
/** Pages of `resources/list` followed per server. */
const MAX_PAGES = 10;
/** Most resources listed per server. */
const MAX_PER_SERVER = 500;

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

/** Servers whose resources agents may see: those with at least one enabled, callable tool. */
export function resourceServers(db: Db): string[] {
  return [...new Set(listEnabledTools(db).map((t) => serverOf(t.name)))].sort();
}

const clean = (v: unknown, max: number): string | undefined =>
  typeof v === "string" ? cleanDescription(v, max) : undefined;

export interface ResourceDeps {
  db: Db;
  manager: McpManager;
  log: Logger;
  descriptionMaxChars: number;
}

/**
 * `resources/list`: the resources of every server with an enabled tool, asked in parallel, each
 * within its server's deadline. A server that is down or fails is left out (and logged) rather
 * than failing the whole list.
 */
export async function listResources(deps: ResourceDeps): Promise<Resource[]> {
  const lists = await Promise.all(
    resourceServers(deps.db).map(async (server) => {
      try {
        return await deps.manager.get(server).read(async (client, options) => {
          if (!client.getServerCapabilities()?.resources) return [];
          const listed = await collectPages(
            async (params) => {
              const res = await client.listResources(params, options);
              return { items: res.resources, nextCursor: res.nextCursor };
            },
            { maxPages: MAX_PAGES, maxItems: MAX_PER_SERVER },
          );
          return listed.map((r) => {
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
        });
      } catch (err) {
        deps.log.warn(`resources of ${server} left out of resources/list: ${String(err)}`);
        return [];
      }
    }),
  );
  return lists.flat();
}

function notFound(uri: string): McpError {
  return new McpError(RESOURCE_NOT_FOUND, "Resource not found", { uri });
}

/**
 * `resources/read` of a wrapped URI, passed to its server while that server still has an
 * enabled tool. Content URIs come back wrapped too.
 */
export async function readResource(deps: ResourceDeps, uri: string): Promise<ReadResourceResult> {
  const target = unwrapUri(uri);
  if (!target || !resourceServers(deps.db).includes(target.server)) throw notFound(uri);
  let res: ReadResourceResult | null;
  try {
    res = await deps.manager.get(target.server).read(async (client, options) => {
      if (!client.getServerCapabilities()?.resources) return null;
      return client.readResource({ uri: target.uri }, options);
    });
  } catch (err) {
    if (!(err instanceof GatehouseError)) throw err;
    const cause = err.cause as { code?: unknown } | undefined;
    if (cause?.code === RESOURCE_NOT_FOUND) throw notFound(uri);
    throw new McpError(ErrorCode.InternalError, err.message);
  }
  if (!res) throw notFound(uri);
  return {
    contents: res.contents.flatMap((c): ReadResourceResult["contents"] => {
      const mimeType = clean(c.mimeType, 200);
      const base = { uri: wrapUri(target.server, c.uri), ...(mimeType ? { mimeType } : {}) };
      if ("text" in c && typeof c.text === "string") return [{ ...base, text: c.text }];
      if ("blob" in c && typeof c.blob === "string") return [{ ...base, blob: c.blob }];
      return [];
    }),
  };
}
