/**
 * JSON-RPC errors of `/mcp` carry their message once: the SDK's `McpError` starts its message
 * with `MCP error <code>: `, the SDK's `Server` sends that message on the wire, and a v1 client
 * adds the prefix again. Checked with a real v1 SDK client through the real endpoint.
 */
import path from "node:path";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { RESOURCE_NOT_FOUND, wrapUri } from "./resources";
import { answersOnce, RpcFailure, withoutPrefix } from "./rpc";

const PROMPTS = path.join(REPO_ROOT, "test/fixtures/servers/prompts.mjs");

async function failure(p: Promise<unknown>): Promise<McpError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof McpError) return err;
    throw err;
  }
  throw new Error("expected a JSON-RPC error");
}

const prefixes = (message: string) => message.match(/MCP error -?\d+:/g)?.length ?? 0;

describe("errors a v1 client sees from /mcp", () => {
  let rt: TestRuntime;
  let token: string;

  beforeAll(async () => {
    rt = await startTestRuntime({
      servers: { prompter: { command: "node", args: [PROMPTS], enabled: true } },
    });
    await waitForServersReady(rt.runtime, ["prompter"]);
    enableTool(rt.runtime, "prompter_list_count");
    token = createAgentToken(rt.runtime, "bot");
  }, 30_000);

  afterAll(() => rt.stop());

  it("a refused resource read says MCP error -32002 once", async () => {
    const c = await connectMcp({ token });
    try {
      const err = await failure(c.client.readResource({ uri: wrapUri("prompter", "file:///etc/passwd") }));
      expect(err.code).toBe(RESOURCE_NOT_FOUND);
      expect(prefixes(err.message)).toBe(1);
      expect(err.message).toMatch(/^MCP error -32002: Resource not found: /);
      expect(err.data).toEqual({ uri: wrapUri("prompter", "file:///etc/passwd") });
    } finally {
      await c.close();
    }
  }, 30_000);

  it("a refused prompt and a method Gatehouse does not serve each say their code once", async () => {
    const c = await connectMcp({ token });
    try {
      const prompt = await failure(c.client.getPrompt({ name: "prompter_secret" }));
      expect(prompt.code).toBe(ErrorCode.InvalidParams);
      expect(prefixes(prompt.message)).toBe(1);
      const unknown = await failure(
        c.client.complete({ ref: { type: "ref/prompt", name: "x" }, argument: { name: "a", value: "" } }),
      );
      expect(unknown.code).toBe(ErrorCode.MethodNotFound);
      expect(prefixes(unknown.message)).toBe(1);
    } finally {
      await c.close();
    }
  }, 30_000);
});

describe("withoutPrefix", () => {
  it("takes every leading MCP error prefix off, keeping code and data", () => {
    const out = withoutPrefix(new McpError(-32002, "MCP error -32002: gone", { uri: "x" }));
    expect(out).toBeInstanceOf(RpcFailure);
    expect(out).toMatchObject({ code: -32002, message: "gone", data: { uri: "x" } });
  });

  it("leaves errors without a code or without a prefix as they are", () => {
    const plain = new Error("MCP error -1: no code property");
    expect(withoutPrefix(plain)).toBe(plain);
    const own = new RpcFailure(-32602, "said once");
    expect(withoutPrefix(own)).toBe(own);
  });

  it("a handler's McpError is answered with its message once", async () => {
    const handler = answersOnce(() => {
      throw new McpError(ErrorCode.InvalidParams, "bad");
    });
    await expect(handler()).rejects.toMatchObject({ code: ErrorCode.InvalidParams, message: "bad" });
  });
});
