import "server-only";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { asc, eq, sql } from "drizzle-orm";
import type {
  AgentToolView,
  CatalogueToolView,
  ChangeKind,
  ChangeView,
  ToolAvailability,
  ToolChangeView,
  ToolStatus,
} from "@/lib/api-types";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import type { Db } from "../store/db";
import { prepared } from "../store/prepared";
import { auditEvents, catalogueChanges, overCapTools, tools } from "../store/schema";
import { approvalNeed, vouchProblem } from "./approval";
import type { NewChange } from "./changes";
import {
  cleanDescription,
  definitionHash,
  definitionOf,
  isReadOnly,
  localNameProblem,
  type ToolDefinition,
} from "./definition";
import { diffDefinitions } from "./diff";
import { trimTools } from "./trim";

export { type ApprovalInput, type ApprovalNeed, approvalNeed, vouchProblem } from "./approval";

export type ToolRow = typeof tools.$inferSelect;
type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** A change-feed row as a refresh wrote it. */
export type RecordedChange = Omit<ChangeView, "unread">;

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

export function hasChanges(s: SyncSummary): boolean {
  return s.added.length + s.changed.length + s.gone.length + s.returned.length + s.excluded.length > 0;
}

/**
 * The order a refresh writes its feed rows in. The feed is read newest first, so what matters
 * most (a changed definition) is written last and shown first; within a kind, names are written
 * in reverse order so that they read A to Z.
 */
const FEED_ORDER: ChangeKind[] = [
  "over_cap",
  "excluded",
  "added",
  "returned",
  "gone",
  "vouch_dropped",
  "changed",
];

function parseJson(text: string): ToolDefinition {
  return JSON.parse(text) as ToolDefinition;
}

/**
 * Records one complete tool list from `server`: new tools (within `maxTools`) become
 * `proposed` rows, known tools get their current definition, unlisted ones are marked absent.
 * Discovery never changes a row's status: only an owner enables. Every real change (added, over
 * the cap, changed, gone, returned, excluded by allowTools, a vouch dropped) is written to the
 * change feed in the same transaction; a refresh that changes nothing writes nothing.
 */
