import "server-only";
import { eq } from "drizzle-orm";
import type { ServerSwitchView } from "@/lib/api-types";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import { type ServerConfig, writeRefs } from "../config";
import type { McpManager } from "../mcp/manager";
import { writeAudit } from "../store/audit";
import { type Db, transaction } from "../store/db";
import { serverSwitches } from "../store/schema";

/**
 * An owner's "Switch on" for a server whose entry has no `enabled` key (every entry pasted from
 * a desktop client's config): dark until switched on still holds, but the switch can be made on
 * the Servers page instead of in the file. It is audited and kept in the store, so it outlives a
 * restart, and "Switch off" undoes it. The file wins whenever it says `"enabled"` either way.
 */

export interface SwitchedOn {
  by: string;
  at: string;
}

/** Every server an owner switched on from the page, by name. */
export async function switchedOnServers(db: Db): Promise<Map<string, SwitchedOn>> {
  const rows = await db.select().from(serverSwitches);
  return new Map(rows.map((r) => [r.name, { by: r.switchedBy, at: r.switchedAt }]));
}

/** Why `server` cannot be switched on from the page (code and sentence), or null when it can. */
export function switchOnRefusal(server: ServerConfig): { code: ErrorCode; message: string } | null {
  const said = server.source?.enabled ?? null;
  if (said !== null) {
    return {
      code: "enabled_in_file",
      message:
        `"${server.name}" says "enabled": ${said} in gatehouse.json, and the file wins; ` +
        (said ? "it is switched on there" : "change it to true there (or remove the key) to switch it on"),
    };
  }
  const unset = server.source?.unset ?? [];
  if (unset.length > 0) {
    const names = [...new Set(unset.flatMap((u) => u.names))];
    // The bare names as well: a reference in a credential's field is redacted from log lines.
    return {
      code: "unset_variable",
      message:
        `"${server.name}" cannot be switched on: ${unset.map((u) => `${u.path} uses ${writeRefs(u.names)}`).join("; ")}, ` +
        `not set in Gatehouse's environment; set ${names.join(", ")} there and restart Gatehouse`,
    };
  }
  return null;
}

/** What the Servers page shows of the switch for `server`; null when the file decides alone. */
export function switchView(server: ServerConfig, on: SwitchedOn | undefined): ServerSwitchView | null {
  // A config built by hand has no entry to speak of; one whose entry says "enabled" is the file's.
  if (!server.source || server.source.enabled !== null) return null;
  if (on && server.enabled) return { switchedOn: on, refusal: null };
  return { switchedOn: null, refusal: switchOnRefusal(server)?.message ?? null };
}

/**
 * At start, before anything is dialled: the servers an owner switched on (whose entries still
 * have no `enabled` key) are put in `servers` switched on. One that refers to an unset `${VAR}`
 * stays dark, with a warning; a switch the file now overrules is ignored, with a warning.
 * Returns the warnings.
 */
export async function applyServerSwitches(db: Db, servers: ServerConfig[]): Promise<string[]> {
  const warnings: string[] = [];
  const on = await switchedOnServers(db);
  servers.forEach((server, i) => {
    const switched = on.get(server.name);
    if (!switched || server.enabled) return;
    const refusal = switchOnRefusal(server);
    if (refusal) {
      warnings.push(
        `server ${server.name} was switched on by ${switched.by} but stays dark: ${refusal.message}`,
      );
      return;
    }
    servers[i] = { ...server, enabled: true };
  });
  return warnings;
}

/**
 * Switches a server on (`on`) or off from the Servers page: records it (`server_switches`, and a
 * `server.switch_on` / `server.switch_off` audit row with the owner's name), then puts a
 * supervisor with the new setting in place; switching on dials at once. Switching to the state
 * the server is in changes nothing. `not_found` for an unknown server; `enabled_in_file` when the
 * entry says `"enabled"`; `unset_variable` (naming the paths, never values) when switching on a
 * server whose entry refers to an unset `${VAR}`.
 *
 * Switches take turns, in the order they were asked for: each decides on what the one before it
 * left (the store and the supervisor in place), so of switches sent at the same moment the last
 * one asked for is the one that holds.
 */
export function switchServer(
  manager: McpManager,
  db: Db,
  params: { name: string; on: boolean; actor: string },
): Promise<void> {
  const before = switching.get(manager) ?? Promise.resolve();
  const turn = before.then(
    () => switchNow(manager, db, params),
    () => switchNow(manager, db, params),
  );
  switching.set(manager, turn);
  return turn;
}

/**
 * Puts in place the switches made on other replicas of the store: every server the page may
 * switch (an entry with no `enabled` key) is set to what `server_switches` says now, where that
 * differs from what this replica runs (a server that cannot be switched on stays dark). Takes
 * its turn among this replica's own switches. Resolves with the names it changed.
 */
export function followSwitches(manager: McpManager, db: Db): Promise<string[]> {
  const before = switching.get(manager) ?? Promise.resolve();
  const turn = before.then(
    () => followNow(manager, db),
    () => followNow(manager, db),
  );
  // The caller handles `turn`'s failure; the queue only waits for it.
  switching.set(
    manager,
    turn.then(
      () => undefined,
      () => undefined,
    ),
  );
  return turn;
}

async function followNow(manager: McpManager, db: Db): Promise<string[]> {
  const on = await switchedOnServers(db);
  const changed: string[] = [];
  for (const { config: server } of manager.list()) {
    if (!server.source || server.source.enabled !== null) continue;
    const wanted = on.has(server.name) && switchOnRefusal(server) === null;
    if (wanted === server.enabled) continue;
    await manager.replace({ ...server, enabled: wanted });
    changed.push(server.name);
  }
  return changed;
}

/** The latest switch of each manager's servers, the next one's turn comes after it. */
const switching = new WeakMap<McpManager, Promise<void>>();

async function switchNow(
  manager: McpManager,
  db: Db,
  params: { name: string; on: boolean; actor: string },
): Promise<void> {
  const server = manager.get(params.name).config;
  const stored = (await switchedOnServers(db)).has(server.name);
  if (params.on) {
    const refusal = switchOnRefusal(server);
    if (refusal) throw new GatehouseError(refusal.code, refusal.message);
    if (stored && server.enabled) return;
  } else {
    const said = server.source?.enabled ?? null;
    if (said !== null) throw new GatehouseError("enabled_in_file", switchOnRefusal(server)?.message ?? "");
    if (!stored && !server.enabled) return;
  }
  await transaction(db, async (tx) => {
    if (params.on) {
      await tx
        .insert(serverSwitches)
        .values({ name: server.name, switchedBy: params.actor })
        .onConflictDoNothing();
    } else {
      await tx.delete(serverSwitches).where(eq(serverSwitches.name, server.name));
    }
    // On the transaction's `tx`, so part of it.
    await writeAudit(tx, {
      actor: params.actor,
      action: params.on ? "server.switch_on" : "server.switch_off",
      subject: server.name,
    });
  });
  await manager.replace({ ...server, enabled: params.on });
}
