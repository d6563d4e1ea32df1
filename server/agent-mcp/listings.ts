import "server-only";
import type { AgentToolView } from "@/lib/api-types";
import { enabledToolsFor, type SetHolder, type ToolSets } from "../agents";
import { cleanDescription } from "../catalogue/definition";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";
import { serverOf } from "./tool-names";

/**
 * What resources, resource templates and prompts over `/mcp` share (resources.ts, templates.ts,
 * prompts.ts): which servers agents may see things of, what each server listed last, and the
 * cleaning of the server's words.
 */

/** A read of a URI not in a server's latest list re-lists that server at most this often. */
export const RELIST_MIN_INTERVAL_MS = 1000;

export interface ResourceDeps {
  db: Db;
  manager: McpManager;
  log: Logger;
  descriptionMaxChars: number;
  /** Told `{type: "resources"}` after each read's audit row is written, so browsers refresh the list. */
  bus?: EventBus;
  /** The configured tool sets; absent: none (every agent sees every enabled tool). */
  toolSets?: ToolSets;
  /** Who asks, whose tool set bounds what is shown; absent: no bound. */
  requester?: SetHolder;
}

/**
 * Servers whose resources and prompts the requester may see: those with at least one enabled,
 * callable tool in its tool set.
 */
export async function resourceServers(
  deps: Pick<ResourceDeps, "db" | "toolSets" | "requester">,
): Promise<string[]> {
  return serversOf(await enabledToolsFor(deps.db, deps.toolSets, deps.requester));
}

/** The servers of `tools`, sorted, each once. */
export function serversOf(tools: readonly AgentToolView[]): string[] {
  return [...new Set(tools.map((t) => serverOf(t.name)))].sort();
}

/** A server's text as agents see it: hidden characters stripped, cut to `max`; undefined when not a string. */
export const clean = (v: unknown, max: number): string | undefined =>
  typeof v === "string" ? cleanDescription(v, max) : undefined;

interface Listing {
  names: Set<string>;
  at: number;
}

/**
 * What each server listed in the latest list Gatehouse fetched of it (URIs, or prompt names),
 * shared by every `/mcp` session (a server lists the same for everyone: Gatehouse is one client
 * to it): replaced whenever an agent lists, and re-fetched when a request names something not in
 * it — at most once per `minIntervalMs` per server counted from the last try, failed ones
 * included, concurrent requests sharing one list — so agents probing for unlisted names, over
 * however many sessions, cost a server one list a second, not one per probe.
 */
export class Listings {
  private readonly listings = new Map<string, Listing>();
  private readonly inFlight = new Map<string, Promise<void>>();
  /** When each server's last re-list started, whether or not it succeeded. */
  private readonly triedAt = new Map<string, number>();

  /** `minIntervalMs`: default {@link RELIST_MIN_INTERVAL_MS}; `now`: the clock (tests). */
  constructor(
    private readonly minIntervalMs = RELIST_MIN_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether `server`'s latest list held `name`. */
  has(server: string, name: string): boolean {
    return this.listings.get(server)?.names.has(name) ?? false;
  }

  /** `server` just listed these: they replace what it listed before. */
  record(server: string, names: Iterable<string>): void {
    this.listings.set(server, { names: new Set(names), at: this.now() });
  }

  /**
   * Lists `server` again with `list` (which records what it finds), unless a list of it finished
   * within `minIntervalMs` (that one is fresh enough) or one is under way (that one is awaited).
   * A list that fails leaves the last one in place; the failure is `list`'s to report.
   */
  async refresh(server: string, list: () => Promise<void>): Promise<void> {
    const running = this.inFlight.get(server);
    if (running) return running;
    const last = Math.max(
      this.listings.get(server)?.at ?? Number.NEGATIVE_INFINITY,
      this.triedAt.get(server) ?? Number.NEGATIVE_INFINITY,
    );
    if (this.now() - last < this.minIntervalMs) return;
    this.triedAt.set(server, this.now());
    const done = list().finally(() => this.inFlight.delete(server));
    this.inFlight.set(server, done);
    return done;
  }
}
