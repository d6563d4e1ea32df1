import "server-only";
import { createHash, timingSafeEqual } from "node:crypto";
import { serverStates } from "@/lib/api-types";
import type { AgentMcpEndpoint } from "../agent-mcp/endpoint";
import { authenticate } from "../auth/access";
import type { McpManager } from "../mcp/manager";
import type { Metrics } from "../metrics";
import { forwardedHttps } from "../request";
import { countPending } from "../servers/health-panel";
import type { Db } from "../store/db";
import { withinMs } from "./health";
import { json } from "./route";

/** The path Prometheus scrapes. */
export const METRICS_PATH = "/metrics";

/** How long a scrape waits for the store's answer before it leaves the store's gauges out (ms). */
export const STORE_GAUGE_MS = 1_000;

/** What a scrape reads besides the counters: the runtime's parts, by what each gives. */
export interface ScrapeSources {
  db: Db;
  metrics: Metrics;
  manager: Pick<McpManager, "list">;
  agentMcp: Pick<AgentMcpEndpoint, "sessionCount" | "listenStreamCount">;
  /** `metrics.token` of the config, when set. */
  scrapeToken?: string;
}

/** The gauges registered on each process's metrics, once: read from their sources at each scrape. */
const registered = new WeakMap<Metrics, { pending: Promise<number | null> }>();

/**
 * Registers the gauges a scrape reads at that moment: pending calls (from the store, so every
 * replica tells the same number; NaN, with `gatehouse_store_up 0`, when the store does not answer
 * within {@link STORE_GAUGE_MS}), each server's state (one series per state, 1 for the current
 * one: the states this replica sees), `/mcp` sessions and listen streams (this replica's). The
 * store is asked once per scrape; both of its gauges wait for that one answer (prom-client
 * collects every metric at once).
 */
function registerGauges(src: ScrapeSources): { pending: Promise<number | null> } {
  const { metrics } = src;
  const known = registered.get(metrics);
  if (known) return known;
  const scrape: { pending: Promise<number | null> } = { pending: Promise.resolve(null) };
  registered.set(metrics, scrape);
  metrics.gauge({
    name: "gatehouse_store_up",
    help: "Whether the store answered this scrape's query in time (1) or not (0).",
    labelNames: [],
    async collect() {
      this.set((await scrape.pending) === null ? 0 : 1);
    },
  });
  metrics.gauge({
    name: "gatehouse_pending_calls",
    help: "Calls waiting for a reviewer now (the store's count: the same on every replica); NaN when the store did not answer.",
    labelNames: [],
    async collect() {
      this.set((await scrape.pending) ?? Number.NaN);
    },
  });
  metrics.gauge({
    name: "gatehouse_server_state",
    help: "Each configured server's state as this replica sees it: 1 for its current state, 0 for the others.",
    labelNames: ["server", "state"],
    async collect() {
      this.reset();
      for (const { config, status } of src.manager.list()) {
        const server = metrics.bounds.server(config.name);
        for (const state of serverStates) this.set({ server, state }, status.state === state ? 1 : 0);
      }
    },
  });
  metrics.gauge({
    name: "gatehouse_mcp_sessions",
    help: "2025 /mcp sessions this replica holds in memory.",
    labelNames: [],
    async collect() {
      this.set(src.agentMcp.sessionCount());
    },
  });
  metrics.gauge({
    name: "gatehouse_mcp_listen_streams",
    help: "Open /mcp listen streams on this replica (2025 GET streams and 2026-07-28 subscriptions/listen).",
    labelNames: [],
    async collect() {
      this.set(src.agentMcp.listenStreamCount());
    },
  });
  return scrape;
}

/** The count of pending calls, or null when the store failed or did not answer within {@link STORE_GAUGE_MS}. */
function pendingCalls(db: Db): Promise<number | null> {
  return withinMs(countPending(db), STORE_GAUGE_MS).then(
    (n) => (n === "late" ? null : n),
    () => null,
  );
}

/**
 * `GET /metrics`: the Prometheus text of this process, for an owner's session or the scrape
 * token (`Authorization: Bearer <metrics.token>`). Anything else is 401 and reads nothing, so an
 * unauthenticated scrape costs no query. An agent's token is no scrape token, nor is a reviewer's
 * session (403): the numbers describe every agent and server.
 */
export async function answerMetrics(headers: Headers, src: ScrapeSources): Promise<Response> {
  if (!src.metrics.enabled) {
    return json(
      { error: { code: "not_found", message: "metrics are off here (GATEHOUSE_METRICS=off)" } },
      404,
    );
  }
  const allowed = await mayScrape(headers, src);
  if (allowed !== true) return allowed;
  const scrape = registerGauges(src);
  scrape.pending = pendingCalls(src.db);
  const text = await src.metrics.registry.metrics();
  return new Response(text, {
    status: 200,
    headers: { "content-type": src.metrics.registry.contentType, "cache-control": "no-store" },
  });
}

async function mayScrape(headers: Headers, src: ScrapeSources): Promise<true | Response> {
  const authorization = headers.get("authorization")?.trim() ?? "";
  const bearer = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1];
  if (bearer !== undefined && src.scrapeToken !== undefined && sameSecret(bearer, src.scrapeToken))
    return true;
  // Any other Bearer is no scrape token, nor an owner's: refused without a look into the store.
  const principal = /^Bearer\b/i.test(authorization)
    ? null
    : await authenticate(src.db, headers, forwardedHttps(headers));
  if (principal?.kind === "user" && principal.user.roles.includes("owner")) return true;
  if (principal?.kind === "user") {
    return json(
      { error: { code: "forbidden", message: "only owners (or the scrape token) may read /metrics" } },
      403,
    );
  }
  return json(
    {
      error: {
        code: "unauthenticated",
        message:
          "/metrics needs the scrape token (metrics.token in gatehouse.json) as a Bearer token, or an owner's session",
      },
    },
    401,
    { "www-authenticate": 'Bearer realm="gatehouse-metrics"' },
  );
}

/** Compares two secrets in time independent of where they differ (by their digests: lengths may differ). */
function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}