export function syncServerTools(
  db: Db,
  server: ServerConfig,
  listed: Tool[],
  opts: { descriptionMaxChars: number },
): SyncSummary {
  const allow = server.allowTools ? new Set(server.allowTools) : null;
  const byName = new Map<string, Tool>();
  const excludedListed = new Set<string>();
  for (const t of listed) {
    if (typeof t.name !== "string") continue;
    if (allow && !allow.has(t.name)) {
      excludedListed.add(t.name);
      continue;
    }
    if (byName.has(t.name)) continue;
    byName.set(t.name, t);
  }
  const summary: SyncSummary = {
    server: server.name,
    added: [],
    changed: [],
    gone: [],
    returned: [],
    overCap: [],
    excluded: [],
    vouchDropped: [],
    changes: [],
  };
  const now = new Date().toISOString();
  const feed: NewChange[] = [];

  db.transaction((tx) => {
    const rows = tx.select().from(tools).where(eq(tools.server, server.name)).all();
    const existing = new Map(rows.map((r) => [r.remoteName, r]));
    const trim = trimTools({
      listed: [...byName.keys()],
      existing: new Set(existing.keys()),
      maxTools: server.maxTools,
    });

    for (const name of [...trim.kept, ...trim.admitted]) {
      const tool = byName.get(name);
      if (!tool) continue;
      const def = definitionOf(tool);
      const hash = definitionHash(def);
      const localName = `${server.name}_${name}`;
      const fields = {
        present: true,
        definition: JSON.stringify(def),
        definitionHash: hash,
        description: cleanDescription(def.description, opts.descriptionMaxChars),
        readOnly: isReadOnly(def),
        unusableReason: localNameProblem(server.name, name),
      };
      const row = existing.get(name);
      if (!row) {
        tx.insert(tools)
          .values({ localName, server: server.name, remoteName: name, status: "proposed", ...fields })
          .run();
        summary.added.push(localName);
        feed.push({
          kind: "added",
          tool: name,
          localName,
          detail: {
            status: "proposed",
            ...(fields.unusableReason ? { unusableReason: fields.unusableReason } : {}),
          },
        });
        continue;
      }
      const wasGone = !row.present;
      const defChanged = row.definitionHash !== hash;
      if (wasGone) {
        summary.returned.push(localName);
        feed.push({ kind: "returned", tool: name, localName, detail: { status: row.status } });
      }
      if (!wasGone && !defChanged) continue;
      const extra: Partial<ToolRow> = {};
      if (defChanged) {
        summary.changed.push(localName);
        const diff = diffDefinitions(parseJson(row.definition), def);
        feed.push({
          kind: "changed",
          tool: name,
          localName,
          detail: {
            status: row.status,
            fromHash: row.definitionHash.slice(0, 12),
            toHash: hash.slice(0, 12),
            summary: diff.summary,
            riskier: diff.riskier,
            ...(row.status === "enabled" && row.pinnedHash === hash ? { restored: true } : {}),
          },
        });
        // Tools enabled before pinned definitions were kept: the definition being replaced is
        // the pinned one, so keep it for the before/after view.
        if (row.pinnedDefinition === null && row.pinnedHash === row.definitionHash) {
          extra.pinnedDefinition = row.definition;
        }
        // A vouch holds for one definition only (PRODUCT.md §5): any change drops it.
        if (row.vouchedHash !== null) {
          extra.vouchedHash = null;
          extra.vouchedBy = null;
          extra.vouchedAt = null;
          summary.vouchDropped.push(localName);
          feed.push({
            kind: "vouch_dropped",
            tool: name,
            localName,
            detail: {
              ...(row.vouchedBy ? { vouchedBy: row.vouchedBy } : {}),
              ...(row.vouchedAt ? { vouchedAt: row.vouchedAt } : {}),
            },
          });
          tx.insert(auditEvents)
            .values({
              actor: `server:${server.name}`,
              action: "tool.vouch_dropped",
              subject: localName,
              detail: `definition changed from ${row.definitionHash.slice(0, 12)} to ${hash.slice(0, 12)}`,
            })
            .run();
        }
      }
      tx.update(tools)
        .set({ ...fields, ...extra, updatedAt: now })
        .where(eq(tools.localName, row.localName))
        .run();
    }

    for (const row of rows) {
      if (!row.present || byName.has(row.remoteName)) continue;
      tx.update(tools)
        .set({ present: false, updatedAt: now })
        .where(eq(tools.localName, row.localName))
        .run();
      summary.gone.push(row.localName);
      if (excludedListed.has(row.remoteName)) {
        summary.excluded.push(row.remoteName);
        feed.push({
          kind: "excluded",
          tool: row.remoteName,
          localName: row.localName,
          detail: { hadRow: true, status: row.status },
        });
      } else {
        feed.push({
          kind: "gone",
          tool: row.remoteName,
          localName: row.localName,
          detail: { status: row.status },
        });
      }
    }

    // Excluded tools have no row to remember them by: one is new when its latest feed entry is
    // not already "excluded" (so it is recorded once, and again only after something else).
    const excludedNew = [...excludedListed].filter((n) => !existing.get(n)?.present);
    if (excludedNew.length > 0) {
      const latest = new Map(
        tx
          .all<{ tool: string; kind: string }>(
            sql`SELECT ${catalogueChanges.tool} AS tool, ${catalogueChanges.kind} AS kind, max(${catalogueChanges.id})
                FROM ${catalogueChanges} WHERE ${catalogueChanges.server} = ${server.name}
                GROUP BY ${catalogueChanges.tool}`,
          )
          .map((r) => [r.tool, r.kind]),
      );
      for (const name of excludedNew) {
        if (latest.get(name) === "excluded") continue;
        const row = existing.get(name);
        summary.excluded.push(name);
        feed.push({
          kind: "excluded",
          tool: name,
          localName: row?.localName ?? null,
          detail: row ? { hadRow: true, status: row.status } : {},
        });
      }
    }

    const before = new Set(
      tx
        .select({ name: overCapTools.remoteName })
        .from(overCapTools)
        .where(eq(overCapTools.server, server.name))
        .all()
        .map((r) => r.name),
    );
    tx.delete(overCapTools).where(eq(overCapTools.server, server.name)).run();
    for (const name of trim.overCap) {
      tx.insert(overCapTools).values({ server: server.name, remoteName: name }).run();
      summary.overCap.push(name);
      if (!before.has(name)) {
        feed.push({ kind: "over_cap", tool: name, localName: null, detail: { maxTools: server.maxTools } });
      }
    }

    const ordered = FEED_ORDER.flatMap((kind) =>
      feed.filter((c) => c.kind === kind).sort((a, b) => (a.tool < b.tool ? 1 : a.tool > b.tool ? -1 : 0)),
    );
    for (const change of ordered) {
      const inserted = tx
        .insert(catalogueChanges)
        .values({
          at: now,
          server: server.name,
          kind: change.kind,
          tool: change.tool,
          localName: change.localName,
          detail:
            change.detail && Object.keys(change.detail).length > 0 ? JSON.stringify(change.detail) : null,
        })
        .returning({ id: catalogueChanges.id })
        .get();
      summary.changes.push({
        id: inserted.id,
        at: now,
        server: server.name,
        kind: change.kind,
        tool: change.tool,
        localName: change.localName,
        detail: change.detail && Object.keys(change.detail).length > 0 ? change.detail : null,
      });
    }

    if (hasChanges(summary)) {
      const { changes: _changes, ...counts } = summary;
      tx.insert(auditEvents)
        .values({
          actor: `server:${server.name}`,
          action: "catalogue.refresh",
          subject: server.name,
          detail: JSON.stringify(counts),
        })
        .run();
    }
  });
  return summary;
}

