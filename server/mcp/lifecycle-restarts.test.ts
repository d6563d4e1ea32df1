/**
 * HTTP tool servers restarted under Gatehouse (their sessions forgotten): real servers killed and
 * started again on the same port mid-test — a fixture on the v1 SDK (test/fixtures/servers/
 * restartable-http.mjs, which logs every request it gets and whether it ran) and
 * `@modelcontextprotocol/server-everything` over streamable HTTP. Nobody presses Reconnect.
 * Shared bookkeeping is in lifecycle-fixtures.ts; waits are on supervisor events.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  everythingOverHttp,
  fixtureOverHttp,
  freePort,
  httpServerConfig,
  type RestartableServer,
  stopHttpServers,
} from "@/test/support/http-servers";
import {
  expectGatehouseError,
  FIXTURES,
  gatehouse,
  Harness,
  tempDir,
  text,
} from "@/test/support/mcp-harness";
import { listServerResources } from "../servers/inspect";
import { registerLifecycleCleanup, rejection, SLOW } from "./lifecycle-fixtures";

const RESTARTABLE = join(FIXTURES, "restartable-http.mjs");
/**
 * A killed server's reason: a refused dial, or, when a kept-alive socket to the dead process is
 * written to before its close is noticed, the close itself.
 */
const GONE = /ECONNREFUSED|ECONNRESET|other side closed/;

registerLifecycleCleanup();
afterEach(stopHttpServers);

/** The fixture's request log: one `<method> <fate>` line per JSON-RPC request, across restarts. */
function requests(log: string): string[] {
  return existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : [];
}

/** The v1-SDK fixture on a free port, started, with a Gatehouse manager connected to it. */
async function restartable(
  env: { UNKNOWN_SESSION: "404" | "400"; GET_STREAM: "on" | "off" },
  backoff?: { baseMs: number; capMs: number },
): Promise<{
  server: RestartableServer;
  harness: Harness;
  log: string;
}> {
  const log = join(tempDir(), "requests.log");
  const server = fixtureOverHttp(await freePort(), RESTARTABLE, { ...env, REQUEST_LOG: log });
  await server.start();
  const harness = new Harness(gatehouse([httpServerConfig("fx", server.url)]), backoff);
  await harness.manager.start();
  await harness.waitForState("fx", "ready");
  return { server, harness, log };
}

