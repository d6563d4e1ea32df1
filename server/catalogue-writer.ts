import "server-only";
import type { Tool } from "@modelcontextprotocol/client";
import { toolSetWarnings } from "./agents";
import { hasChanges, type SyncSummary, syncServerTools } from "./catalogue/catalogue";
import type { GatehouseConfig, ServerConfig } from "./config";
import type { EventBus } from "./events";
import { endGrantsForChanges } from "./grants";
import type { Logger } from "./log";
import type { Metrics } from "./metrics";
import type { Notifier } from "./notify/notifier";
import { rulesMatchingNoTool } from "./rules";
import type { Db } from "./store/db";
import { tools } from "./store/schema";

/**
 * The manager's `onTools` as the runtime wires it: a server's listed tools into the catalogue (in
 * one transaction with the grants they end and the notifications they cause), counted, told to
 * browsers, and the rules checked once every enabled server has listed its tools. Never throws:
 * a list that could not be stored is logged and counted, and the server stays as it was.
 */
export function catalogueWriter(deps: {
  db: Db;
  config: GatehouseConfig;
  bus: EventBus;
  notifier: Notifier;
  metrics: Metrics;
  log: Logger;
}): (server: ServerConfig, tools: Tool[]) => Promise<void> {
  const { db, config, bus, notifier, metrics, log } = deps;
  const enabledServers = config.servers.filter((s) => s.enabled).map((s) => s.name);
  const listedOnce = new Set<string>();
  let rulesChecked = false;
  return async (server, listed) => {
    let summary: SyncSummary;
    try {
      summary = await syncServerTools(db, server, listed, {
        descriptionMaxChars: config.catalogue.descriptionMaxChars,
        // Queued in the refresh's own transaction: a crash cannot keep the feed and lose the message.
        // Grants of a tool whose definition changed end in the same transaction as the change.
        alsoWrite: async (tx, changes) => {
          await endGrantsForChanges(tx, changes);
          await notifier.catalogueChanged(tx, server.name, changes);
        },
      });
    } catch (err) {
      metrics.recordRefresh(metrics.bounds.server(server.name), "error");
      log.error(`catalogue of ${server.name} could not be stored`, { error: String(err) });
      return;
    }
    metrics.recordRefresh(metrics.bounds.server(server.name), "ok", {
      added: summary.added.length + summary.returned.length,
      changed: summary.changed.length,
      removed: summary.gone.length,
    });
    if (hasChanges(summary) || summary.overCap.length > 0) {
      log.info(`catalogue of ${server.name} updated`, {
        added: summary.added.length,
        changed: summary.changed.length,
        gone: summary.gone.length,
        returned: summary.returned.length,
        overCap: summary.overCap.length,
      });
    }
    bus.publish({ type: "catalogue", server: server.name });
    listedOnce.add(server.name);
    if (!rulesChecked && enabledServers.every((name) => listedOnce.has(name))) {
      rulesChecked = true;
      await warnUnmatchedRules(db, config, log);
    }
  };
}

/**
 * A rule or tool set whose globs match no tool the catalogue knows is probably a typo, and so is
 * a token's set the configuration lacks: said once, as warnings, when every enabled server has
 * listed its tools (a dark server's tools may still come).
 */
async function warnUnmatchedRules(db: Db, config: GatehouseConfig, log: Logger): Promise<void> {
  const known = (await db.select({ name: tools.localName }).from(tools)).map((t) => t.name);
  for (const warning of await toolSetWarnings(db, config.toolSets, known)) log.warn(warning);
  for (const name of rulesMatchingNoTool(config.rules, known)) {
    const index = config.rules.findIndex((r) => r.name === name);
    log.warn(
      `rules[${index}] "${name}": its tools globs match no tool in the catalogue; check its "tools" for a typo`,
    );
  }
}
