/**
 * Tool sets end to end: tokens in different sets see different `/api/tools` and `/mcp` lists (the
 * SDK client), a call outside the set is refused `403 tool_not_in_set` with nothing sent and an
 * audit row, resources and prompts follow the set, and an owner's move of a token (audited)
 * judges its next request, on a session already open. Real parts: the demo server and
 * server-everything over stdio, the route modules, the store of the project under test.
 */
import path from "node:path";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentToolView, TokenView } from "@/lib/api-types";
import { connectMcp } from "@/test/support/mcp";
import { connectModern } from "@/test/support/mcp-modern";
import {
  ADD_NOTE,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { createToken, revokeToken, setTokenToolSet } from "../auth/tokens";
import { auditEvents, calls } from "../store/schema";

const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const ECHO = "everything_echo";

const toolSets = {
  reader: { tools: ["demo_list_*"] },
  writer: { tools: ["demo_add_note", "demo_list_notes"] },
  everything: { tools: ["everything_*"] },
};

let rt: TestRuntime | undefined;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt?.stop();
  rt = undefined;
});

async function start(opts: { everything?: boolean; rules?: unknown[] } = {}): Promise<TestRuntime> {
  const t = await startTestRuntime({
    config: { toolSets, ...(opts.rules ? { rules: opts.rules } : {}) },
    ...(opts.everything
      ? { servers: { everything: { command: "node", args: [EVERYTHING, "stdio"], enabled: true } } }
      : {}),
  });
  rt = t;
  if (opts.everything) {
    await waitForServersReady(t.runtime, ["everything"], 30_000);
    await enableTool(t.runtime, ECHO);
  }
  await enableTool(t.runtime, LIST_NOTES);
  await enableTool(t.runtime, ADD_NOTE);
  return t;
}

async function connect(token: string) {
  const c = await connectMcp({ token });
  cleanups.push(() => c.close());
  return c.client;
}

async function restTools(bearer: string): Promise<string[]> {
  const res = await request("GET", "/api/tools", { bearer });
  expect(res.status).toBe(200);
  return ((await res.json()) as { tools: AgentToolView[] }).tools.map((t) => t.name).sort();
}