export function availabilityOf(row: ToolRow): ToolAvailability {
  if (!row.present) return "gone";
  if (row.unusableReason) return "unusable";
  if (row.status === "enabled" && row.pinnedHash !== row.definitionHash) return "changed";
  return "ok";
}

export function parseDefinition(row: ToolRow): ToolDefinition {
  return parseJson(row.definition);
}

/** The enabled (pinned) definition against the current one, for the owner's review. */
export function changeOf(row: ToolRow, current: ToolDefinition = parseDefinition(row)): ToolChangeView {
  let before: ToolDefinition | null = null;
  if (row.pinnedDefinition) {
    try {
      before = parseJson(row.pinnedDefinition);
    } catch {
      before = null;
    }
  }
  return { before, after: current, diff: before ? diffDefinitions(before, current) : null };
}

export function toCatalogueView(row: ToolRow): CatalogueToolView {
  const def = parseDefinition(row);
  const need = approvalNeed(row, def.annotations);
  const availability = availabilityOf(row);
  return {
    localName: row.localName,
    server: row.server,
    remoteName: row.remoteName,
    status: row.status as ToolStatus,
    availability,
    unusableReason: row.unusableReason,
    description: row.description,
    inputSchema: def.inputSchema,
    annotations: def.annotations,
    destructive: need.destructive,
    updatedAt: row.updatedAt,
    approvalReason: need.reason,
    readOnlyBy: need.readOnlyBy,
    alwaysConfirm: row.alwaysConfirm,
    vouch:
      need.readOnlyBy === "vouch" && row.vouchedBy && row.vouchedAt
        ? { by: row.vouchedBy, at: row.vouchedAt }
        : null,
    vouchProblem: vouchProblem(def.annotations),
    change: availability === "changed" ? changeOf(row, def) : null,
  };
}

export function listCatalogue(db: Db): CatalogueToolView[] {
  return db.select().from(tools).orderBy(asc(tools.server), asc(tools.remoteName)).all().map(toCatalogueView);
}

