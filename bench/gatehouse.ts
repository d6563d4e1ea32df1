/**
 * Starts a real Gatehouse for the benchmark the way users run it: `npm start` (config check, then
 * the bundled production server, server/main.ts, on the existing build) with
 * `NODE_ENV=production`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Agent, request } from "undici";
import { serverBundle } from "../scripts/server-command.mjs";
import { cpuMsOf, descendantMatching, freePort, root, type Started, startProcess } from "./support";

const OWNER = { name: "bench-owner", password: "bench-owner-password" };
const REVIEWER = { name: "bench-reviewer", password: "bench-reviewer-password" };

export interface Gatehouse {
  base: string;
  /** The serving process (the server bundle under `npm start`), whose CPU and RSS are measured. */
  pid: number;
  /** The owner's session cookie, `name=value`. */
  cookie: string;
  /** A reviewer's session cookie, `name=value` (the owner made the agent token, so may not approve). */
  reviewerCookie: string;
  token: string;
  /** Everything the server process tree wrote to stdout and stderr so far. */
  output(): string;
  /** Keep-alive pool for agent requests. */
  agent: Agent;
  call(
    tool: string,
    args: Record<string, unknown>,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  approve(id: string): Promise<number>;
  waitFor(id: string, seconds: number): Promise<Record<string, unknown>>;
  /**
   * Starts another replica of this Gatehouse (PostgreSQL only: the same config, store and
   * environment, a port of its own), resolving once its enabled servers are ready as it sees
   * them; it shares this one's people and token. Stop it before this one.
   */
  addReplica(): Promise<Gatehouse>;
  stop(): Promise<void>;
}

/** Options of {@link startGatehouse}. */
export interface StartOptions {
  /**
   * More environment for `npm start`: `DATABASE_URL` (and the `GATEHOUSE_SECRET_KEY` replicas
   * share) runs it on PostgreSQL; default none, a SQLite file in a temporary directory.
   */
  env?: Record<string, string>;
  /** More top-level keys of gatehouse.json (`toolSets`, `agentLimits`); default none. */
  config?: Record<string, unknown>;
  /** The tool set of the agent's token; default none. */
  toolSet?: string;
}

/** Resolves once `pid` used under 2 % of a core over half a second, or after `maxMs`. */
export async function quiet(pid: number, maxMs: number): Promise<void> {
  const deadline = Date.now() + maxMs;
  let before = cpuMsOf(pid);
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    const now = cpuMsOf(pid);
    if (now - before < 10) return;
    before = now;
  }
}

/**
 * `npm start` with `NODE_ENV=production` on `config` at a free port, resolving once its output
 * matches `ready`, with the server process under it (the one measured).
 */
