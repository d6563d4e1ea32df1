import "server-only";
import { childPath } from "./display";
import { writeRefs } from "./expand";
import { readMetrics } from "./metrics";
import { CATALOGUE_WEBHOOK_URL, readNotifications } from "./notifications";
import type { Json } from "./readers";
import {
  checkKeys,
  Issues,
  isObject,
  readBool,
  readInt,
  readSection,
  readUrl,
  reportingExpander,
  show,
  typeName,
} from "./readers";
import { readRules } from "./rules";
import { validateServer } from "./servers";
import { readAgentLimits, readToolSets } from "./tool-sets";
import type {
  AgentEndpointConfig,
  ApprovalsConfig,
  CatalogueConfig,
  ConfigResult,
  GatehouseConfig,
  NotificationsConfig,
  ServerConfig,
  ValidateOptions,
} from "./types";

/**
 * Validation of gatehouse.json (PRODUCT.md §2): the top level and its sections here, one
 * `mcpServers` entry in servers.ts, `notifications` in notifications.ts, `rules` in rules.ts.
 *
 * A hand-written walker rather than a zod schema: every message must carry the JSON path and a
 * fix, unknown keys need "did you mean" suggestions, and secret values (header and env values)
 * must never reach a message — all easier to guarantee when each check writes its own text.
 */

const TOP_KEYS = [
  "mcpServers",
  "approvals",
  "catalogue",
  "agentEndpoint",
  "notifications",
  "rules",
  "metrics",
  "toolSets",
  "agentLimits",
] as const;
const APPROVAL_KEYS = ["expireAfterSeconds", "waitSeconds", "selfApproval"] as const;
const CATALOGUE_KEYS = ["descriptionMaxChars", "refreshSeconds", "webhook", "webhookAllowPrivate"] as const;

/** Keys other MCP clients use, so a pasted file gets a real fix rather than a bare "unknown". */
const TOP_HINTS: Record<string, string> = {
  servers: 'Gatehouse reads servers from "mcpServers"; rename "servers" to "mcpServers"',
};

/**
 * Validates a parsed configuration. Every server is checked, enabled or dark, and every problem
 * is reported at once; `config` is null when there is any error. Never throws for bad input.
 */
export function validateConfig(raw: unknown, opts: ValidateOptions): ConfigResult {
  const issues = new Issues();
  if (!isObject(raw)) {
    issues.error(
      "",
      `the configuration must be a JSON object like {"mcpServers": {...}}, not ${typeName(raw)}`,
    );
    return { config: null, errors: issues.errors, warnings: issues.warnings };
  }
  checkKeys(raw, TOP_KEYS, "", TOP_HINTS, issues);

  const servers: ServerConfig[] = [];
  const rawServers = raw.mcpServers;
  if (rawServers === undefined) {
    issues.error(
      "mcpServers",
      'is required; add "mcpServers": {} with one entry per server, e.g. {"files": {"command": "npx", "args": ["..."]}}',
    );
  } else if (!isObject(rawServers)) {
    issues.error(
      "mcpServers",
      `must be an object mapping server names to their settings, e.g. {"files": {"command": "npx"}}, not ${typeName(rawServers)}`,
    );
  } else {
    for (const [name, entry] of Object.entries(rawServers)) {
      const server = validateServer(name, entry, childPath("mcpServers", name), opts, issues);
      if (server) servers.push(server);
    }
  }
  servers.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  const approvalsRaw = readSection(
    raw,
    "approvals",
    "",
    '{"expireAfterSeconds": 900, "waitSeconds": 60}',
    issues,
  );
  checkKeys(approvalsRaw, APPROVAL_KEYS, "approvals", {}, issues);
  const approvals: ApprovalsConfig = {
    expireAfterSeconds: readInt(approvalsRaw, "expireAfterSeconds", "approvals", issues),
    waitSeconds: readInt(approvalsRaw, "waitSeconds", "approvals", issues),
    selfApproval: readBool(approvalsRaw, "selfApproval", "approvals", false, issues),
  };

  const catalogueRaw = readSection(
    raw,
    "catalogue",
    "",
    '{"descriptionMaxChars": 1024, "refreshSeconds": 300}',
    issues,
  );
  checkKeys(catalogueRaw, CATALOGUE_KEYS, "catalogue", {}, issues);
  const catalogue: CatalogueConfig = {
    descriptionMaxChars: readInt(catalogueRaw, "descriptionMaxChars", "catalogue", issues),
    refreshSeconds: readInt(catalogueRaw, "refreshSeconds", "catalogue", issues),
  };
  const webhook = readWebhook(catalogueRaw, opts, issues);
  if (webhook !== undefined) catalogue.webhook = webhook;
  if (catalogueRaw.webhookAllowPrivate !== undefined) {
    catalogue.webhookAllowPrivate = readBool(catalogueRaw, "webhookAllowPrivate", "catalogue", false, issues);
  }

  const agentEndpoint = readAgentEndpoint(raw, issues);
  const notifications: NotificationsConfig = readNotifications(
    raw,
    catalogue,
    catalogueRaw.webhook !== undefined,
    opts,
    issues,
  );
  const rules = readRules(raw, issues);
  const metrics = readMetrics(raw, opts.env, issues);
  const toolSets = readToolSets(raw, issues);
  const agentLimits = readAgentLimits(raw, issues);

  const config: GatehouseConfig | null =
    issues.errors.length === 0
      ? { path: opts.path ?? "", servers, approvals, catalogue, notifications, rules, toolSets, agentLimits }
      : null;
  if (config && agentEndpoint) config.agentEndpoint = agentEndpoint;
  if (config && metrics) config.metrics = metrics;
  return { config, errors: issues.errors, warnings: issues.warnings };
}

