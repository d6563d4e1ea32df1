import "server-only";
import type { ResourceTemplateType as ResourceTemplate } from "@modelcontextprotocol/server";
import { GatehouseError } from "@/lib/errors";
import { SERVER_NAME_PATTERN } from "../config";
import type { Logger } from "../log";
import { collectPages } from "../mcp/pages";
import { wrapUri } from "./links";
import { clean, Listings, type ResourceDeps, resourceServers } from "./listings";
import { percentDecodings } from "./percent";
import {
  compileUriTemplate,
  MAX_TEMPLATE_STATES,
  type MatchBudget,
  matchesUriTemplate,
  type UriTemplate,
} from "./uri-template";

/**
 * Resource templates over `/mcp`, by the rules of resources (resources.ts): the templates of
 * every server with an enabled tool are listed, each as `gatehouse://<server>/-/` followed by the
 * server's own template, bounded and cleaned like resource listings; a read of a URI that is no
 * listed resource but an expansion of one of that server's latest templates (uri-template.ts:
 * RFC 6570 levels 1–3, matched exactly) reaches the server, audited with the template it matched.
 *
 * Why `-/` and the template as it is, where resources carry their URI percent-encoded: an agent
 * expands the listed template itself, and only a literal prefix commutes with expansion (the
 * expansion of `prefix + T` is `prefix + ` the expansion of `T`, for any values). Encoding the
 * server's template instead cannot be undone exactly: `{id}` expands `a b` to `a%20b`, which a
 * decoding step would turn into `a b`, not what the server's own expansion is; and encoded
 * literals (`/` as `%2F`) could not be told from encoded values. So a URI in this form is the
 * server's URI verbatim after the mark; `-/` never starts the percent-encoded form (it encodes
 * every `/`), so the two never collide, and either form names the same resource.
 *
 * A template that admits everything (`{+uri}` alone) lets an agent ask the server for any URI:
 * acceptable, because the server itself says it serves what the template describes, and the
 * owner enabled a tool of that server, which is what lets agents see its resources at all
 * (PRODUCT.md's rule for resources: those of servers behind enabled tools, read-only, audited).
 * What Gatehouse refuses through a template is what it refuses of owners' globs too: a dot
 * segment or an encoded NUL, raw or percent-encoded, by which a careless server would serve
 * something outside the template's literal part (`file:///srv/notes/{name}` with `..%2Fsecret`).
 */

/** Pages of `resources/templates/list` followed per server. */
const MAX_PAGES = 10;
/** Most templates taken from one server; a URI matching only one past it is refused. */
export const MAX_TEMPLATES_PER_SERVER = 100;
/** Longest name or title listed. */
const FIELD_MAX_CHARS = 200;
/**
 * Most states of all of one server's templates taken together (uri-template.ts): the templates
 * past the one that would go beyond it are left out. What a read matches against is this big.
 */
export const MAX_TEMPLATE_STATES_PER_SERVER = 20_000;
/**
 * Steps (states visited and empty moves followed, uri-template.ts) one read's matching may take
 * over all of its server's templates: about 3 ms of the main thread (6 ns a step, measured on
 * the worst templates the bounds admit), and far more than a read through the templates servers
 * use needs (a template still matching costs a few steps a character: five for `{+path}`).
 */
export const TEMPLATE_MATCH_BUDGET = 500_000;
/** Parsed templates kept for the next list ({@link ParsedTemplates}), and their states in all. */
const MAX_CACHED_TEMPLATES = 1000;
const MAX_CACHED_STATES = 200_000;
/** JSON-RPC "method not found": what a server with resources but no templates answers. */
const METHOD_NOT_FOUND = -32601;
/** What follows a server's name when the rest of the URI is the server's own, not percent-encoded. */
export const VERBATIM_MARK = "-/";

/** A server's template as agents get it: `gatehouse://<server>/-/<template>` (see the top of this file). */
export function wrapTemplate(server: string, uriTemplate: string): string {
  return `gatehouse://${server}/${VERBATIM_MARK}${uriTemplate}`;
}

