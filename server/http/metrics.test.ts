import { readFileSync } from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { parser as promql } from "@prometheus-io/lezer-promql";
import { describe, expect, it } from "vitest";
import { freePort } from "@/test/support/http-servers";
import {
  ADD_NOTE,
  createTestUser,
  enableTool,
  LIST_NOTES,
  productionListener,
  REPO_ROOT,
  request,
  type TestRuntime,
  waitForCallStatus,
  waitForServersReady,
} from "@/test/support/runtime";
import { addNote, approve, call, deny, people, runtimes } from "../calls/call-fixtures";
import { Metrics } from "../metrics";
import { answerMetrics } from "./metrics";

const { start } = runtimes();

const SCRAPE_TOKEN = "scrape-token-0123456789abcdef";
const FAILING = path.join(REPO_ROOT, "test", "fixtures", "servers", "failing.mjs");

/** A runtime with the scrape token configured, the demo and the failing server ready, tools enabled. */
async function started(opts: Parameters<typeof start>[0] = {}) {
  const rt = await start({
    servers: { failing: { command: "node", args: [FAILING], enabled: true } },
    env: { SCRAPE_TOKEN },
    ...opts,
    config: {
      metrics: { token: "${SCRAPE_TOKEN}" },
      rules: [{ name: "no-drop", tools: [ADD_NOTE], when: "args.text.contains('DROP')", decision: "deny" }],
      ...opts.config,
    },
  });
  await waitForServersReady(rt.runtime, ["demo", "failing"]);
  await enableTool(rt.runtime, "failing_check_status");
  return rt;
}

/** The production listener on a loopback port, Next replaced by a plain 404. */
async function listening(rt: TestRuntime, at = 0): Promise<{ url: string; close(): Promise<void> }> {
  const door = await productionListener(rt, at);
  return { url: `${door.origin}/metrics`, close: door.close };
}

/** One scrape's series, by name and label set as written (`name{a="x",b="y"}`). */
type Scrape = Map<string, number>;

async function scrape(
  url: string,
  headers: Record<string, string> = { authorization: `Bearer ${SCRAPE_TOKEN}` },
) {
  const res = await fetch(url, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  const text = await res.text();
  const series: Scrape = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return { text, series };
}

/** The value of `name` with exactly `labels` (0 when the series does not exist yet). */
function value(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  const inner = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const key = inner === "" ? name : `${name}{${inner}}`;
  return s.get(key) ?? 0;
}

/** Every series of `name` whose labels include `labels`, summed. */
function sum(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [key, v] of s) {
    const brace = key.indexOf("{");
    if ((brace === -1 ? key : key.slice(0, brace)) !== name) continue;
    if (Object.entries(labels).every(([k, l]) => key.includes(`${k}="${l}"`))) total += v;
  }
  return total;
}

