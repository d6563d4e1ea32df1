/**
 * What a 2026-07-28 tool server on SDK v2 answers reaches agents of both eras as each can take
 * it (test/fixtures/servers/v2-notes.mjs). Its "not found" for a resource an agent may read (an
 * expansion of its template) is -32602 with `data: {uri}` where a 2025 server says -32002, and
 * either way the agent hears "Resource not found" in its own era's code, never an internal error
 * carrying the server's words. Its non-object `structuredContent` reaches a 2025 agent wrapped.
 */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import { connectModern } from "@/test/support/mcp-modern";
import {
  createAgentToken,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { type AuditRow, listAuditByActions } from "../store/audit";
import { rpcRefusal } from "./files-fixtures";

const NOTES = path.join(REPO_ROOT, "test/fixtures/servers/v2-notes.mjs");
const MISSING = "gatehouse://notes/-/note://notes/missing";

let rt: TestRuntime;
let token: string;

beforeAll(async () => {
  rt = await startTestRuntime({ servers: { notes: { command: "node", args: [NOTES], enabled: true } } });
  await waitForServersReady(rt.runtime, ["notes"]);
  await enableTool(rt.runtime, "notes_noop");
  await enableTool(rt.runtime, "notes_numbers");
  token = await createAgentToken(rt.runtime, "bot");
}, 30_000);

afterAll(async () => {
  await rt?.stop();
});

function reads(): Promise<AuditRow[]> {
  return listAuditByActions(rt.runtime.db, { actions: ["resource.read"], limit: 100 });
}

describe("a resource its server does not have", () => {
  it("is -32002 Resource not found to a 2025 client when a 2026-07-28 server answers -32602 {uri}", async () => {
    const c = await connectMcp({ token });
    try {
      // The server's listed note is there, so the server is reachable and the template allowed.
      const { resourceTemplates } = await c.client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual([
        "gatehouse://notes/-/note://notes/{name}",
      ]);
      const err = await rpcRefusal(c.client.readResource({ uri: MISSING }));
      expect(err.code).toBe(-32002);
      expect(err.message).toBe("MCP error -32002: Resource not found");
      expect(err.data).toEqual({ uri: MISSING });
    } finally {
      await c.close();
    }
    // The read is recorded as the server's failure, in its words.
    expect((await reads())[0]?.detail).toMatch(/failed: .*Resource not found: note:\/\/notes\/missing/);
  }, 30_000);

  it("a tool server's -32602 with more than {uri} is an internal error, not not-found", async () => {
    const bad = "gatehouse://notes/-/note://notes/BAD";
    const c = await connectMcp({ token });
    try {
      const err = await rpcRefusal(c.client.readResource({ uri: bad }));
      expect(err.code).toBe(-32603);
      expect(err.message).toMatch(/note names are lower-case/);
    } finally {
      await c.close();
    }
    const m = await connectModern({ token });
    try {
      const err = await rpcRefusal(m.client.readResource({ uri: bad }));
      expect(err.code).toBe(-32603);
      expect(err.message).not.toMatch(/Resource not found/);
    } finally {
      await m.close();
    }
  }, 30_000);

  it("is -32602 Resource not found {uri} to a 2026-07-28 client", async () => {
    const c = await connectModern({ token });
    try {
      const err = await rpcRefusal(c.client.readResource({ uri: MISSING }));
      expect(err.code).toBe(-32602);
      expect(err.message).toMatch(/^Resource not found/);
      expect(err.data).toEqual({ uri: MISSING });
    } finally {
      await c.close();
    }
  }, 30_000);
});

describe("a non-object structuredContent", () => {
  it("reaches a 2025 client wrapped as {result} with its text, instead of failing a call that ran", async () => {
    const c = await connectMcp({ token });
    try {
      const res = await c.client.callTool({ name: "notes_numbers", arguments: {} });
      expect(res.structuredContent).toEqual({ result: [1, 2, 3] });
      expect(res.content).toEqual([{ type: "text", text: "[1,2,3]" }]);
    } finally {
      await c.close();
    }
  }, 30_000);

  it("reaches a 2026-07-28 client as it is, with its text", async () => {
    const c = await connectModern({ token });
    try {
      const res = await c.client.callTool({ name: "notes_numbers", arguments: {} });
      expect(res.structuredContent).toEqual([1, 2, 3]);
      expect(res.content).toEqual([{ type: "text", text: "[1,2,3]" }]);
    } finally {
      await c.close();
    }
  }, 30_000);
});