/** The server and its own URI of `gatehouse://<server>/-/<uri>`, or null when `uri` is not in that form. */
export function unwrapVerbatimUri(uri: string): { server: string; uri: string } | null {
  const m = /^gatehouse:\/\/([^/]+)\/-\/(.+)$/s.exec(uri);
  if (!m?.[1] || !m[2] || !SERVER_NAME_PATTERN.test(m[1])) return null;
  return { server: m[1], uri: m[2] };
}

/** Only URI characters (RFC 3986), every `%` starting a triplet: what may stand verbatim in a URI. */
const URI_CHARACTERS = /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$/;

/**
 * `uri` of `server` in the verbatim form when it can stand in a URI as it is, else in the
 * percent-encoded one (`wrapUri`): how a read asked in the verbatim form names its contents.
 */
export function wrapVerbatim(server: string, uri: string): string {
  return URI_CHARACTERS.test(uri) ? `gatehouse://${server}/${VERBATIM_MARK}${uri}` : wrapUri(server, uri);
}

const TOKEN = "[A-Za-z0-9!#$&^_.+-]";
/** `type/subtype` (RFC 6838 names) with `; name=value` parameters, a value a token or a quoted string. */
const MEDIA_TYPE = new RegExp(
  `^[A-Za-z0-9]${TOKEN}{0,126}/[A-Za-z0-9]${TOKEN}{0,126}(?: *; *${TOKEN}+=(?:${TOKEN}+|"[ !#-\\[\\]-~]*"))*$`,
);

/** `v` when it is a plausible media type within 200 characters (`text/plain; charset=utf-8`), else undefined. */
export function mediaTypeOf(v: unknown): string | undefined {
  return typeof v === "string" && v.length <= FIELD_MAX_CHARS && MEDIA_TYPE.test(v) ? v : undefined;
}

/**
 * Whether `uri` holds a `.` or `..` segment (between any of `/ \ ? # & = ; , :`), its dots or
 * separators raw or percent-encoded however many times over, or a NUL, encoded or not: what a
 * template match does not admit. Every decoding is looked at ({@link percentDecodings}), and a
 * URI encoded deeper than those go is taken to hold one.
 */