/** The tools an agent may call: enabled, present, usable and unchanged since enabled. */
export function listEnabledTools(db: Db): AgentToolView[] {
  return db
    .select()
    .from(tools)
    .where(eq(tools.status, "enabled"))
    .orderBy(asc(tools.localName))
    .all()
    .filter((r) => availabilityOf(r) === "ok")
    .map((r) => {
      const def = parseDefinition(r);
      return {
        name: r.localName,
        description: r.description,
        inputSchema: def.inputSchema,
        annotations: def.annotations,
        destructive: approvalNeed(r, def.annotations).destructive,
      };
    });
}

export function getToolRow(db: Db, localName: string): ToolRow | null {
  const query = prepared(db, "tools.byLocalName", () =>
    db
      .select()
      .from(tools)
      .where(eq(tools.localName, sql.placeholder("name")))
      .prepare(),
  );
  return query.get({ name: localName }) ?? null;
}

/** Why `row` cannot get `status`, or null when it can. */
function statusProblem(
  row: ToolRow,
  status: "enabled" | "disabled",
): { code: ErrorCode; message: string } | null {
  if (status !== "enabled") return null;
  if (row.unusableReason) {
    return { code: "tool_unusable", message: `${row.localName} cannot be enabled: ${row.unusableReason}` };
  }
  if (!row.present) {
    return {
      code: "tool_gone",
      message: `${row.localName} cannot be enabled: its server no longer lists it`,
    };
  }
  return null;
}

/** Sets the status of a row that may have it; enabling pins the current definition (hash and JSON). */
function applyStatus(tx: Tx, row: ToolRow, status: "enabled" | "disabled", actor: string): ToolRow {
  const problem = statusProblem(row, status);
  if (problem) throw new GatehouseError(problem.code, problem.message);
  const pin =
    status === "enabled"
      ? { pinnedHash: row.definitionHash, pinnedDefinition: row.definition }
      : { pinnedHash: row.pinnedHash, pinnedDefinition: row.pinnedDefinition };
  const updated = tx
    .update(tools)
    .set({ status, ...pin, updatedAt: new Date().toISOString() })
    .where(eq(tools.localName, row.localName))
    .returning()
    .get();
  tx.insert(auditEvents)
    .values({
      actor,
      action: status === "enabled" ? "tool.enable" : "tool.disable",
      subject: row.localName,
      detail: status === "enabled" ? `pinned ${row.definitionHash.slice(0, 12)}` : null,
    })
    .run();
  return updated ?? row;
}

function rowOrThrow(tx: Tx, localName: string): ToolRow {
  const row = tx.select().from(tools).where(eq(tools.localName, localName)).get();
  if (!row) throw new GatehouseError("tool_not_found", `no tool named "${localName}"`);
  return row;
}

/**
 * The owner's decision on a tool. Enabling pins the current definition; a tool that is gone or
 * unusable cannot be enabled.
 */
export function setToolStatus(
  db: Db,
  params: { localName: string; status: "enabled" | "disabled"; actor: string },
): CatalogueToolView {
  return db.transaction((tx) =>
    toCatalogueView(applyStatus(tx, rowOrThrow(tx, params.localName), params.status, params.actor)),
  );
}

export interface UpdateToolParams {
  localName: string;
  actor: string;
  status?: "enabled" | "disabled" | undefined;
  /** true: vouch the current definition read-only; false: withdraw a vouch. */
  vouch?: boolean | undefined;
  alwaysConfirm?: boolean | undefined;
}

/**
 * An owner's changes to one tool, applied together or not at all, in this order: status (so
 * "Accept change" re-pins first), vouch, always-confirm. Each real change is an audit row
 * (`tool.enable`/`tool.disable`, `tool.vouch`/`tool.unvouch`, `tool.always_confirm`); asking for
 * what already holds changes nothing. A vouch is pinned to the current definition hash and is
 * refused (`conflict`) for a tool whose server says `readOnlyHint` either way or
 * `destructiveHint: true`.
 */