/** The PromQL lines of the README's example block, each without its trailing `# comment`. */
function readmeQueries(): string[] {
  const readme = readFileSync(path.join(REPO_ROOT, "README.md"), "utf8");
  const block = /```promql\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  return block
    .split("\n")
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter(Boolean);
}

/** What `query` reads: each selector's metric with the label names it matches or groups by. */
function selectors(query: string): { errors: number; used: { metric: string; labels: string[] }[] } {
  const used: { metric: string; labels: string[] }[] = [];
  let errors = 0;
  const grouping: string[] = [];
  promql.parse(query).iterate({
    enter: (node) => {
      if (node.type.isError) errors++;
      const text = query.slice(node.from, node.to);
      if (node.name === "GroupingLabels") grouping.push(...[...text.matchAll(/\w+/g)].map((m) => m[0]));
      if (node.name === "VectorSelector") {
        const metric = /^\w+/.exec(text)?.[0] ?? "";
        const labels = [...text.matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)].map((m) => m[1] ?? "");
        used.push({ metric, labels });
      }
    },
  });
  // Grouped by (`by (le)`, before or after the body): each selector must carry those labels.
  for (const u of used) u.labels.push(...grouping);
  return { errors, used };
}

describe("/metrics", () => {
  it("the README's three example queries are PromQL that read only series and labels the scrape has", async () => {
    const queries = readmeQueries();
    expect(queries).toHaveLength(3);
    const rt = await started();
    const door = await listening(rt);
    try {
      const { agent } = await people(rt);
      // A decision, so that the decision histogram has its series.
      await call(agent, LIST_NOTES, {}, 200);
      const { series } = await scrape(door.url);
      for (const query of queries) {
        const { errors, used } = selectors(query);
        expect(errors, query).toBe(0);
        expect(used.length, query).toBeGreaterThan(0);
        for (const { metric, labels } of used) {
          const keys = [...series.keys()].filter((k) => k === metric || k.startsWith(`${metric}{`));
          expect(keys.length, `${metric} in the scrape`).toBeGreaterThan(0);
          for (const label of labels) {
            expect(
              keys.some((k) => new RegExp(`[{,]${label}="`).test(k)),
              `${metric} has label ${label}`,
            ).toBe(true);
          }
        }
      }
    } finally {
      await door.close();
    }
  });

  it("counts each kind of call by server, tool and outcome, and times each decision by how it was made", async () => {
    const rt = await started();
    const door = await listening(rt);
    try {
      const { agent, alice } = await people(rt);
      const before = (await scrape(door.url)).series;

      // A read runs at once (the default), a destructive call waits and is approved, another is
      // denied, one is refused by a rule, one fails upstream, and one is covered by a grant.
      await call(agent, LIST_NOTES, {}, 200);
      const approved = await addNote(agent, "approve me");
      expect((await approve(approved.id, alice.cookie)).status).toBe(200);
      await waitForCallStatus(rt.runtime, approved.id, "succeeded");
      const denied = await addNote(agent, "deny me");
      expect((await deny(denied.id, alice.cookie, "no")).status).toBe(200);
      const refused = await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: ADD_NOTE, arguments: { text: "DROP it" } },
      });
      expect(refused.status).toBe(403);
      const failed = await call(agent, "failing_check_status", {}, 200);
      expect(failed.status).toBe("failed");
      const seed = await addNote(agent, "grant seed");
      const granted = await request("POST", `/api/calls/${seed.id}/approve`, {
        cookie: alice.cookie,
        body: { grant: { scope: "tool", minutes: 10, uses: 2 } },
      });
      expect(granted.status).toBe(200);
      await waitForCallStatus(rt.runtime, seed.id, "succeeded");
      const covered = await call(agent, ADD_NOTE, { text: "under the grant" }, 200);
      expect(covered.grantId).not.toBeNull();

      const after = (await scrape(door.url)).series;
      const moved = (name: string, labels: Record<string, string>) =>
        value(after, name, labels) - value(before, name, labels);
      const calls = "gatehouse_calls_total";
      expect(moved(calls, { server: "demo", tool: LIST_NOTES, outcome: "succeeded" })).toBe(1);
      // The approved one, the grant's seed and the call the grant covered.
      expect(moved(calls, { server: "demo", tool: ADD_NOTE, outcome: "succeeded" })).toBe(3);
      expect(moved(calls, { server: "demo", tool: ADD_NOTE, outcome: "denied" })).toBe(1);
      expect(moved(calls, { server: "demo", tool: ADD_NOTE, outcome: "refused" })).toBe(1);
      expect(moved(calls, { server: "failing", tool: "failing_check_status", outcome: "failed" })).toBe(1);
      expect(sum(after, calls) - sum(before, calls)).toBe(7);

      const decided = "gatehouse_decision_seconds_count";
      expect(moved(decided, { how: "default" })).toBe(2); // the read and the failing read
      expect(moved(decided, { how: "reviewer" })).toBe(3); // approved, denied, the grant's seed
      expect(moved(decided, { how: "rule" })).toBe(1);
      expect(moved(decided, { how: "grant" })).toBe(1);
      expect(moved(decided, { how: "expiry" })).toBe(0);

      // Three calls reached the demo server and one the failing one, each timed by outcome.
      const upstream = "gatehouse_upstream_request_seconds_count";
      expect(moved(upstream, { server: "demo", method: "tools/call", outcome: "ok" })).toBe(4);
      expect(moved(upstream, { server: "failing", method: "tools/call", outcome: "ok" })).toBe(1);
      expect(value(after, "gatehouse_pending_calls")).toBe(0);
      expect(value(after, "gatehouse_store_up")).toBe(1);
      expect(value(after, "gatehouse_server_state", { server: "demo", state: "ready" })).toBe(1);
      expect(value(after, "gatehouse_server_state", { server: "demo", state: "failed" })).toBe(0);
      expect(
        sum(after, "gatehouse_tool_list_refreshes_total", { server: "demo", outcome: "ok" }),
      ).toBeGreaterThan(0);
      expect(
        value(after, "gatehouse_store_transaction_seconds_count", { outcome: "committed" }),
      ).toBeGreaterThan(value(before, "gatehouse_store_transaction_seconds_count", { outcome: "committed" }));
      expect(after.has("gatehouse_process_cpu_seconds_total")).toBe(true);
    } finally {
      await door.close();
    }
  });

  it("counts a call left to expire as decided by expiry, and shows pending calls from the store", async () => {
    const rt = await started({ approvals: { expireAfterSeconds: 1 } });
    const door = await listening(rt);
    try {
      const { agent } = await people(rt);
      const held = await addNote(agent, "nobody decides");
      expect(value((await scrape(door.url)).series, "gatehouse_pending_calls")).toBe(1);
      await waitForCallStatus(rt.runtime, held.id, "expired");
      const after = (await scrape(door.url)).series;
      expect(
        value(after, "gatehouse_calls_total", { server: "demo", tool: ADD_NOTE, outcome: "expired" }),
      ).toBe(1);
      expect(value(after, "gatehouse_decision_seconds_count", { how: "expiry" })).toBe(1);
      expect(value(after, "gatehouse_pending_calls")).toBe(0);
    } finally {
      await door.close();
    }
  });

  it("answers 401 without the scrape token or an owner's session, 403 to a reviewer, and counts nothing for them", async () => {
    const rt = await started();
    const door = await listening(rt);
    try {
      const { agent, alice } = await people(rt);
      const owner = await createTestUser(rt.runtime, "olive", ["owner"]);
      for (const headers of <Record<string, string>[]>[
        {},
        { authorization: "Bearer not-the-scrape-token-at-all" },
        { authorization: `Bearer ${agent}` },
        { authorization: `Basic ${Buffer.from(`x:${SCRAPE_TOKEN}`).toString("base64")}` },
      ]) {
        const res = await fetch(door.url, { headers });
        expect(res.status).toBe(401);
        const body = (await res.json()) as { error: { code: string } };
        expect(body.error.code).toBe("unauthenticated");
      }
      const reviewer = await fetch(door.url, { headers: { cookie: alice.cookie } });
      expect(reviewer.status).toBe(403);
      const byOwner = await scrape(door.url, { cookie: owner.cookie });
      expect(byOwner.text).toContain("gatehouse_calls_total");
      // The refused scrapes were no sign-in attempts.
      expect(sum(byOwner.series, "gatehouse_sign_in_failures_total")).toBe(0);
    } finally {
      await door.close();
    }
  });

  it("never puts an argument into a label value: a unique marker sent as an argument is nowhere in the scrape", async () => {
    const rt = await started();
    const door = await listening(rt);
    try {
      const { agent, alice } = await people(rt);
      const marker = `marker-${crypto.randomUUID()}`;
      await call(agent, LIST_NOTES, {}, 200);
      const held = await addNote(agent, marker);
      expect((await approve(held.id, alice.cookie)).status).toBe(200);
      await waitForCallStatus(rt.runtime, held.id, "succeeded");
      const refused = await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: ADD_NOTE, arguments: { text: `DROP ${marker}` } },
      });
      expect(refused.status).toBe(403);
      // A tool name nobody knows is the agent's own text too: counted as "other".
      const unknown = await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: marker, arguments: { text: marker } },
      });
      expect(unknown.status).toBe(404);
      const { text, series } = await scrape(door.url);
      expect(text).not.toContain(marker);
      expect(
        value(series, "gatehouse_calls_total", { server: "other", tool: "other", outcome: "refused" }),
      ).toBe(1);
    } finally {
      await door.close();
    }
  });

  it("shows /mcp sessions and listen streams as an SDK client opens and closes them", async () => {
    const port = await freePort();
    const rt = await started({ config: { agentEndpoint: { allowedHosts: [`127.0.0.1:${port}`] } } });
    const door = await listening(rt, port);
    try {
      const { agent } = await people(rt);
      const before = (await scrape(door.url)).series;
      expect(value(before, "gatehouse_mcp_sessions")).toBe(0);
      expect(value(before, "gatehouse_mcp_listen_streams")).toBe(0);
      const client = new Client({ name: "sdk-v1-agent", version: "1.0.0" }, { capabilities: {} });
      const transport = new StreamableHTTPClientTransport(new URL(door.url.replace("/metrics", "/mcp")), {
        requestInit: { headers: { Authorization: `Bearer ${agent}` } },
      });
      await client.connect(transport);
      // The client opens its GET stream after initialize, on its own time.
      await expect
        .poll(async () => value((await scrape(door.url)).series, "gatehouse_mcp_listen_streams"))
        .toBe(1);
      expect(value((await scrape(door.url)).series, "gatehouse_mcp_sessions")).toBe(1);
      await transport.terminateSession();
      await client.close();
      await expect.poll(async () => value((await scrape(door.url)).series, "gatehouse_mcp_sessions")).toBe(0);
      await expect
        .poll(async () => value((await scrape(door.url)).series, "gatehouse_mcp_listen_streams"))
        .toBe(0);
    } finally {
      await door.close();
    }
  });

  it("says the store is up on the very first scrape, with the store's count of waiting calls", async () => {
    const rt = await started();
    const door = await listening(rt);
    try {
      const { series } = await scrape(door.url);
      expect(value(series, "gatehouse_store_up")).toBe(1);
      expect(value(series, "gatehouse_pending_calls")).toBe(0);
    } finally {
      await door.close();
    }
  });

  it("counts the calls a revoked token and a removed person leave as withdrawn", async () => {
    const rt = await started();
    const door = await listening(rt);
    try {
      const { agent } = await people(rt);
      const owner = await createTestUser(rt.runtime, "olive", ["owner"]);
      const rita = await createTestUser(rt.runtime, "rita", ["owner"]);
      await addNote(agent, "left by the agent");
      const byRita = await request("POST", "/api/calls", {
        cookie: rita.cookie,
        body: { tool: ADD_NOTE, arguments: { text: "left by rita" } },
      });
      expect(byRita.status).toBe(202);
      expect((await request("DELETE", "/api/tokens/agent-a", { cookie: owner.cookie })).status).toBe(200);
      expect((await request("DELETE", "/api/users/rita", { cookie: owner.cookie })).status).toBe(200);
      const { series } = await scrape(door.url);
      expect(
        value(series, "gatehouse_calls_total", { server: "demo", tool: ADD_NOTE, outcome: "withdrawn" }),
      ).toBe(2);
      expect(value(series, "gatehouse_decision_seconds_count", { how: "withdrawal" })).toBe(2);
      expect(value(series, "gatehouse_pending_calls")).toBe(0);
    } finally {
      await door.close();
    }
  });

  it("turned off, counts nothing and answers 404", async () => {
    const rt = await started();
    const off = new Metrics(["demo"], null, false);
    off.recordCall({ from: null, call: { server: "demo", tool: LIST_NOTES, status: "succeeded" } });
    off.recordSignInFailure("bad_credentials");
    expect(await off.registry.metrics()).not.toMatch(/^gatehouse_calls_total\{/m);
    const res = await answerMetrics(new Headers({ authorization: `Bearer ${SCRAPE_TOKEN}` }), {
      ...rt.runtime,
      metrics: off,
      scrapeToken: SCRAPE_TOKEN,
    });
    expect(res.status).toBe(404);
  });

  it("counts refused sign-ins by reason", async () => {
    const rt = await started();
    const door = await listening(rt);
    try {
      await createTestUser(rt.runtime, "olive", ["owner"], "a-good-password-1");
      const res = await request("POST", "/api/session", {
        body: { name: "olive", password: "wrong-password-1" },
      });
      expect(res.status).toBe(401);
      const { series } = await scrape(door.url);
      expect(value(series, "gatehouse_sign_in_failures_total", { reason: "bad_credentials" })).toBe(1);
    } finally {
      await door.close();
    }
  });
});
