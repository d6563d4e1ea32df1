/**
 * A server's configured roots are what it is told when it asks: through a real runtime, two
 * copies of @modelcontextprotocol/server-everything over stdio, one with `roots` in its entry and
 * one without, and its `get-roots-list` tool (which asks the client with `roots/list` and prints
 * what it got) called through `POST /api/calls` by an agent.
 */
import path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
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

const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const everything = (over: Record<string, unknown> = {}) => ({
  command: "node",
  args: [EVERYTHING, "stdio"],
  allowTools: ["get-roots-list"],
  enabled: true,
  ...over,
});

let rt: TestRuntime;
let agent: string;

beforeAll(async () => {
  rt = await startTestRuntime({
    servers: {
      rooted: everything({
        roots: ["file:///srv/notes", { uri: "file:///srv/team%20docs/", name: "Team docs" }],
      }),
      bare: everything(),
    },
  });
  const tools = ["rooted_get-roots-list", "bare_get-roots-list"];
  const listed = () => {
    const names = new Set(
      rt.runtime.manager.list().map((s) => (s.status.state === "ready" ? s.config.name : "")),
    );
    return names.has("rooted") && names.has("bare");
  };
  await waitForEvent(rt.runtime.bus, (e) => (e.type === "server" || e.type === "catalogue") && listed(), {
    already: listed,
    timeoutMs: 20_000,
    what: () => "both server-everything copies to be ready",
  });
  for (const tool of tools) await enableTool(rt.runtime, tool);
  agent = await createAgentToken(rt.runtime, "bot");
}, 30_000);

afterAll(async () => {
  await rt?.stop();
});

/** The text `get-roots-list` answered an agent's call with. */
async function rootsAnswer(tool: string): Promise<string> {
  const res = await request("POST", "/api/calls", { bearer: agent, body: { tool, arguments: {} } });
  const call = await bodyOf<CallView>(res);
  expect(res.status, JSON.stringify(call)).toBe(200);
  expect(call.status).toBe("succeeded");
  const result = call.result as CallToolResult;
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

describe("a server's roots", () => {
  it("a server that asks for its roots is told exactly the configured ones, in order, names included", async () => {
    const text = await rootsAnswer("rooted_get-roots-list");
    // The whole list the server received: these two and nothing else.
    const list = text.slice(0, text.indexOf("\n\nNote:"));
    expect(list).toBe(
      [
        "Current MCP Roots (2 total):",
        "",
        "1. Unnamed Root",
        "   URI: file:///srv/notes",
        "",
        "2. Team docs",
        "   URI: file:///srv/team%20docs/",
      ].join("\n"),
    );
  });

  it("a server without roots in its entry is told the list is empty", async () => {
    const text = await rootsAnswer("bare_get-roots-list");
    expect(text).toMatch(/^The client supports roots but no roots are currently configured\./);
  });
});
