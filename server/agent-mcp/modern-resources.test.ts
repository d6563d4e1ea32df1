/**
 * Resources and prompts over `/mcp` in 2026-07-28: the same lists as a 2025 session's, reads and
 * gets through the same rules, audited under the agent's token name, and a malformed argument
 * refused by Gatehouse (audited), not by the SDK — against the careless fixture servers of
 * resources.test.ts and prompts.test.ts.
 */
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connectMcp, routeHandler } from "@/test/support/mcp";
import { connectModern, type ModernConnected, modernRequest } from "@/test/support/mcp-modern";
import {
  createAgentToken,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { type AuditRow, listAuditByActions } from "../store/audit";
import { filesFixture } from "./files-fixtures";

const PROMPTS = path.join(REPO_ROOT, "test/fixtures/servers/prompts.mjs");

const clients: ModernConnected[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
});

async function connectV2(token: string): Promise<ModernConnected> {
  const c = await connectModern({ token });
  clients.push(c);
  return c;
}

function audited(rt: TestRuntime, actions: string[]): Promise<AuditRow[]> {
  return listAuditByActions(rt.runtime.db, { actions, limit: 100 });
}

describe("resources in 2026-07-28", () => {
  const files = filesFixture("gatehouse-modern-files-");

  it("are listed as a 2025 session lists them, read through the same rules, and every read audited", async () => {
    const old = await files.connect();
    const { client } = await connectV2(files.token);
    const listed = (await client.listResources()).resources;
    expect(listed).toEqual((await old.listResources()).resources);
    expect(listed.map((r) => r.uri)).toContain(files.wrapped(files.fileUri("notes.md")));
    expect((await client.listResourceTemplates()).resourceTemplates).toEqual(
      (await old.listResourceTemplates()).resourceTemplates,
    );

    const read = await client.readResource({ uri: files.wrapped(files.fileUri("notes.md")) });
    expect(read.contents).toEqual([
      expect.objectContaining({ uri: files.wrapped(files.fileUri("notes.md")), text: "# Notes\nlisted\n" }),
    ]);
    await expect(client.readResource({ uri: files.wrapped(files.fileUri(".secret")) })).rejects.toThrow(
      /Resource not found/,
    );
    const rows = await audited(files.rt, ["resource.read", "resource.refused"]);
    expect(rows.map((r) => [r.actor, r.action])).toEqual([
      ["bot", "resource.refused"],
      ["bot", "resource.read"],
    ]);
  });
});

describe("prompts in 2026-07-28", () => {
  let rt: TestRuntime;
  let token: string;

  beforeEach(async () => {
    rt = await startTestRuntime({
      servers: { prompter: { command: "node", args: [PROMPTS], enabled: true } },
    });
    await waitForServersReady(rt.runtime, ["prompter"]);
    await enableTool(rt.runtime, "prompter_list_count");
    token = await createAgentToken(rt.runtime, "bot");
  }, 30_000);
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    await rt.stop();
  });

  it("are listed as a 2025 session lists them, and a get passes its arguments, audited with the agent's name", async () => {
    const old = await connectMcp({ token });
    try {
      const { client } = await connectV2(token);
      const { prompts } = await client.listPrompts();
      expect(prompts).toEqual((await old.client.listPrompts()).prompts);
      const res = await client.getPrompt({ name: "prompter_greet", arguments: { who: "Ada" } });
      expect(res.messages[0]).toEqual({ role: "user", content: { type: "text", text: "Hello, Ada!" } });
      expect((await audited(rt, ["prompt.get"]))[0]).toMatchObject({
        actor: "bot",
        subject: "prompter greet",
      });
    } finally {
      await old.close();
    }
  }, 30_000);

  it("a non-string argument is refused with -32602 by Gatehouse, and audited", async () => {
    const { client } = await connectV2(token);
    await client.listPrompts();
    const res = await routeHandler(
      modernRequest(
        "prompts/get",
        { name: "prompter_greet", arguments: { who: 1 } },
        { authorization: `Bearer ${token}`, "mcp-name": "prompter_greet" },
      ),
    );
    const body = (await res.json()) as { error?: { code: number; message: string } };
    expect(body.error?.code).toBe(-32602);
    expect(body.error?.message).toContain("Invalid arguments");
    expect((await audited(rt, ["prompt.refused"]))[0]).toMatchObject({
      actor: "bot",
      detail: "an argument that is not a string",
    });
  }, 30_000);
});
