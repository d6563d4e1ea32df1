import { describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import { bodyOf, createTestUser, request } from "@/test/support/runtime";
import { addNote, approve, auditRows, type ErrorBody, people, runtimes } from "./call-fixtures";

const { start } = runtimes();

describe("revoking an agent's token", () => {
  it("withdraws its pending calls, each audited, so nobody approves a call for an agent that may no longer call", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const first = await addNote(agent, "one");
    const second = await addNote(agent, "two");
    const res = await request("DELETE", "/api/tokens/agent-a", { cookie: owner.cookie });
    expect(res.status).toBe(200);
    expect(await bodyOf<{ withdrawn: number }>(res)).toMatchObject({ withdrawn: 2 });
    for (const held of [first, second]) {
      expect((await rt.runtime.broker.get(held.id))?.status).toBe("withdrawn");
      const row = (await auditRows(rt, held.id)).find((a) => a.action === "call.withdrawn");
      expect(row).toMatchObject({ actor: "olga", detail: "its token was revoked" });
    }
    const late = await approve(first.id, alice.cookie);
    expect(late.status).toBe(409);
    expect((await bodyOf<ErrorBody>(late)).error.code).toBe("already_decided");
    expect(rt.demoRuns()).toBe(0);
  });

  it("leaves other agents' pending calls alone", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const { createAgentToken } = await import("@/test/support/runtime");
    const other = await createAgentToken(rt.runtime, "agent-b");
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const theirs = await addNote(other, "keep me");
    await addNote(agent, "withdraw me");
    await request("DELETE", "/api/tokens/agent-a", { cookie: owner.cookie });
    expect((await rt.runtime.broker.get(theirs.id))?.status).toBe("pending");
  });

  it("ends the agent's /mcp sessions at once", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const mcp = await connectMcp({ token: agent });
    try {
      expect(rt.runtime.agentMcp.sessionCount("agent-a")).toBe(1);
      await request("DELETE", "/api/tokens/agent-a", { cookie: owner.cookie });
      expect(rt.runtime.agentMcp.sessionCount("agent-a")).toBe(0);
    } finally {
      await mcp.close().catch(() => undefined);
    }
  });

  it("a call being decided while its token is revoked is not born pending or running", async () => {
    const rt = await start({
      config: {
        rules: [{ name: "slow-look", tools: ["demo_*"], when: "args.text.size() > 0", decision: "review" }],
      },
    });
    await people(rt);
    // The request reads the tool and waits for the rule's worker; the owner revokes in between.
    const answer = rt.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: "demo_add_note", arguments: { text: "late" } },
    );
    await rt.runtime.broker.revokeAgent({ name: "agent-a", actor: "olga" });
    await expect(answer).rejects.toMatchObject({ code: "unauthenticated" });
    const [last] = await rt.runtime.broker.list({ limit: 1 });
    expect(last?.status).toBe("refused");
  });
});
