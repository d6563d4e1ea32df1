import "server-only";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { and, asc, eq } from "drizzle-orm";
import type { AgentToolView, CatalogueToolView, ToolAvailability, ToolStatus } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import type { Db } from "../store/db";
import { auditEvents, overCapTools, tools } from "../store/schema";
import {
  cleanDescription,
  definitionHash,
  definitionOf,
  isReadOnly,
  localNameProblem,
  type ToolDefinition,
} from "./definition";
import { trimTools } from "./trim";

export type ToolRow = typeof tools.$inferSelect;

export interface SyncSummary {
  server: string;
  added: string[];
  changed: string[];
  gone: string[];
  returned: string[];
  overCap: string[];
}

export function hasChanges(s: SyncSummary): boolean {
  return s.added.length + s.changed.length + s.gone.length + s.returned.length > 0;
}

/**
 * Records one complete tool list from `server`: new tools (within `maxTools`) become
 * `proposed` rows, known tools get their current definition, unlisted ones are marked absent.
 * Discovery never changes a row's status: only an owner enables.
 */
export function syncServerTools(
  db: Db,
  server: ServerConfig,
  listed: Tool[],
  opts: { descriptionMaxChars: number },
): SyncSummary {
  const allow = server.allowTools ? new Set(server.allowTools) : null;
  const byName = new Map<string, Tool>();
  for (const t of listed) {
    if (typeof t.name !== "string" || byName.has(t.name)) continue;
    if (allow && !allow.has(t.name)) continue;
    byName.set(t.name, t);
  }
  const summary: SyncSummary = {
    server: server.name,
    added: [],
    changed: [],
    gone: [],
    returned: [],
    overCap: [],
  };
  const now = new Date().toISOString();

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
        continue;
      }
      if (!row.present) summary.returned.push(localName);
      if (row.definitionHash !== hash) summary.changed.push(localName);
      if (!row.present || row.definitionHash !== hash) {
        tx.update(tools)
          .set({ ...fields, updatedAt: now })
          .where(eq(tools.localName, row.localName))
          .run();
      }
    }
    for (const row of rows) {
      if (row.present && !byName.has(row.remoteName)) {
        tx.update(tools)
          .set({ present: false, updatedAt: now })
          .where(eq(tools.localName, row.localName))
          .run();
        summary.gone.push(row.localName);
      }
    }
    tx.delete(overCapTools).where(eq(overCapTools.server, server.name)).run();
    for (const name of trim.overCap) {
      tx.insert(overCapTools).values({ server: server.name, remoteName: name }).run();
      summary.overCap.push(name);
    }
    if (hasChanges(summary)) {
      tx.insert(auditEvents)
        .values({
          actor: `server:${server.name}`,
          action: "catalogue.refresh",
          subject: server.name,
          detail: JSON.stringify(summary),
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
  return JSON.parse(row.definition) as ToolDefinition;
}

export function toCatalogueView(row: ToolRow): CatalogueToolView {
  const def = parseDefinition(row);
  return {
    localName: row.localName,
    server: row.server,
    remoteName: row.remoteName,
    status: row.status as ToolStatus,
    availability: availabilityOf(row),
    unusableReason: row.unusableReason,
    description: row.description,
    inputSchema: def.inputSchema,
    annotations: def.annotations,
    destructive: !row.readOnly,
    updatedAt: row.updatedAt,
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
        destructive: !r.readOnly,
      };
    });
}

export function getToolRow(db: Db, localName: string): ToolRow | null {
  return db.select().from(tools).where(eq(tools.localName, localName)).get() ?? null;
}

/**
 * The owner's decision on a tool. Enabling pins the current definition; a tool that is gone or
 * unusable cannot be enabled.
 */
export function setToolStatus(
  db: Db,
  params: { localName: string; status: "enabled" | "disabled"; actor: string },
): CatalogueToolView {
  return db.transaction((tx) => {
    const row = tx.select().from(tools).where(eq(tools.localName, params.localName)).get();
    if (!row) throw new GatehouseError("tool_not_found", `no tool named "${params.localName}"`);
    if (params.status === "enabled") {
      if (row.unusableReason) {
        throw new GatehouseError(
          "tool_unusable",
          `${row.localName} cannot be enabled: ${row.unusableReason}`,
        );
      }
      if (!row.present) {
        throw new GatehouseError(
          "tool_gone",
          `${row.localName} cannot be enabled: its server no longer lists it`,
        );
      }
    }
    const pinnedHash = params.status === "enabled" ? row.definitionHash : row.pinnedHash;
    const updated = tx
      .update(tools)
      .set({ status: params.status, pinnedHash, updatedAt: new Date().toISOString() })
      .where(and(eq(tools.localName, row.localName)))
      .returning()
      .get();
    tx.insert(auditEvents)
      .values({
        actor: params.actor,
        action: params.status === "enabled" ? "tool.enable" : "tool.disable",
        subject: row.localName,
        detail: params.status === "enabled" ? `pinned ${row.definitionHash.slice(0, 12)}` : null,
      })
      .run();
    return toCatalogueView(updated ?? row);
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
