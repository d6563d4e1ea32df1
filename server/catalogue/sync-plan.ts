import "server-only";
import type { Tool } from "@modelcontextprotocol/client";
import type { ChangeDetail, ChangeKind } from "@/lib/api-types";
import type { ServerConfig } from "../config";
import type { NewChange, RecordedChange } from "./changes";
import {
  cleanDefinition,
  definitionHash,
  definitionOf,
  isReadOnly,
  localNameProblem,
  type ToolDefinition,
} from "./definition";
import { diffDefinitions } from "./diff";
import type { ToolRow } from "./rows";
import { trimTools } from "./trim";

/**
 * What one refresh of a server's tool list changes, decided without the store: the writer
 * (`sync.ts`) reads what it needs, asks {@link planRefresh}, and applies the plan in one
 * transaction.
 */

export interface SyncSummary {
  server: string;
  /** Local names of new rows (proposed). */
  added: string[];
  /** Local names whose definition changed. */
  changed: string[];
  /** Local names no longer listed (or now excluded by allowTools). */
  gone: string[];
  /** Local names listed again after being gone. */
  returned: string[];
  /** Every remote name over the cap at this refresh, whether it was before or not. */
  overCap: string[];
  /** Remote names newly excluded by allowTools. */
  excluded: string[];
  /** Local names whose vouch was dropped because their definition changed. */
  vouchDropped: string[];
  /** The change-feed rows this refresh wrote, in id order; empty when nothing changed. */
  changes: RecordedChange[];
}

/** Whether a refresh changed the catalogue (a tool staying over the cap is no change). */
export function hasChanges(s: Omit<SyncSummary, "changes">): boolean {
  return s.added.length + s.changed.length + s.gone.length + s.returned.length + s.excluded.length > 0;
}

/** The columns a listing decides for each row it lists (new, returned or changed). */
export interface ListedColumns {
  present: true;
  definition: string;
  definitionHash: string;
  description: string;
  readOnly: boolean;
  unusableReason: string | null;
  /** A listed row is never excluded: `allowTools` let it through. */
  excluded: false;
}

/** A row to insert: discovery only ever proposes. */
export interface NewToolRow extends ListedColumns {
  localName: string;
  server: string;
  remoteName: string;
  status: "proposed";
}

/** New values for an existing row; its status, pin and "always confirm" are never among them. */
export interface RowUpdate {
  localName: string;
  /**
   * The hash the row had, when the update only moves it to the hash of the same content cleaned
   * as listings are now: grants and pending calls bound to it move with it.
   */
  rehashedFrom?: string;
  set: ListedColumns & {
    /** Moved with a definition that differs only in how it is cleaned (see planRefresh). */
    pinnedHash?: string;
    pinnedDefinition?: string;
    vouchedHash?: string | null;
    vouchedBy?: null;
    vouchedAt?: null;
  };
}

/** An audit row the refresh writes, its actor `server:<name>`. */
export interface RefreshAudit {
  action: "tool.vouch_dropped" | "catalogue.refresh";
  subject: string;
  detail: string;
}

export interface RefreshInput {
  server: Pick<ServerConfig, "name" | "allowTools" | "maxTools">;
  /** One complete listing, as the server sent it (duplicates and non-string names included). */
  listed: readonly Tool[];
  /** Every row of this server, listed now or not. */
  rows: readonly ToolRow[];
  /** Remote names that were over the cap after the previous refresh. */
  overCapBefore: ReadonlySet<string>;
  /**
   * Remote names whose latest entry in this server's change feed is `excluded`. Only read when
   * something is excluded, so a writer may pass an empty set while `allowTools` is unset.
   */
  excludedBefore: ReadonlySet<string>;
  /** `catalogue.descriptionMaxChars`: the cap of every text of a definition, schema texts included. */
  descriptionMaxChars: number;
  /**
   * Feed rows a new change of the same tool takes the place of (see {@link COALESCE_WINDOW_MS}),
   * by {@link coalesceKey}; absent or empty: every change gets its own row.
   */
  recent?: ReadonlyMap<string, RecentChange>;
}

