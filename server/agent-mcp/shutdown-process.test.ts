/**
 * A held call when a real Gatehouse process is stopped with SIGTERM (test/fixtures/mcp-host.ts:
 * `boot()` and the front door of server/main.ts over real HTTP), asked by the SDK v1 client
 * (@modelcontextprotocol/sdk) on a 2025 session, as mcp-remote, LangChain and AI SDK ask it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "@/test/support/http-servers";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  DEMO_SERVER,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import { CALL_META_KEY } from "./tools";

const MCP_HOST = path.join(REPO_ROOT, "test", "fixtures", "mcp-host.ts");
/** A host start (tsx, a runtime, the demo server) and an in-process one, on 2 shared cores. */
const SLOW_TEST = 60_000;

const children: ChildProcess[] = [];
const dirs: string[] = [];
let rt: TestRuntime | undefined;

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await gone;
    }
  }
  await rt?.stop();
  rt = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A store with the demo server's `add_note` enabled and an agent token, and its config file. */
async function prepareStore(): Promise<{ dir: string; token: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-shutdown-"));
  dirs.push(dir);
  const demo = {
    command: "node",
    args: [DEMO_SERVER],
    env: { DEMO_STATE_FILE: path.join(dir, "demo-state.json") },
  };
  writeFileSync(
    path.join(dir, "gatehouse.json"),
    JSON.stringify({ mcpServers: { demo: { ...demo, enabled: true } }, approvals: { waitSeconds: 60 } }),
  );
  const prep = await startTestRuntime({ dir });
  await enableTool(prep.runtime, ADD_NOTE);
  const token = await createAgentToken(prep.runtime, "bot");
  await prep.stop({ keepDir: true });
  return { dir, token };
}

/** The host on `dir`'s store; resolves once it listens on `port`. */
async function startHost(
  dir: string,
  port: number,
): Promise<{ child: ChildProcess; exited: Promise<number | null> }> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? dir,
    TMPDIR: tmpdir(),
    GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json"),
    GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
    GATEHOUSE_LOG_LEVEL: "warn",
    HOST: "127.0.0.1",
    PORT: String(port),
  };
  const child = spawn(process.execPath, ["--conditions=react-server", "--import", "tsx", MCP_HOST], {
    cwd: REPO_ROOT,
    env: env as NodeJS.ProcessEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      if (line.startsWith("LISTENING ")) resolve();
    });
    void exited.then((code) => reject(new Error(`host exited (${code}) before listening:\n${stderr}`)));
  });
  return { child, exited };
}

describe("a held call when Gatehouse stops", () => {
  it(
    "a call held on a 2025 session gets its answer before the stream closes on SIGTERM: its id, still pending, and where to follow it",
    async () => {
      const { dir, token } = await prepareStore();
      const port = await freePort();
      const host = await startHost(dir, port);
      const client = new Client({ name: "sdk-v1-agent", version: "1.0.0" }, { capabilities: {} });
      const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      });
      await client.connect(transport);

      // Gatehouse's first progress notification comes as the call is held for a reviewer.
      let onHeld: () => void = () => undefined;
      const heldNow = new Promise<void>((resolve) => {
        onHeld = resolve;
      });
      const asked = Date.now();
      const answer = client.callTool(
        { name: ADD_NOTE, arguments: { text: "asked before the stop" } },
        CallToolResultSchema,
        { onprogress: () => onHeld(), timeout: 30_000 },
      );
      await heldNow;
      host.child.kill("SIGTERM");

      const result = (await answer) as CallToolResult;
      const waited = (Date.now() - asked) / 1000;
      expect(result.isError).toBe(true);
      const call = result._meta?.[CALL_META_KEY] as { id: string; status: string };
      expect(call.status).toBe("pending");
      const text = result.content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
      expect(text).toContain(`Call ${call.id} is still waiting`);
      expect(text).toContain(`GET http://127.0.0.1:${port}/api/calls/${call.id}?wait=60`);
      // The time it was held, not the 59 s it might have been.
      expect(Number(/ after (\d+) s\./.exec(text)?.[1])).toBeLessThanOrEqual(Math.ceil(waited));
      expect(await host.exited).toBe(0);
      await client.close();

      // Nothing was decided or withdrawn: the call waits for the next Gatehouse.
      rt = await startTestRuntime({ dir });
      expect(await callStatus(rt.runtime, call.id)).toBe("pending");
    },
    SLOW_TEST,
  );
});
