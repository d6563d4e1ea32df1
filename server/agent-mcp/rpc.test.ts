/**
 * JSON-RPC errors of `/mcp` carry their message once: a v1 client starts the message it shows
 * with `MCP error <code>: `, so the wire message must not carry one already (a tool server on
 * the v1 SDK writes its own errors so). Checked with a real v1 SDK client through the real
 * endpoint; on the 2025 leg a refused read keeps the 2025 revision's code, -32002.
 */
import path from "node:path";
import { ProtocolError as ClientProtocolError } from "@modelcontextprotocol/client";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { ProtocolError, ProtocolErrorCode } from "@modelcontextprotocol/server";
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
import { wrapUri } from "./links";
import { RESOURCE_NOT_FOUND } from "./resources";
import { answersOnce, rpcFailure, withoutPrefix } from "./rpc";
import { asLegacyNotFound } from "./sessions";

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
    await enableTool(rt.runtime, "prompter_list_count");
    token = await createAgentToken(rt.runtime, "bot");
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
  it("takes every leading MCP error prefix off an upstream error, keeping code and data", () => {
    // As the SDK v2 client rejects with a v1 tool server's error: its wire message, prefix and all.
    const upstream = new ClientProtocolError(-32002, "MCP error -32002: MCP error -32002: gone", {
      uri: "x",
    });
    const out = withoutPrefix(upstream);
    expect(out).toBeInstanceOf(ProtocolError);
    expect(out).toMatchObject({ code: -32002, message: "gone", data: { uri: "x" } });
  });

  it("leaves errors without a code or without a prefix as they are", () => {
    const plain = new Error("MCP error -1: no code property");
    expect(withoutPrefix(plain)).toBe(plain);
    const own = rpcFailure(-32602, "said once");
    expect(withoutPrefix(own)).toBe(own);
  });

  it("a handler's error is answered with its message once", async () => {
    const handler = answersOnce(() => {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, "MCP error -32602: bad");
    });
    await expect(handler()).rejects.toMatchObject({ code: ProtocolErrorCode.InvalidParams, message: "bad" });
  });
});

describe("a 2025 session's resource not found", () => {
  const notFound = (code: number, data: unknown) => ({
    jsonrpc: "2.0" as const,
    id: 7,
    error: { code, message: "Resource not found", data },
  });

  it("goes out as -32002, the 2025 revision's code, where SDK v2 wrote -32602", () => {
    expect(asLegacyNotFound(notFound(-32602, { uri: "gatehouse://a/b" }))).toEqual(
      notFound(RESOURCE_NOT_FOUND, { uri: "gatehouse://a/b" }),
    );
  });

  it("leaves every other error and every result as the SDK wrote it", () => {
    for (const message of [
      notFound(-32602, { uri: "gatehouse://a/b", reason: "other" }),
      notFound(-32602, undefined),
      notFound(-32602, { uri: 3 }),
      notFound(-32603, { uri: "gatehouse://a/b" }),
      { jsonrpc: "2.0" as const, id: 7, result: { data: { uri: "x" } } },
    ]) {
      expect(asLegacyNotFound(message)).toBe(message);
    }
  });
});
