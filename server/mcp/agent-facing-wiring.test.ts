/**
 * An agent's call to a server that spills its internals (test/fixtures/servers/leaky.mjs, a real
 * stdio child), over the real REST route: the server's JSON-RPC error in its own words (its answer
 * to the agent) without Gatehouse's secrets and on one line; then, once the server restarted into
 * refusing `initialize` and backs off, only its state: the failure that put it there is for
 * owners, who still read it on the server's status.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, expect, it } from "vitest";
import {
  bodyOf,
  createAgentToken,
  enableTool,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";

const LEAKY = path.join(REPO_ROOT, "test/fixtures/servers/leaky.mjs");

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

it("an agent's call to a server that is down names the server's state, never its last error; an error answer keeps its words but not our secrets", async () => {
  const token = `tok-${randomUUID()}`;
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
  rt = await startTestRuntime({
    dir,
    servers: {
      leaky: {
        command: "node",
        args: [LEAKY],
        // Every start after the first refuses `initialize` with the spilling error.
        env: { LEAK_SHORT_KEY: "k9", LEAK_TOKEN: token, LEAK_STATE: path.join(dir, "leaky-started") },
        // A call waits this long for a server that is reconnecting; this one never comes back.
        timeoutMs: 3000,
        enabled: true,
      },
    },
  });
  const { runtime } = rt;
  const listed = () => runtime.manager.get("leaky").snapshot().state === "ready";
  await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && e.server === "leaky" && listed(), {
    already: () => listed() && runtime.manager.get("leaky").snapshot().listedTools === 2,
    timeoutMs: 15_000,
    what: () => "leaky to list its tools",
  });
  await enableTool(runtime, "leaky_leak");
  await enableTool(runtime, "leaky_crash");
  const bearer = await createAgentToken(runtime, "bot");
  const spilled = ["10.20.30.40", "ECONNREFUSED", token, "k9", "INFO [calls]"];
  const call = async (tool: string) => {
    const res = await request("POST", "/api/calls", { bearer, body: { tool, arguments: {} } });
    return JSON.stringify(await bodyOf(res));
  };

  const rpc = await call("leaky_leak");
  expect(rpc).toContain("server leaky answered with an error (JSON-RPC code -32603): connect ECONNREFUSED");
  for (const s of [token, "key=k9"]) expect(rpc, s).not.toContain(s);
  // One line: the server's newline arrives escaped, so nothing downstream reads a second line.
  const told = (JSON.parse(rpc) as { error: { message: string } }).error.message;
  expect(told).not.toContain("\n");

  await call("leaky_crash");
  const backedOff = () => {
    const s = runtime.manager.get("leaky").snapshot();
    return s.state === "backoff" && (s.lastError ?? "").includes("10.20.30.40");
  };
  await waitForEvent(runtime.bus, (e) => e.type === "server" && e.name === "leaky" && backedOff(), {
    already: backedOff,
    timeoutMs: 15_000,
    what: () => `leaky to back off (${JSON.stringify(runtime.manager.get("leaky").snapshot())})`,
  });
  const unavailable = await call("leaky_leak");
  expect(unavailable).toContain("server_unavailable");
  // Said by the state it was in when the call's wait for it ended.
  expect(unavailable).toMatch(/server leaky is (in backoff|connecting)/);
  for (const s of spilled) expect(unavailable, s).not.toContain(s);
}, 40_000);