describe("an HTTP server on the v1 SDK restarts", () => {
  it.each([
    ["404", "Session not found"],
    ["400", "No valid session ID provided"],
  ] as const)(
    "answering the old session with %s (%s), a tools/list refresh starts a new session and the next call works, without Reconnect",
    async (status, _answer) => {
      // No event stream: nothing tells Gatehouse of the restart before its next request.
      const { server, harness, log } = await restartable({ UNKNOWN_SESSION: status, GET_STREAM: "off" });
      const fx = harness.manager.get("fx");
      expect(text(await harness.manager.callTool("fx", "echo", { text: "before" }))).toBe("echo: before");

      await server.restart();
      const from = harness.events.length;
      const seen = requests(log).length;
      await fx.refreshTools();

      // The refresh met the dead session once, then a new session was initialised and listed.
      expect(requests(log).slice(seen)).toEqual([
        "tools/list unknown-session",
        "initialize served",
        "tools/list served",
      ]);
      expect(harness.statesOf("fx", from)).toEqual(["connecting", "ready"]);
      const connecting = harness.events[from];
      expect(connecting?.history.at(-1)?.detail).toContain("no longer knows Gatehouse's session");
      expect(fx.snapshot()).toMatchObject({ state: "ready", lastError: null });
      expect(harness.tools.get("fx")?.map((t) => t.name)).toEqual(["echo", "bump"]);
      expect(text(await harness.manager.callTool("fx", "echo", { text: "after" }))).toBe("echo: after");
    },
    SLOW,
  );

  it(
    "a tools/call sent into the dead session fails saying it was not retried, and runs only when called again",
    async () => {
      const { server, harness, log } = await restartable({ UNKNOWN_SESSION: "404", GET_STREAM: "off" });
      await server.restart();
      const from = harness.events.length;

      const error = await rejection(harness.manager.callTool("fx", "bump", {}));
      const e = expectGatehouseError(error, "upstream_error");
      expect(e.message).toContain("restarted");
      expect(e.message).toContain("not retried");
      expect(e.message).toContain("whether it ran is unknown");

      // A new session is started on its own; the call is never sent again.
      await harness.waitForState("fx", "ready", from);
      expect(requests(log).filter((r) => r.startsWith("tools/call"))).toEqual(["tools/call unknown-session"]);
      expect(requests(log)).not.toContain("bump ran");

      // Called again by the caller, it runs once.
      expect(text(await harness.manager.callTool("fx", "bump", {}))).toBe("1");
      expect(requests(log).filter((r) => r === "bump ran")).toHaveLength(1);
    },
    SLOW,
  );

  it(
    "an owner's read that meets the dead session is run once more on a new session and answers",
    async () => {
      const { server, harness, log } = await restartable({ UNKNOWN_SESSION: "404", GET_STREAM: "off" });
      await server.restart();
      const seen = requests(log).length;

      const listed = await listServerResources(harness.manager.get("fx"));

      expect(listed.resources.map((r) => r.uri)).toEqual(["fixture://note"]);
      expect(requests(log).slice(seen)).toEqual([
        "resources/list unknown-session",
        "initialize served",
        "tools/list served",
        "resources/list served",
      ]);
      expect(harness.manager.get("fx").snapshot().state).toBe("ready");
    },
    SLOW,
  );

  it(
    "with an open event stream, the restart is noticed without any request and a new session started",
    async () => {
      const { server, harness, log } = await restartable({ UNKNOWN_SESSION: "404", GET_STREAM: "on" });
      const from = harness.events.length;
      await server.restart();

      // The SDK reopens the broken GET stream on the old session; the server refuses it.
      await harness.waitForState("fx", "ready", from);
      expect(harness.statesOf("fx", from)).toEqual(["connecting", "ready"]);
      expect(requests(log).filter((r) => r === "initialize served")).toHaveLength(2);
      expect(text(await harness.manager.callTool("fx", "bump", {}))).toBe("1");
    },
    SLOW,
  );

  it(
    "a refresh that cannot reach the server leaves ready: backoff with the reason, then ready again once it is back",
    async () => {
      const { server, harness } = await restartable(
        { UNKNOWN_SESSION: "404", GET_STREAM: "off" },
        { baseMs: 50, capMs: 200 },
      );
      const fx = harness.manager.get("fx");
      await server.kill();
      const from = harness.events.length;

      await fx.refreshTools();

      const { snapshot } = await harness.waitForState("fx", "backoff", from);
      expect(snapshot.lastError).toMatch(GONE);
      expect(snapshot.nextRetryAt).not.toBeNull();
      // The retries find it again on their own.
      await server.start();
      await harness.waitForState("fx", "ready", from);
    },
    SLOW,
  );

  it(
    "a call that cannot reach the server fails and the server leaves ready for backoff",
    async () => {
      const { server, harness } = await restartable({ UNKNOWN_SESSION: "404", GET_STREAM: "off" });
      await server.kill();
      const from = harness.events.length;

      const error = await rejection(harness.manager.callTool("fx", "echo", { text: "anyone?" }));

      // The agent is told what kind of failure it was; the system's words are the owner's.
      expect(expectGatehouseError(error, "upstream_error").message).toContain(
        "server fx could not be reached",
      );
      const { snapshot } = await harness.waitForState("fx", "backoff", from);
      expect(snapshot.lastError).toMatch(GONE);
    },
    SLOW,
  );
});

describe("server-everything over streamable HTTP restarts", () => {
  it(
    "Gatehouse starts a new session without Reconnect: the refresh lists its tools and echo answers",
    async () => {
      const server = everythingOverHttp(await freePort());
      await server.start();
      const harness = new Harness(gatehouse([httpServerConfig("everything", server.url)]));
      await harness.manager.start();
      await harness.waitForState("everything", "ready");
      const sup = harness.manager.get("everything");
      expect(text(await harness.manager.callTool("everything", "echo", { message: "before" }))).toBe(
        "Echo: before",
      );

      await server.restart();
      const from = harness.events.length;
      // server-everything answers the old session with 400 "No valid session ID provided", on the
      // reopened event stream or on this refresh, whichever comes first.
      await sup.refreshTools();
      const { snapshot } = await harness.waitForState("everything", "ready", from);

      expect(harness.statesOf("everything", from)).toEqual(["connecting", "ready"]);
      expect(harness.events[from]?.history.at(-1)?.detail).toContain("no longer knows Gatehouse's session");
      expect(snapshot.lastError).toBeNull();
      expect(harness.tools.get("everything")?.some((t) => t.name === "echo")).toBe(true);
      expect(text(await harness.manager.callTool("everything", "echo", { message: "after" }))).toBe(
        "Echo: after",
      );
    },
    SLOW,
  );
});