async function launch(
  config: string,
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ started: Started; pid: number; base: string }> {
  const port = await freePort();
  // GATEHOUSE_BENCH_PROFILE=<dir> profiles the server process (bench/cpu-profile.cjs, preloaded
  // through NODE_OPTIONS, which refuses --cpu-prof itself).
  const profileDir = process.env.GATEHOUSE_BENCH_PROFILE ?? "";
  const preload = `--require ${path.join(root, "bench", "cpu-profile.cjs")}`;
  const started = await startProcess("npm", ["start", "--silent"], {
    env: {
      NODE_ENV: "production",
      GATEHOUSE_CONFIG: config,
      GATEHOUSE_DB: path.join(path.dirname(config), "gatehouse.db"),
      HOST: "127.0.0.1",
      PORT: String(port),
      GATEHOUSE_LOG_LEVEL: "warn",
      ...(profileDir ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} ${preload}`.trim() } : {}),
      ...env,
    },
    ready,
    port,
    // The config check (tsx) and Next's start share a loaded CI machine.
    timeoutMs: 180_000,
  });
  const bundle = path.basename(serverBundle(root));
  const pid = descendantMatching(started.child.pid ?? 0, new RegExp(bundle.replaceAll(".", "\\."))) ?? 0;
  if (pid === 0) {
    await started.stop();
    throw new Error(`npm start is serving, but no ${bundle} process was found under it`);
  }
  if (profileDir) console.log(`  server pid ${pid}`);
  return { started, pid, base: `http://127.0.0.1:${port}` };
}

/** Waits until every enabled server is ready as the Gatehouse at `base` sees it (a benchmark may poll; tests may not). */
async function serversReady(base: string, owner: Record<string, string>): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const res = await request(`${base}/api/servers`, { headers: owner });
    const { servers: list } = (await res.body.json()) as { servers: { state: string; enabled: boolean }[] };
    if (list.every((s) => !s.enabled || s.state === "ready")) return;
    if (Date.now() > deadline)
      throw new Error(`servers not ready: ${JSON.stringify(list.map((s) => s.state))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Signs `who` in at `base`; the session cookie, `name=value`. */
async function signIn(base: string, who: { name: string; password: string }): Promise<string> {
  const res = await request(`${base}/api/session`, {
    method: "POST",
    headers: { origin: base, "content-type": "application/json" },
    body: JSON.stringify(who),
  });
  await res.body.text();
  if (res.statusCode !== 200) throw new Error(`sign-in of ${who.name} at ${base}: ${res.statusCode}`);
  return String([res.headers["set-cookie"]].flat()[0]).split(";")[0] ?? "";
}

/** Starts Gatehouse with `servers` (an mcpServers map), creates an owner and an agent token, enables `enable`. */
export async function startGatehouse(
  servers: Record<string, unknown>,
  enable: string[],
  opts: StartOptions = {},
): Promise<Gatehouse> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-bench-"));
  const config = path.join(dir, "gatehouse.json");
  writeFileSync(config, JSON.stringify({ mcpServers: servers, ...opts.config }));
  const env = opts.env ?? {};
  let first: Awaited<ReturnType<typeof launch>>;
  try {
    first = await launch(config, env, /\/setup\?code=(\S+)/);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const { started, pid, base } = first;
  // Whatever fails from here on must not leave the server running.
  try {
    const code = /\/setup\?code=(\S+)/.exec(started.output())?.[1] ?? "";
    const origin = { origin: base, "content-type": "application/json" };
    const setup = await request(`${base}/api/setup`, {
      method: "POST",
      headers: origin,
      body: JSON.stringify({ code, ...OWNER }),
    });
    const setCookie = setup.headers["set-cookie"];
    const cookie = String(Array.isArray(setCookie) ? setCookie[0] : setCookie).split(";")[0] ?? "";
    await setup.body.text();
    const owner = { ...origin, cookie };
    await serversReady(base, owner);
    // Enabling names the definition it pins (its definitionHash), as the tools page does.
    const listed = await request(`${base}/api/catalogue`, { headers: owner });
    const { tools: catalogue } = (await listed.body.json()) as {
      tools: { localName: string; definitionHash: string }[];
    };
    for (const name of enable) {
      const expectedHash = catalogue.find((t) => t.localName === name)?.definitionHash;
      const res = await request(`${base}/api/catalogue/${name}`, {
        method: "PATCH",
        headers: owner,
        body: JSON.stringify({ status: "enabled", expectedHash }),
      });
      if (res.statusCode !== 200)
        throw new Error(`enable ${name}: ${res.statusCode} ${await res.body.text()}`);
      await res.body.text();
    }
    // Next keeps loading its page bundles in the background after it answers; measuring
    // starts once the server has gone quiet (at most 20 s), as it would be after a minute of uptime.
    await quiet(pid, 20_000);
    const tok = await request(`${base}/api/tokens`, {
      method: "POST",
      headers: owner,
      body: JSON.stringify({ name: "bench", ...(opts.toolSet ? { toolSet: opts.toolSet } : {}) }),
    });
    const { secret: token } = (await tok.body.json()) as { secret: string };
    // The owner made the agent's token, so the owner may not approve its calls: a reviewer does.
    const added = await request(`${base}/api/users`, {
      method: "POST",
      headers: owner,
      body: JSON.stringify({ ...REVIEWER, roles: ["reviewer"] }),
    });
    await added.body.text();
    const reviewerCookie = await signIn(base, REVIEWER);
    const addReplica = async (): Promise<Gatehouse> => {
      // Another replica finds people already there, so it prints no setup link.
      const next = await launch(config, env, /Gatehouse listening on/);
      try {
        const ownerCookie = await signIn(next.base, OWNER);
        await serversReady(next.base, { origin: next.base, cookie: ownerCookie });
        await quiet(next.pid, 20_000);
        const nextReviewer = await signIn(next.base, REVIEWER);
        return handle(next, ownerCookie, nextReviewer, token, addReplica, () => next.started.stop());
      } catch (err) {
        await next.started.stop();
        throw err;
      }
    };
    return handle(first, cookie, reviewerCookie, token, addReplica, async () => {
      await started.stop();
      rmSync(dir, { recursive: true, force: true });
    });
  } catch (err) {
    await started.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** The benchmark's handle on one started Gatehouse process, signed in as its people. */
function handle(
  at: { started: Started; pid: number; base: string },
  cookie: string,
  reviewerCookie: string,
  token: string,
  addReplica: () => Promise<Gatehouse>,
  stop: () => Promise<void>,
): Gatehouse {
  const { base, pid, started } = at;
  const agent = new Agent({ connections: 64, keepAliveTimeout: 60_000 });
  const bearer = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const reviewer = { origin: base, "content-type": "application/json", cookie: reviewerCookie };
  return {
    base,
    pid,
    cookie,
    reviewerCookie,
    token,
    output: started.output,
    agent,
    async call(tool, args) {
      const res = await request(`${base}/api/calls`, {
        method: "POST",
        headers: bearer,
        body: JSON.stringify({ tool, arguments: args }),
        dispatcher: agent,
      });
      return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
    },
    async approve(id) {
      const res = await request(`${base}/api/calls/${id}/approve`, {
        method: "POST",
        headers: reviewer,
        dispatcher: agent,
      });
      await res.body.text();
      return res.statusCode;
    },
    async waitFor(id, seconds) {
      const res = await request(`${base}/api/calls/${id}?wait=${seconds}`, {
        headers: bearer,
        dispatcher: agent,
      });
      return (await res.body.json()) as Record<string, unknown>;
    },
    addReplica,
    async stop() {
      await agent.close();
      await stop();
    },
  };
}