export function holdsDotSegment(uri: string): boolean {
  const decodings = percentDecodings(uri);
  if (!decodings) return true;
  return decodings.some(
    (d) => d.includes("\0") || d.split(/[/\\?#&=;,:]/).some((seg) => seg === "." || seg === ".."),
  );
}

/** At most this much of a template goes into a log line. */
const LOGGED_TEMPLATE_CHARS = 120;

/**
 * Templates parsed before, by their text, with the verdict on those that are none: a list that
 * repeats them (every `resources/templates/list`, every re-list after a read that matched
 * nothing) parses none of them again, and a template that is none is logged once, when first
 * seen. Bounded by {@link MAX_CACHED_TEMPLATES} and {@link MAX_CACHED_STATES}, the least recently
 * listed going first; the process has one (templates are the same text whoever lists them).
 */
export class ParsedTemplates {
  /** Text → the parsed template, or why it is none; oldest use first (a Map keeps insertion order). */
  private readonly byText = new Map<string, UriTemplate | string>();
  private states = 0;
  /** Per server, the template its last list was cut at (logged when it changes). */
  private readonly cutAt = new Map<string, string>();
  /** How many templates were parsed (cache misses), for tests. */
  parsed = 0;

  constructor(
    private readonly maxTemplates = MAX_CACHED_TEMPLATES,
    private readonly maxStates = MAX_CACHED_STATES,
  ) {}

  /**
   * The items of `server`'s list that are templates (`textOf` an item: its `uriTemplate`), in
   * the server's order, up to {@link MAX_TEMPLATE_STATES_PER_SERVER} states: what is no template
   * (uri-template.ts, {@link MAX_TEMPLATE_STATES} included) is left out, and so is every
   * template from the first one past the server's bound on. Each is logged at debug, once.
   */
  select<T>(server: string, items: readonly T[], textOf: (item: T) => unknown, log: Logger) {
    const kept: { item: T; parsed: UriTemplate }[] = [];
    let room = MAX_TEMPLATE_STATES_PER_SERVER;
    let cut: string | undefined;
    for (const item of items) {
      const text = textOf(item);
      if (typeof text !== "string") continue;
      let parsed = this.take(text);
      if (parsed === undefined) {
        const outcome = compileUriTemplate(text, Math.min(room, MAX_TEMPLATE_STATES));
        if ("states" in outcome) {
          cut = text;
          break;
        }
        this.parsed++;
        parsed = "parsed" in outcome ? outcome.parsed : outcome.refused;
        this.keep(text, parsed);
        if (typeof parsed === "string")
          log.debug(`template ${logged(text)} of ${server} left out: ${parsed}`);
      }
      if (typeof parsed === "string") continue;
      if (parsed.nfa.kind.length > room) {
        cut = text;
        break;
      }
      room -= parsed.nfa.kind.length;
      kept.push({ item, parsed });
    }
    if (cut !== undefined && this.cutAt.get(server) !== cut)
      log.debug(
        `templates of ${server} from ${logged(cut)} on left out: more than ${MAX_TEMPLATE_STATES_PER_SERVER} states in all`,
      );
    if (cut === undefined) this.cutAt.delete(server);
    else this.cutAt.set(server, cut);
    return kept;
  }

  /** The verdict on `text`, now the most recently used, or undefined when it is not kept. */
  private take(text: string): UriTemplate | string | undefined {
    const found = this.byText.get(text);
    if (found === undefined) return undefined;
    this.byText.delete(text);
    this.byText.set(text, found);
    return found;
  }

  private keep(text: string, verdict: UriTemplate | string): void {
    this.byText.set(text, verdict);
    this.states += statesOf(verdict);
    for (const [oldest, v] of this.byText) {
      if (this.byText.size <= this.maxTemplates && this.states <= this.maxStates) break;
      this.byText.delete(oldest);
      this.states -= statesOf(v);
    }
  }
}

const statesOf = (verdict: UriTemplate | string): number =>
  typeof verdict === "string" ? 0 : verdict.nfa.kind.length;

/** A server's template for a log line: quoted, cut short. */
const logged = (text: string): string =>
  JSON.stringify(text.length > LOGGED_TEMPLATE_CHARS ? `${text.slice(0, LOGGED_TEMPLATE_CHARS)}…` : text);

/** The process's parsed templates. */
export const parsedTemplates = new ParsedTemplates();

/**
 * The templates each server listed last, parsed, under the rules of {@link Listings} (shared by
 * every session, re-listed on a miss at most once per interval per server).
 */
export class ListedTemplates extends Listings {
  private readonly parsed = new Map<string, readonly UriTemplate[]>();

  /** `server` just listed these templates: they replace what it listed before. */
  recordTemplates(server: string, templates: readonly UriTemplate[]): void {
    this.parsed.set(server, templates);
    this.record(
      server,
      templates.map((t) => t.template),
    );
  }

  /**
   * The first of `server`'s latest templates that `uri` is an expansion of, in the server's
   * order. `exhausted`: matching gave up at `budget` (default {@link TEMPLATE_MATCH_BUDGET}: what
   * is left of it is there afterwards), and no template is then taken to match.
   */
  matching(
    server: string,
    uri: string,
    budget: MatchBudget = { steps: TEMPLATE_MATCH_BUDGET },
  ): { template: string | null; exhausted: boolean } {
    for (const t of this.parsed.get(server) ?? []) {
      if (matchesUriTemplate(t, uri, budget)) return { template: t.template, exhausted: false };
      if (budget.steps < 0) return { template: null, exhausted: true };
    }
    return { template: null, exhausted: false };
  }
}

/** A server's template as it lists it; every field is the server's word, unchecked. */
interface ServerTemplate {
  uriTemplate?: unknown;
  name?: unknown;
  title?: unknown;
  description?: unknown;
  mimeType?: unknown;
}

function isMethodNotFound(err: unknown): boolean {
  return (
    err instanceof GatehouseError && (err.cause as { code?: unknown } | undefined)?.code === METHOD_NOT_FOUND
  );
}

/**
 * One server's templates as it lists them (bounded pages and count), those that are no level
 * 1–3 template of printable ASCII within bounds left out ({@link ParsedTemplates.select}, which
 * parses each text once), recorded into `listed` when given.
 * A server without resources, or that does not know the method, has none.
 */
async function listServer(
  deps: ResourceDeps,
  server: string,
  listed?: ListedTemplates,
): Promise<{ given: ServerTemplate; parsed: UriTemplate }[]> {
  let given: ServerTemplate[] | null;
  try {
    given = await deps.manager.get(server).read(async (client, options) => {
      if (!client.getServerCapabilities()?.resources) return null;
      // Page by page, so these bounds hold (the client's own list walks every page it is given).
      return collectPages<ServerTemplate>(
        async (params) => {
          const res = await client.request(
            { method: "resources/templates/list", ...(params && { params }) },
            options,
          );
          return { items: res.resourceTemplates, nextCursor: res.nextCursor };
        },
        { maxPages: MAX_PAGES, maxItems: MAX_TEMPLATES_PER_SERVER },
      );
    });
  } catch (err) {
    if (!isMethodNotFound(err)) throw err;
    given = null;
  }
  const kept = parsedTemplates
    .select(server, given ?? [], (t) => t.uriTemplate, deps.log)
    .map(({ item, parsed }) => ({ given: item, parsed }));
  listed?.recordTemplates(
    server,
    kept.map((k) => k.parsed),
  );
  return kept;
}

/**
 * Lists `server`'s templates again for a read that matched none of them, under the pacing of
 * {@link Listings.refresh}; a failure is logged and leaves the last list in place.
 */
export function relistTemplates(deps: ResourceDeps, server: string, listed: ListedTemplates): Promise<void> {
  return listed.refresh(server, async () => {
    try {
      await listServer(deps, server, listed);
    } catch (err) {
      deps.log.warn(`templates of ${server} could not be listed again for a read: ${String(err)}`);
    }
  });
}

/**
 * `resources/templates/list`: the templates of every server with an enabled tool, asked in
 * parallel, each within its server's deadline, as `gatehouse://<server>/-/<template>` with
 * names, titles and descriptions cleaned (a name with nothing left is the server's template)
 * and `mimeType` kept only when it is a plausible media type; recorded in `listed` as what reads
 * may match. A server that is down or fails is left out (and logged) rather than failing the list.
 * The 2025 sessions (server.ts) and the stateless leg answer with this alike.
 */
export async function listResourceTemplates(
  deps: ResourceDeps,
  listed?: ListedTemplates,
): Promise<ResourceTemplate[]> {
  const lists = await Promise.all(
    (await resourceServers(deps)).map(async (server) => {
      try {
        return (await listServer(deps, server, listed)).map(({ given, parsed }) => {
          const template: ResourceTemplate = {
            uriTemplate: wrapTemplate(server, parsed.template),
            name: clean(given.name, FIELD_MAX_CHARS) || parsed.template,
          };
          const title = clean(given.title, FIELD_MAX_CHARS);
          const description = clean(given.description, deps.descriptionMaxChars);
          const mimeType = mediaTypeOf(given.mimeType);
          if (title) template.title = title;
          if (description) template.description = description;
          if (mimeType) template.mimeType = mimeType;
          return template;
        });
      } catch (err) {
        deps.log.warn(`templates of ${server} left out of resources/templates/list: ${String(err)}`);
        return [];
      }
    }),
  );
  return lists.flat();
}
