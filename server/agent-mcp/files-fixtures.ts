import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { ProtocolError } from "@modelcontextprotocol/server";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { wrapUri } from "./links";

/** The careless file server: lists the non-hidden files of a folder, serves any `file://` URI. */
export const FILES = path.join(REPO_ROOT, "test/fixtures/servers/files.mjs");

export interface FilesFixture {
  /** The runtime of the current test. */
  readonly rt: TestRuntime;
  /** The agent token (`bot`) of the current test. */
  readonly token: string;
  /** The folder the server serves: `notes.md` (listed), `.secret` (not), `drafts/plan.md` (allowed). */
  readonly root: string;
  /** `file://` URI of a path under the served folder, as the fixture lists it. */
  fileUri(...parts: string[]): string;
  /** `uri` as an agent names it: `gatehouse://files/...`. */
  wrapped(uri: string): string;
  /** A v1 SDK client on `/mcp` with the token, closed after the test. */
  connect(): Promise<Client>;
}

/**
 * Registers, in the calling suite, a served folder for the whole file and, for each test, a
 * runtime with the files server (`resources.allow` admitting `drafts/*`) ready, its `list_count`
 * tool enabled and an agent token `bot`; clients and the runtime are stopped after each test.
 */
export function filesFixture(folderPrefix: string): FilesFixture {
  let root = "";
  let rt: TestRuntime | undefined;
  let token = "";
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(() => {
    root = mkdtempSync(path.join(tmpdir(), folderPrefix));
    writeFileSync(path.join(root, "notes.md"), "# Notes\nlisted\n");
    writeFileSync(path.join(root, ".secret"), "not listed\n");
    mkdirSync(path.join(root, "drafts"));
    writeFileSync(path.join(root, "drafts", "plan.md"), "allowed by the owner\n");
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  beforeEach(async () => {
    const started = await startTestRuntime({
      servers: {
        files: {
          command: "node",
          args: [FILES, root],
          enabled: true,
          resources: { allow: [`${pathToFileURL(path.join(root, "drafts")).href}/*`] },
        },
      },
    });
    rt = started;
    await waitForServersReady(started.runtime, ["files"]);
    await enableTool(started.runtime, "files_list_count");
    token = await createAgentToken(started.runtime, "bot");
  }, 30_000);
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await rt?.stop();
    rt = undefined;
  });

  return {
    get rt() {
      if (!rt) throw new Error("the files fixture runs only inside a test");
      return rt;
    },
    get token() {
      return token;
    },
    get root() {
      return root;
    },
    fileUri: (...parts) => pathToFileURL(path.join(root, ...parts)).href,
    wrapped: (uri) => wrapUri("files", uri),
    async connect() {
      const c = await connectMcp({ token });
      cleanups.push(() => c.close());
      return c.client;
    },
  };
}

/** A JSON-RPC error: `code`, `message` and `data` as the agent's client or the handler has them. */
export type RpcRefusal = { code: number; message: string; data?: unknown };

/**
 * The JSON-RPC error `p` must reject with: a v1 client's `McpError` (through `/mcp`), or the
 * `ProtocolError` a handler throws (a product function called directly).
 */
export async function rpcRefusal(p: Promise<unknown>): Promise<RpcRefusal> {
  try {
    await p;
  } catch (err) {
    if (err instanceof McpError || err instanceof ProtocolError) return err;
    throw err;
  }
  throw new Error("expected a JSON-RPC error");
}