/**
 * How close together a tool's changes must come to share one feed row: a change within this
 * long of the tool's latest row of the same family (its definition: `changed`; its presence:
 * `gone` / `returned`) replaces that row, unless an owner acted on the tool since. The window
 * slides: a tool that keeps flapping keeps one row, always the newest. 10 minutes.
 */
export const COALESCE_WINDOW_MS = 10 * 60_000;

/** The kinds whose rows a later change of the same tool may replace. */
export const COALESCED_KINDS = ["changed", "gone", "returned"] as const satisfies readonly ChangeKind[];

/** A tool's latest feed row of one family, recent enough to be replaced by its next change. */
export interface RecentChange {
  id: number;
  kind: ChangeKind;
  /** The status it recorded; a row of another status (an owner enabled or disabled) stays. */
  detail: ChangeDetail | null;
}

/** The key of {@link RefreshInput.recent}: the family of `kind` and the remote tool name. */
export function coalesceKey(kind: ChangeKind, tool: string): string {
  return `${kind === "changed" ? "definition" : "presence"} ${tool}`;
}

/** A feed entry to write; `replaces`: the id of the row it takes the place of. */
export type PlannedChange = NewChange & { replaces?: number };

export interface RefreshPlan {
  /** What changed, by name: the {@link SyncSummary} but for the feed rows' ids and time. */
  summary: Omit<SyncSummary, "changes">;
  /** Rows to insert, in name order. */
  insert: NewToolRow[];
  /** Rows listed again or with a new definition; listed rows that did not change are absent. */
  update: RowUpdate[];
  /**
   * Unlisted rows whose `excluded` flag changes: true when `allowTools` leaves the tool out (a
   * call is then refused as excluded), false when it is merely gone.
   */
  exclusion: { localName: string; excluded: boolean }[];
  // The rows to mark absent are `summary.gone`; the server's over-cap list becomes `summary.overCap`.
  /** Change-feed entries in the order they are to be written (see {@link FEED_ORDER}). */
  feed: PlannedChange[];
  /** Audit rows in the order they are to be written. */
  audit: RefreshAudit[];
}

/**
 * The order a refresh writes its feed rows in. The feed is read newest first, so what matters
 * most (a changed definition) is written last and shown first; within a kind, names are written
 * in reverse order so that they read A to Z.
 */
const FEED_ORDER: readonly ChangeKind[] = [
  "over_cap",
  "excluded",
  "added",
  "returned",
  "gone",
  "vouch_dropped",
  "changed",
];

function entry(kind: ChangeKind, tool: string, localName: string | null, detail: ChangeDetail): NewChange {
  return { kind, tool, localName, detail: Object.keys(detail).length > 0 ? detail : null };
}

/**
 * `change`, taking the place of the tool's recent row of the same family when there is one
 * that recorded the same status. A definition change then reads from where the run of changes
 * started: `fromHash` is the first one's, and what changed is counted from the pinned
 * definition when the run started there, otherwise gathered over the run (every aspect that
 * changed at some step, riskier if any step was).
 */
function coalesced(
  input: RefreshInput,
  row: ToolRow,
  change: NewChange,
  def: ToolDefinition | null = null,
): PlannedChange {
  const recent = input.recent?.get(coalesceKey(change.kind, change.tool));
  if (!recent || (recent.detail?.status ?? null) !== (change.detail?.status ?? null)) return change;
  if (change.kind !== "changed" || recent.kind !== "changed") return { ...change, replaces: recent.id };
  const before = recent.detail ?? {};
  const fromHash = before.fromHash ?? row.definitionHash.slice(0, 12);
  const pinned = row.pinnedDefinition !== null && row.pinnedHash?.slice(0, 12) === fromHash;
  const step = change.detail ?? {};
  const { summary, riskier } =
    pinned && def
      ? diffDefinitions(JSON.parse(row.pinnedDefinition ?? "{}") as ToolDefinition, def)
      : {
          summary: [...new Set([...(before.summary ?? []), ...(step.summary ?? [])])],
          riskier: (before.riskier ?? false) || (step.riskier ?? false),
        };
  return { ...change, detail: { ...step, fromHash, summary, riskier }, replaces: recent.id };
}