describe("tool sets", () => {
  it("two tokens with different sets see different /api/tools and /mcp lists; no set and an owner see all", async () => {
    const t = await start();
    const reader = await createAgentToken(t.runtime, "reader-bot", { toolSet: "reader" });
    const writer = await createAgentToken(t.runtime, "writer-bot", { toolSet: "writer" });
    const free = await createAgentToken(t.runtime, "free-bot");
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);

    expect(await restTools(reader)).toEqual([LIST_NOTES]);
    expect(await restTools(writer)).toEqual([ADD_NOTE, LIST_NOTES].sort());
    expect(await restTools(free)).toEqual([ADD_NOTE, LIST_NOTES].sort());
    const asOwner = await request("GET", "/api/tools", { cookie: owner.cookie });
    expect(((await asOwner.json()) as { tools: AgentToolView[] }).tools).toHaveLength(2);

    const listed = async (token: string) =>
      (await (await connect(token)).listTools()).tools.map((x) => x.name).sort();
    expect(await listed(reader)).toEqual([LIST_NOTES]);
    expect(await listed(writer)).toEqual([ADD_NOTE, LIST_NOTES].sort());

    // A 2026-07-28 client (SDK v2, no session): the same bound, and the same refusal.
    const modern = await connectModern({ token: reader });
    cleanups.push(() => modern.close());
    expect((await modern.client.listTools()).tools.map((x) => x.name)).toEqual([LIST_NOTES]);
    const refused = await modern.client.callTool({ name: ADD_NOTE, arguments: { text: "no" } });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain("tool_not_in_set");
  });

  it("a call outside the set is refused 403 tool_not_in_set, audited, and nothing is sent", async () => {
    const t = await start();
    const reader = await createAgentToken(t.runtime, "reader-bot", { toolSet: "reader" });
    const before = t.demoRuns();

    const res = await request("POST", "/api/calls", {
      bearer: reader,
      body: { tool: ADD_NOTE, arguments: { text: "not mine to write" } },
    });
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("tool_not_in_set");
    expect(body.error.message).toBe(`"${ADD_NOTE}" is not in tool set "reader" of this token`);
    // A name that exists nowhere gets the same answer: nothing tells what lies outside the set.
    const unknown = await request("POST", "/api/calls", {
      bearer: reader,
      body: { tool: "demo_secret_thing" },
    });
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("tool_not_in_set");

    const refused = await t.runtime.db
      .select()
      .from(calls)
      .where(and(eq(calls.requesterName, "reader-bot"), eq(calls.status, "refused")));
    expect(refused.map((c) => c.errorCode)).toEqual(["tool_not_in_set", "tool_not_in_set"]);
    const audited = await t.runtime.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "call.refused"), eq(auditEvents.actor, "reader-bot")));
    expect(audited).toHaveLength(2);

    // Over /mcp: the same refusal as an error result; the tool in the set still runs.
    const client = await connect(reader);
    const outside = await client.callTool({ name: ADD_NOTE, arguments: { text: "no" } });
    expect(outside.isError).toBe(true);
    expect(JSON.stringify(outside.content)).toContain(`not in tool set \\"reader\\"`);
    const inside = await client.callTool({ name: LIST_NOTES, arguments: {} });
    expect(inside.isError).toBeFalsy();
    expect(t.demoRuns()).toBe(before);
  });

  it("resources and prompts of a server reach a token only when its set holds one of that server's tools", async () => {
    const t = await start({ everything: true });
    const notes = await connect(await createAgentToken(t.runtime, "notes-bot", { toolSet: "reader" }));
    const every = await connect(await createAgentToken(t.runtime, "every-bot", { toolSet: "everything" }));

    expect((await every.listResources()).resources.length).toBeGreaterThan(0);
    expect((await every.listPrompts()).prompts.length).toBeGreaterThan(0);
    expect((await notes.listResources()).resources).toEqual([]);
    expect((await notes.listPrompts()).prompts).toEqual([]);
    expect((await notes.listResourceTemplates()).resourceTemplates).toEqual([]);
    const [prompt] = (await every.listPrompts()).prompts;
    await expect(notes.getPrompt({ name: prompt?.name ?? "", arguments: {} })).rejects.toThrow();
  }, 60_000);

  it("an owner's move of a token is audited and judges its next request, on the session it has open", async () => {
    const t = await start();
    const secret = await createAgentToken(t.runtime, "mover-bot", { toolSet: "reader" });
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const client = await connect(secret);
    expect((await client.listTools()).tools.map((x) => x.name)).toEqual([LIST_NOTES]);

    const res = await request("PATCH", "/api/tokens/mover-bot", {
      cookie: owner.cookie,
      body: { toolSet: "writer" },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { token: TokenView }).token.toolSet).toBe("writer");

    expect((await client.listTools()).tools.map((x) => x.name).sort()).toEqual([ADD_NOTE, LIST_NOTES].sort());
    expect(await restTools(secret)).toEqual([ADD_NOTE, LIST_NOTES].sort());
    const [moved] = await t.runtime.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "token.tool_set"), eq(auditEvents.subject, "mover-bot")));
    expect(moved?.actor).toBe("olga");
    expect(moved?.detail).toBe('"reader" → "writer"');

    // Out of every set: all enabled tools again; moving it where it is records nothing more.
    await request("PATCH", "/api/tokens/mover-bot", { cookie: owner.cookie, body: { toolSet: null } });
    await request("PATCH", "/api/tokens/mover-bot", { cookie: owner.cookie, body: { toolSet: null } });
    const rows = await t.runtime.db
      .select()
      .from(auditEvents)
      .where(eq(auditEvents.action, "token.tool_set"));
    expect(rows.map((r) => r.detail)).toEqual(['"reader" → "writer"', '"writer" → no tool set']);
  });

  it("a move reaches the token's open /mcp session as list_changed; another token's session hears nothing of it", async () => {
    const t = await start();
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const heard = (client: Awaited<ReturnType<typeof connect>>) => {
      const times: number[] = [];
      let waiting: (() => void) | null = null;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        times.push(Date.now());
        waiting?.();
      });
      return {
        count: () => times.length,
        next: () =>
          new Promise<void>((resolve) => {
            waiting = resolve;
          }),
      };
    };
    const moved = await connect(await createAgentToken(t.runtime, "mover-bot", { toolSet: "reader" }));
    const other = await connect(await createAgentToken(t.runtime, "other-bot", { toolSet: "reader" }));
    const movedHeard = heard(moved);
    const otherHeard = heard(other);
    // Both sessions have listed once, so each has its stream open; what the start's catalogue
    // changes tell them (a replica taking the demo server over starts it again) is told by now.
    await moved.listTools();
    await other.listTools();
    await t.runtime.agentMcp.listsSettled();
    const otherBefore = otherHeard.count();

    const told = movedHeard.next();
    const res = await request("PATCH", "/api/tokens/mover-bot", {
      cookie: owner.cookie,
      body: { toolSet: "writer" },
    });
    expect(res.status).toBe(200);
    await told;
    expect((await moved.listTools()).tools.map((x) => x.name).sort()).toEqual([ADD_NOTE, LIST_NOTES].sort());

    // A change every session hears comes after, on the same stream: had the other session been
    // told of the move, it would have heard twice by then.
    const both = otherHeard.next();
    await request("PATCH", `/api/catalogue/${LIST_NOTES}`, {
      cookie: owner.cookie,
      body: { status: "disabled" },
    });
    await both;
    expect(otherHeard.count()).toBe(otherBefore + 1);
    expect(movedHeard.count()).toBeGreaterThanOrEqual(1);
  });

  it("a rule's condition sees the agent's tool set as agent.set (\"\" without one)", async () => {
    const t = await start({
      rules: [
        {
          name: "no-writer-notes",
          tools: [ADD_NOTE],
          when: "agent.set == 'writer' && agent != ''",
          decision: "deny",
          reason: "the writer set drafts only",
        },
      ],
    });
    const writer = await createAgentToken(t.runtime, "writer-bot", { toolSet: "writer" });
    const free = await createAgentToken(t.runtime, "free-bot");
    const denied = await request("POST", "/api/calls", {
      bearer: writer,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { error: { code: string } }).error.code).toBe("denied_by_rule");
    const held = await request("POST", "/api/calls", {
      bearer: free,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    expect(held.status).toBe(202);
  });

  it("a set the configuration does not have is refused, at creation and at a move; a revoked token cannot move", async () => {
    const t = await start();
    const knownSets = t.runtime.toolSets.names();
    await expect(
      createToken(t.runtime.db, { name: "typo-bot", actor: "test", toolSet: "readers", knownSets }),
    ).rejects.toMatchObject({ code: "bad_request", message: expect.stringMatching(/no tool set "readers"/) });
    expect(await t.runtime.db.select().from(auditEvents).where(eq(auditEvents.subject, "typo-bot"))).toEqual(
      [],
    );

    await createAgentToken(t.runtime, "old-bot");
    await revokeToken(t.runtime.db, { name: "old-bot", actor: "test" });
    await expect(
      setTokenToolSet(t.runtime.db, { name: "old-bot", toolSet: "reader", actor: "test", knownSets }),
    ).rejects.toMatchObject({ code: "conflict" });
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const res = await request("PATCH", "/api/tokens/nobody", {
      cookie: owner.cookie,
      body: { toolSet: "reader" },
    });
    expect(res.status).toBe(404);
  });

  it("a token whose set left the configuration sees no tool and may call none", async () => {
    const t = await start();
    // As if the set had been renamed in the file since: the row names a set no longer there.
    const secret = await createAgentToken(t.runtime, "orphan-bot", { toolSet: "reader" });
    await setTokenToolSet(t.runtime.db, {
      name: "orphan-bot",
      toolSet: "renamed",
      actor: "test",
      knownSets: ["renamed"],
    });
    expect(await restTools(secret)).toEqual([]);
    const res = await request("POST", "/api/calls", { bearer: secret, body: { tool: LIST_NOTES } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /tool set "renamed" is not in the configuration/,
    );
  });
});