export function updateTool(db: Db, params: UpdateToolParams): CatalogueToolView {
  return db.transaction((tx) => {
    let row = rowOrThrow(tx, params.localName);
    const audit = (action: string, detail: string | null) =>
      tx.insert(auditEvents).values({ actor: params.actor, action, subject: row.localName, detail }).run();
    const set = (values: Partial<ToolRow>) => {
      row =
        tx
          .update(tools)
          .set({ ...values, updatedAt: new Date().toISOString() })
          .where(eq(tools.localName, row.localName))
          .returning()
          .get() ?? row;
    };

    if (params.status !== undefined) row = applyStatus(tx, row, params.status, params.actor);
    if (params.vouch === true) {
      const problem = vouchProblem(parseDefinition(row).annotations);
      if (problem) {
        throw new GatehouseError("conflict", `${row.localName} cannot be vouched read-only: ${problem}`);
      }
      if (row.vouchedHash !== row.definitionHash) {
        set({
          vouchedHash: row.definitionHash,
          vouchedBy: params.actor,
          vouchedAt: new Date().toISOString(),
        });
        audit("tool.vouch", `read-only for definition ${row.definitionHash.slice(0, 12)}`);
      }
    } else if (params.vouch === false && row.vouchedHash !== null) {
      set({ vouchedHash: null, vouchedBy: null, vouchedAt: null });
      audit("tool.unvouch", null);
    }
    if (params.alwaysConfirm !== undefined && params.alwaysConfirm !== row.alwaysConfirm) {
      set({ alwaysConfirm: params.alwaysConfirm });
      audit("tool.always_confirm", params.alwaysConfirm ? "on" : "off");
    }
    return toCatalogueView(row);
  });
}

/** Most names listed in the error of a refused bulk change. */
const BULK_NAMES_SHOWN = 5;

/**
 * One status for many tools in one transaction: all of them change, or — when any is unknown,
 * gone or unusable — none does, and the error names the ones that cannot.
 */
export function bulkSetToolStatus(
  db: Db,
  params: { names: readonly string[]; status: "enabled" | "disabled"; actor: string },
): CatalogueToolView[] {
  return db.transaction((tx) => {
    const names = [...new Set(params.names)];
    const rows: ToolRow[] = [];
    const problems: { name: string; code: ErrorCode; why: string }[] = [];
    for (const name of names) {
      const row = tx.select().from(tools).where(eq(tools.localName, name)).get();
      if (!row) {
        problems.push({ name, code: "tool_not_found", why: "no such tool" });
        continue;
      }
      const problem = statusProblem(row, params.status);
      if (problem) {
        problems.push({
          name,
          code: problem.code,
          why: row.unusableReason ?? "its server no longer lists it",
        });
      } else rows.push(row);
    }
    const first = problems[0];
    if (first) {
      const shown = problems.slice(0, BULK_NAMES_SHOWN).map((p) => `${p.name} (${p.why})`);
      const more =
        problems.length > BULK_NAMES_SHOWN ? ` and ${problems.length - BULK_NAMES_SHOWN} more` : "";
      const verb = params.status === "enabled" ? "enabled" : "disabled";
      throw new GatehouseError(
        first.code,
        `nothing was changed: ${problems.length === 1 ? "1 tool" : `${problems.length} tools`} cannot be ${verb}: ${shown.join(", ")}${more}`,
      );
    }
    return rows.map((row) => toCatalogueView(applyStatus(tx, row, params.status, params.actor)));
  });
}

/** Counts per server for the status page. */
export function toolCounts(
  db: Db,
): Map<string, { proposed: number; enabled: number; disabled: number; overCap: number }> {
  const out = new Map<string, { proposed: number; enabled: number; disabled: number; overCap: number }>();
  const get = (s: string) => {
    let c = out.get(s);
    if (!c) {
      c = { proposed: 0, enabled: 0, disabled: 0, overCap: 0 };
      out.set(s, c);
    }
    return c;
  };
  for (const r of db.select({ server: tools.server, status: tools.status }).from(tools).all()) {
    const c = get(r.server);
    if (r.status === "proposed" || r.status === "enabled" || r.status === "disabled") c[r.status]++;
  }
  for (const r of db.select({ server: overCapTools.server }).from(overCapTools).all())
    get(r.server).overCap++;
  return out;
}
