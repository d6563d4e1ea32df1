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
  stop(): Promise<void>;
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

/** Starts Gatehouse with `servers` (an mcpServers map), creates an owner and an agent token, enables `enable`. */
export async function startGatehouse(servers: Record<string, unknown>, enable: string[]): Promise<Gatehouse> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-bench-"));
  const config = path.join(dir, "gatehouse.json");
  writeFileSync(config, JSON.stringify({ mcpServers: servers }));
  const port = await freePort();
  let started: Started;
  let pid = 0;
  try {
    // GATEHOUSE_BENCH_PROFILE=<dir> profiles the server process (bench/cpu-profile.cjs, preloaded
    // through NODE_OPTIONS, which refuses --cpu-prof itself).
    const profileDir = process.env.GATEHOUSE_BENCH_PROFILE ?? "";
    const preload = `--require ${path.join(root, "bench", "cpu-profile.cjs")}`;
    started = await startProcess("npm", ["start", "--silent"], {
      env: {
        NODE_ENV: "production",
        GATEHOUSE_CONFIG: config,
        GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
        HOST: "127.0.0.1",
        PORT: String(port),
        GATEHOUSE_LOG_LEVEL: "warn",
        ...(profileDir ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} ${preload}`.trim() } : {}),
      },
      ready: /\/setup\?code=(\S+)/,
      port,
      // The config check (tsx) and Next's start share a loaded CI machine.
      timeoutMs: 180_000,
    });
    const bundle = path.basename(serverBundle(root));
    pid = descendantMatching(started.child.pid ?? 0, new RegExp(bundle.replaceAll(".", "\\."))) ?? 0;
    if (pid === 0) {
      await started.stop();
      throw new Error(`npm start is serving, but no ${bundle} process was found under it`);
    }
    if (profileDir) console.log(`  server pid ${pid}`);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  // Whatever fails from here on must not leave the server running.
  try {
    const base = `http://127.0.0.1:${port}`;
    const code = /\/setup\?code=(\S+)/.exec(started.output())?.[1] ?? "";
    const agent = new Agent({ connections: 64, keepAliveTimeout: 60_000 });
    const origin = { origin: base, "content-type": "application/json" };
    const setup = await request(`${base}/api/setup`, {
      method: "POST",
      headers: origin,
      body: JSON.stringify({ code, name: "bench-owner", password: "bench-owner-password" }),
    });
    const setCookie = setup.headers["set-cookie"];
    const cookie = String(Array.isArray(setCookie) ? setCookie[0] : setCookie).split(";")[0] ?? "";
    await setup.body.text();
    const owner = { ...origin, cookie };

    // Wait until every enabled server is ready (a benchmark may poll; tests may not).
    const deadline = Date.now() + 120_000;
    for (;;) {
      const res = await request(`${base}/api/servers`, { headers: owner });
      const { servers: list } = (await res.body.json()) as { servers: { state: string; enabled: boolean }[] };
      if (list.every((s) => !s.enabled || s.state === "ready")) break;
      if (Date.now() > deadline)
        throw new Error(`servers not ready: ${JSON.stringify(list.map((s) => s.state))}`);
      await new Promise((r) => setTimeout(r, 100));
    }
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
      body: '{"name":"bench"}',
    });
    const { secret: token } = (await tok.body.json()) as { secret: string };
    const bearer = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    // The owner made the agent's token, so the owner may not approve its calls: a reviewer does.
    const added = await request(`${base}/api/users`, {
      method: "POST",
      headers: owner,
      body: JSON.stringify({
        name: "bench-reviewer",
        password: "bench-reviewer-password",
        roles: ["reviewer"],
      }),
    });
    await added.body.text();
    const signIn = await request(`${base}/api/session`, {
      method: "POST",
      headers: origin,
      body: JSON.stringify({ name: "bench-reviewer", password: "bench-reviewer-password" }),
    });
    const reviewerCookie = String([signIn.headers["set-cookie"]].flat()[0]).split(";")[0] ?? "";
    await signIn.body.text();
    const reviewer = { ...origin, cookie: reviewerCookie };

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
      async stop() {
        await agent.close();
        await started.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await started.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