function feedOrder(feed: readonly PlannedChange[]): PlannedChange[] {
  return FEED_ORDER.flatMap((kind) =>
    feed.filter((c) => c.kind === kind).sort((a, b) => (a.tool < b.tool ? 1 : a.tool > b.tool ? -1 : 0)),
  );
}

/**
 * One complete tool list from a server, against its rows: new tools (within `maxTools`, by
 * stable trimming) become `proposed` rows, known tools get their current definition (a change
 * drops any vouch, which holds for one definition only), unlisted ones are marked absent, and a
 * returning tool keeps the status it had. Discovery never changes a row's status: only an owner
 * enables. Every real change (added, over the cap, changed, gone, returned, excluded by
 * allowTools, a vouch dropped) gets a feed entry; a listing that changes nothing plans nothing
 * but the over-cap list, which is rewritten as it is.
 */
export function planRefresh(input: RefreshInput): RefreshPlan {
  const { server, rows } = input;
  const allow = server.allowTools ? new Set(server.allowTools) : null;
  const byName = new Map<string, Tool>();
  const excludedListed = new Set<string>();
  for (const t of input.listed) {
    if (typeof t.name !== "string") continue;
    if (allow && !allow.has(t.name)) {
      excludedListed.add(t.name);
      continue;
    }
    if (!byName.has(t.name)) byName.set(t.name, t);
  }
  const existing = new Map(rows.map((r) => [r.remoteName, r]));
  const trim = trimTools({
    listed: [...byName.keys()],
    existing: new Set(existing.keys()),
    maxTools: server.maxTools,
  });

  const summary: RefreshPlan["summary"] = {
    server: server.name,
    added: [],
    changed: [],
    gone: [],
    returned: [],
    overCap: trim.overCap,
    excluded: [],
    vouchDropped: [],
  };
  const plan: RefreshPlan = { summary, insert: [], update: [], exclusion: [], feed: [], audit: [] };
  const feed: PlannedChange[] = [];

  for (const name of [...trim.kept, ...trim.admitted]) {
    const tool = byName.get(name);
    if (!tool) continue;
    // Cleaned and capped before anything else sees it: the stored, hashed and pinned definition
    // is what owners and agents are shown (see definitionOf).
    const def = definitionOf(tool, input.descriptionMaxChars);
    const hash = definitionHash(def);
    const localName = `${server.name}_${name}`;
    const columns: ListedColumns = {
      present: true,
      definition: JSON.stringify(def),
      definitionHash: hash,
      description: def.description,
      readOnly: isReadOnly(def),
      unusableReason: localNameProblem(server.name, name),
      excluded: false,
    };
    const row = existing.get(name);
    if (!row) {
      plan.insert.push({ localName, server: server.name, remoteName: name, status: "proposed", ...columns });
      summary.added.push(localName);
      feed.push(
        entry("added", name, localName, {
          status: "proposed",
          ...(columns.unusableReason ? { unusableReason: columns.unusableReason } : {}),
        }),
      );
      continue;
    }
    const wasGone = !row.present;
    // A row stored before definitions were cleaned as they are now (hidden characters, capped
    // schema texts) differs from today's listing only in that cleaning: the owner saw and
    // pinned this very content, so the row, its pin and its vouch move to the new hash without
    // a "changed" entry.
    if (row.definitionHash !== hash && sameOnceCleaned(row.definition, hash, input.descriptionMaxChars)) {
      const set: RowUpdate["set"] = { ...columns };
      if (row.pinnedHash === row.definitionHash) {
        set.pinnedHash = hash;
        set.pinnedDefinition = columns.definition;
      }
      if (row.vouchedHash !== null && row.vouchedHash === row.definitionHash) set.vouchedHash = hash;
      plan.update.push({ localName: row.localName, set, rehashedFrom: row.definitionHash });
      if (wasGone) {
        summary.returned.push(localName);
        feed.push(entry("returned", name, localName, { status: row.status }));
      }
      continue;
    }
    const defChanged = row.definitionHash !== hash;
    if (wasGone) {
      summary.returned.push(localName);
      feed.push(coalesced(input, row, entry("returned", name, localName, { status: row.status })));
    }
    if (!wasGone && !defChanged) continue;
    const set: RowUpdate["set"] = { ...columns };
    if (defChanged) {
      summary.changed.push(localName);
      const diff = diffDefinitions(JSON.parse(row.definition) as ToolDefinition, def);
      const change = entry("changed", name, localName, {
        status: row.status,
        fromHash: row.definitionHash.slice(0, 12),
        toHash: hash.slice(0, 12),
        summary: diff.summary,
        riskier: diff.riskier,
        ...(row.status === "enabled" && row.pinnedHash === hash ? { restored: true } : {}),
      });
      // A vouch made since the run began is an owner's act on the tool: its change starts afresh.
      feed.push(row.vouchedHash !== null ? change : coalesced(input, row, change, def));
      // Tools enabled before pinned definitions were kept: the definition being replaced is the
      // pinned one, so keep it for the before/after view.
      if (row.pinnedDefinition === null && row.pinnedHash === row.definitionHash) {
        set.pinnedDefinition = row.definition;
      }
      // A vouch holds for one definition only (PRODUCT.md §5): any change drops it.
      if (row.vouchedHash !== null) {
        set.vouchedHash = null;
        set.vouchedBy = null;
        set.vouchedAt = null;
        summary.vouchDropped.push(localName);
        feed.push(
          entry("vouch_dropped", name, localName, {
            ...(row.vouchedBy ? { vouchedBy: row.vouchedBy } : {}),
            ...(row.vouchedAt ? { vouchedAt: row.vouchedAt } : {}),
          }),
        );
        plan.audit.push({
          action: "tool.vouch_dropped",
          subject: localName,
          detail: `definition changed from ${row.definitionHash.slice(0, 12)} to ${hash.slice(0, 12)}`,
        });
      }
    }
    plan.update.push({ localName: row.localName, set });
  }

  for (const row of rows) {
    if (byName.has(row.remoteName)) continue;
    const excluded = allow !== null && !allow.has(row.remoteName);
    if (row.excluded !== excluded) plan.exclusion.push({ localName: row.localName, excluded });
    if (!row.present) continue;
    summary.gone.push(row.localName);
    if (excludedListed.has(row.remoteName)) {
      summary.excluded.push(row.remoteName);
      feed.push(entry("excluded", row.remoteName, row.localName, { hadRow: true, status: row.status }));
    } else {
      feed.push(coalesced(input, row, entry("gone", row.remoteName, row.localName, { status: row.status })));
    }
  }

  // Excluded tools have no present row to remember them by: one is new when its latest feed
  // entry is not already "excluded" (so it is recorded once, and again only after something else).
  for (const name of excludedListed) {
    const row = existing.get(name);
    if (row?.present || input.excludedBefore.has(name)) continue;
    summary.excluded.push(name);
    feed.push(
      entry("excluded", name, row?.localName ?? null, row ? { hadRow: true, status: row.status } : {}),
    );
  }

  for (const name of trim.overCap) {
    if (!input.overCapBefore.has(name)) {
      feed.push(entry("over_cap", name, null, { maxTools: server.maxTools }));
    }
  }

  plan.feed = feedOrder(feed);
  if (hasChanges(summary)) {
    plan.audit.push({ action: "catalogue.refresh", subject: server.name, detail: JSON.stringify(summary) });
  }
  return plan;
}

/** Whether a stored definition, cleaned and capped as listings are now, hashes to `hash`. */
function sameOnceCleaned(stored: string, hash: string, maxChars: number): boolean {
  try {
    return definitionHash(cleanDefinition(JSON.parse(stored) as ToolDefinition, maxChars)) === hash;
  } catch {
    // A row always holds JSON we wrote; were it damaged, it is a change like any other.
    return false;
  }
}