const AGENT_ENDPOINT_KEYS = ["allowedHosts", "allowedOrigins"] as const;
const HOST_VALUE = /^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** `agentEndpoint`, or undefined when the file has none. */
function readAgentEndpoint(raw: Json, issues: Issues): AgentEndpointConfig | undefined {
  if (raw.agentEndpoint === undefined) return undefined;
  const value = readSection(raw, "agentEndpoint", "", '{"allowedHosts": ["gatehouse.lan:3000"]}', issues);
  checkKeys(value, AGENT_ENDPOINT_KEYS, "agentEndpoint", {}, issues);
  const list = (key: (typeof AGENT_ENDPOINT_KEYS)[number], ok: (v: string) => string | null): string[] => {
    const where = childPath("agentEndpoint", key);
    const items = value[key];
    if (items === undefined) return [];
    if (!Array.isArray(items)) {
      issues.error(where, `must be an array of strings, not ${typeName(items)}`);
      return [];
    }
    const out: string[] = [];
    items.forEach((item: unknown, i) => {
      const problem = typeof item === "string" ? ok(item) : `must be a string, not ${typeName(item)}`;
      if (problem) issues.error(childPath(where, i), problem);
      else out.push(item as string);
    });
    return out;
  };
  const allowedHosts = list("allowedHosts", (v) =>
    HOST_VALUE.test(v)
      ? null
      : `${show(v)} is not a Host value; write a name with an optional port, e.g. "gatehouse.lan:3000" (no scheme, no path)`,
  );
  const allowedOrigins = list("allowedOrigins", (v) => {
    let u: URL | null = null;
    try {
      u = new URL(v);
    } catch {
      u = null;
    }
    const ok = u && (u.protocol === "http:" || u.protocol === "https:") && u.origin === v.replace(/\/$/, "");
    return ok
      ? null
      : `${show(v)} is not an origin; write scheme, name and optional port, e.g. "https://gatehouse.example.com" (no path)`;
  });
  return { allowedHosts, allowedOrigins };
}

/**
 * `catalogue.webhook`: an http(s) URL; a `${VAR}` in it must be set (it is always dialled). Its
 * path and query may be the receiver's token, so messages show it up to its host only.
 */
function readWebhook(raw: Json, opts: ValidateOptions, issues: Issues): string | undefined {
  if (raw.webhook === undefined) return undefined;
  const expand = reportingExpander(opts.env, issues, (where, unset) => {
    issues.error(
      where,
      `refers to ${writeRefs(unset)}, which ${unset.length === 1 ? "is" : "are"} not set; set ${unset.join(", ")} in Gatehouse's environment or remove "webhook"`,
    );
  });
  return readUrl(raw.webhook, "catalogue.webhook", expand, issues, CATALOGUE_WEBHOOK_URL) ?? undefined;
}
