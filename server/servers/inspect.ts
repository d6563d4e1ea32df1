import "server-only";
import type { PromptView, ResourceContentView, ResourceView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { HIDDEN_CHARACTERS } from "@/lib/hidden-text";
import { cleanDescription } from "../catalogue/definition";
import { redact } from "../log";
import type { Supervised } from "../mcp/manager";
import { collectPages } from "../mcp/pages";

/** Pages of resources/prompts followed for the owner's view. */
const MAX_PAGES = 10;
/** Most text of one resource shown to the owner. */
export const RESOURCE_TEXT_MAX_CHARS = 256 * 1024;
const TEXT_MAX = 1024;
/** Characters past a cap still redacted, so a secret that straddles the cut is found whole. */
const REDACT_SLACK = 1024;

/** The first `max` characters of `text`, redacted before the cut. */
const redactedUpTo = (text: string, max: number): string =>
  // Hidden characters go first, so a secret split by them is found whole.
  redact(text.slice(0, max + REDACT_SLACK).replace(HIDDEN_CHARACTERS, ""));

/**
 * A server's text as the owner sees it: cleaned and capped like descriptions, and redacted (a
 * server may echo a credential it was sent). Redacted before the cap, so a cut never halves a
 * secret.
 */
const clean = (v: unknown, max = TEXT_MAX): string | null =>
  typeof v === "string" ? cleanDescription(redactedUpTo(v, max), max) : null;

/** The server's resources, for the owner's server page; empty when it offers none. */
export async function listServerResources(
  server: Supervised,
): Promise<{ supported: boolean; resources: ResourceView[] }> {
  return server.read(async (client, options) => {
    if (!client.getServerCapabilities()?.resources) return { supported: false, resources: [] };
    const listed = await collectPages(
      async (params) => {
        // One request per page: the client's own listResources() walks every page itself, past these bounds.
        const res = await client.request({ method: "resources/list", ...(params && { params }) }, options);
        return { items: res.resources, nextCursor: res.nextCursor };
      },
      { maxPages: MAX_PAGES },
    );
    const resources: ResourceView[] = listed.map((r) => ({
      uri: clean(r.uri, 2048) ?? "",
      name: clean(r.name) ?? "",
      description: clean(r.description),
      mimeType: clean(r.mimeType, 200),
    }));
    return { supported: true, resources };
  });
}

/** One resource's contents: text (capped), binary parts only described. */
export async function readServerResource(server: Supervised, uri: string): Promise<ResourceContentView> {
  return server.read(async (client, options) => {
    if (!client.getServerCapabilities()?.resources) {
      throw new GatehouseError("not_found", `server ${server.config.name} offers no resources`);
    }
    const res = await client.readResource({ uri }, options);
    return {
      uri,
      contents: res.contents.map((c) => {
        const mimeType = clean(c.mimeType, 200);
        if ("text" in c && typeof c.text === "string") {
          const truncated = c.text.length > RESOURCE_TEXT_MAX_CHARS;
          return {
            mimeType,
            text: cleanDescription(redactedUpTo(c.text, RESOURCE_TEXT_MAX_CHARS), RESOURCE_TEXT_MAX_CHARS),
            truncated,
            binaryBytes: null,
          };
        }
        const blob = "blob" in c && typeof c.blob === "string" ? c.blob : "";
        return { mimeType, text: null, truncated: false, binaryBytes: Math.floor((blob.length * 3) / 4) };
      }),
    };
  });
}

/** The server's prompts (names, descriptions, arguments), for the owner's server page. */
export async function listServerPrompts(
  server: Supervised,
): Promise<{ supported: boolean; prompts: PromptView[] }> {
  return server.read(async (client, options) => {
    if (!client.getServerCapabilities()?.prompts) return { supported: false, prompts: [] };
    const listed = await collectPages(
      async (params) => {
        // One request per page: the client's own listPrompts() walks every page itself, past these bounds.
        const res = await client.request({ method: "prompts/list", ...(params && { params }) }, options);
        return { items: res.prompts, nextCursor: res.nextCursor };
      },
      { maxPages: MAX_PAGES },
    );
    const prompts: PromptView[] = listed.map((p) => ({
      name: clean(p.name) ?? "",
      description: clean(p.description),
      arguments: (p.arguments ?? []).map((a) => ({
        name: clean(a.name) ?? "",
        description: clean(a.description),
        required: a.required === true,
      })),
    }));
    return { supported: true, prompts };
  });
}
