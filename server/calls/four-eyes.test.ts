import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { ADD_NOTE, bodyOf, createTestUser, request, waitForCallStatus } from "@/test/support/runtime";
import { createToken } from "../auth/tokens";
import { ownAgentTokens } from "./approve";
import {
  addNote,
  approve,
  auditRows,
  callRow,
  deny,
  type ErrorBody,
  people,
  runtimes,
} from "./call-fixtures";

const { start } = runtimes();

const pairs = {
  rules: [
    { name: "pairs", tools: [ADD_NOTE], decision: "review", approvals: 2, reason: "two people check notes" },
  ],
};

describe("four eyes: a rule asking for two approvals", () => {
  it("pending after one approval ('1 of 2'), runs once after the second distinct reviewer", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice, bob } = await people(rt);
    const held = await addNote(agent, "pair");
    expect(held).toMatchObject({ approvalsNeeded: 2, approvedBy: [], rule: "pairs" });
    expect(held.approvalReason).toBe("two people check notes");

    const first = await approve(held.id, alice.cookie);
    expect(first.status).toBe(200);
    const afterOne = (await bodyOf<{ call: CallView }>(first)).call;
    expect(afterOne).toMatchObject({ status: "pending", approvedBy: ["alice"] });
    expect(rt.demoRuns()).toBe(0);

    const second = await approve(held.id, bob.cookie);
    expect(second.status).toBe(200);
    expect((await bodyOf<{ call: CallView }>(second)).call).toMatchObject({
      status: "running",
      approvedBy: ["alice", "bob"],
    });
    await waitForCallStatus(rt.runtime, held.id, "succeeded", 10_000);
    expect(rt.demoRuns()).toBe(1);
    const audit = (await auditRows(rt, held.id)).map((a) => [a.action, a.actor, a.detail]);
    expect(audit).toContainEqual(["call.approval", "alice", "1 of 2 approvals"]);
    expect(audit).toContainEqual(["call.approved", "bob", "2 of 2 approvals"]);
  });

  it("the same reviewer approving twice is refused and counts once", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice } = await people(rt);
    const held = await addNote(agent, "once");
    expect((await approve(held.id, alice.cookie)).status).toBe(200);
    const again = await approve(held.id, alice.cookie);
    expect(again.status).toBe(409);
    expect((await bodyOf<ErrorBody>(again)).error.code).toBe("already_approved");
    expect(await callRow(rt, held.id)).toMatchObject({
      status: "pending",
      approvedBy: JSON.stringify(["alice"]),
    });
  });

  it("two reviewers approving at the same moment run the call exactly once", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice, bob } = await people(rt);
    const held = await addNote(agent, "race");
    const answers = await Promise.all([approve(held.id, alice.cookie), approve(held.id, bob.cookie)]);
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    const statuses = await Promise.all(
      answers.map(async (r) => (await bodyOf<{ call: CallView }>(r)).call.status),
    );
    expect(statuses.sort()).toEqual(["pending", "running"]);
    await waitForCallStatus(rt.runtime, held.id, "succeeded", 10_000);
    expect(rt.demoRuns()).toBe(1);
    expect((await auditRows(rt, held.id)).filter((a) => a.action === "call.approved")).toHaveLength(1);
  });

  it("three reviewers racing on the last approval: one moves it, the third is told it is decided", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice, bob } = await people(rt);
    const carol = await createTestUser(rt.runtime, "carol", ["reviewer"]);
    const held = await addNote(agent, "three");
    await approve(held.id, alice.cookie);
    const [b, c] = await Promise.all([approve(held.id, bob.cookie), approve(held.id, carol.cookie)]);
    expect([b.status, c.status].sort()).toEqual([200, 409]);
    await waitForCallStatus(rt.runtime, held.id, "succeeded", 10_000);
    expect(rt.demoRuns()).toBe(1);
  });

  it("any denial is final, also after the first approval", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice, bob } = await people(rt);
    const held = await addNote(agent, "deny");
    await approve(held.id, alice.cookie);
    expect((await deny(held.id, bob.cookie, "not today")).status).toBe(200);
    const late = await approve(held.id, bob.cookie);
    expect(late.status).toBe(409);
    expect((await rt.runtime.broker.get(held.id))?.status).toBe("denied");
    expect(rt.demoRuns()).toBe(0);
  });

  it("such a call cannot be granted", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice } = await people(rt);
    const held = await addNote(agent, "grant me");
    const res = await request("POST", `/api/calls/${held.id}/approve`, {
      cookie: alice.cookie,
      body: { grant: { scope: "tool", minutes: 60 } },
    });
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("grant_not_allowed");
    expect(await callRow(rt, held.id)).toMatchObject({ status: "pending", approvedBy: "[]" });
  });

  it("the requester never approves it, even with selfApproval on", async () => {
    const rt = await start({ config: pairs, approvals: { selfApproval: true } });
    await people(rt);
    const owner = await createTestUser(rt.runtime, "olga", ["owner", "reviewer"]);
    const res = await request("POST", "/api/calls", {
      cookie: owner.cookie,
      body: { tool: ADD_NOTE, arguments: { text: "mine" } },
    });
    expect(res.status).toBe(202);
    const held = await bodyOf<CallView>(res);
    const self = await approve(held.id, owner.cookie);
    expect(self.status).toBe(403);
    expect((await bodyOf<ErrorBody>(self)).error.code).toBe("self_approval");
  });

  it("the requester never approves a call a rule held for one review, even with selfApproval on", async () => {
    const rt = await start({
      config: { rules: [{ name: "check", tools: [ADD_NOTE], decision: "review" }] },
      approvals: { selfApproval: true },
    });
    await people(rt);
    const owner = await createTestUser(rt.runtime, "olga", ["owner", "reviewer"]);
    const res = await request("POST", "/api/calls", {
      cookie: owner.cookie,
      body: { tool: ADD_NOTE, arguments: { text: "mine" } },
    });
    const held = await bodyOf<CallView>(res);
    expect(held.rule).toBe("check");
    const self = await approve(held.id, owner.cookie);
    expect(self.status).toBe(403);
    expect((await bodyOf<ErrorBody>(self)).error.message).toContain('rule "check" held it');
  });

  it("a person's own call is approved without a grant: grants are for agents", async () => {
    const rt = await start({ approvals: { selfApproval: true } });
    const { alice } = await people(rt);
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/calls", {
      cookie: owner.cookie,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    const held = await bodyOf<CallView>(res);
    const granted = await request("POST", `/api/calls/${held.id}/approve`, {
      cookie: alice.cookie,
      body: { grant: { scope: "tool", minutes: 15 } },
    });
    expect(granted.status).toBe(409);
    expect((await bodyOf<ErrorBody>(granted)).error.code).toBe("grant_not_allowed");
    expect((await rt.runtime.broker.get(held.id))?.status).toBe("pending");
  });

  it("self-approval means the person: an owner does not approve what the agent whose token they made asked for", async () => {
    const rt = await start();
    const { alice } = await people(rt);
    const olga = await createTestUser(rt.runtime, "olga", ["owner", "reviewer"]);
    const { secret } = await createToken(rt.runtime.db, { name: "olgas-bot", actor: "olga" });
    const held = await addNote(secret, "from olga's agent");
    const self = await approve(held.id, olga.cookie);
    expect(self.status).toBe(403);
    expect((await bodyOf<ErrorBody>(self)).error.message).toBe(
      "This call came from agent olgas-bot, whose token you created; another reviewer has to approve it.",
    );
    expect((await approve(held.id, alice.cookie)).status).toBe(200);
  });

  it("the pages' list of a person's own agent tokens is the one the approval rule uses, a person named cli included", async () => {
    const rt = await start();
    await people(rt);
    const olga = await createTestUser(rt.runtime, "olga", ["owner", "reviewer"]);
    const cli = await createTestUser(rt.runtime, "cli", ["reviewer"]);
    const olgas = await createToken(rt.runtime.db, { name: "olgas-bot", actor: "olga" });
    const { secret } = await createToken(rt.runtime.db, { name: "made-by-the-cli", actor: "cli" });
    expect(await ownAgentTokens(rt.runtime.db, "olga")).toEqual(["olgas-bot"]);
    // The CLI's tokens are nobody's own: the person named "cli" may approve their calls, so the
    // pages offer Approve.
    expect(await ownAgentTokens(rt.runtime.db, "cli")).toEqual([]);
    const held = await addNote(secret, "from the CLI's token");
    expect((await approve(held.id, cli.cookie)).status).toBe(200);
    expect((await approve((await addNote(olgas.secret, "olga's")).id, olga.cookie)).status).toBe(403);
  });
});

describe("an approval whose giver may no longer review", () => {
  it("a removed reviewer's approval no longer counts toward a call's approvals", async () => {
    const rt = await start({ config: pairs });
    const { agent, alice, bob } = await people(rt);
    const carl = await createTestUser(rt.runtime, "carl", ["reviewer"]);
    const held = await addNote(agent, "pair");
    expect((await approve(held.id, alice.cookie)).status).toBe(200);
    // Alice is removed (a compromised account, say): her "1 of 2" goes with her.
    const { removeUser } = await import("../auth/user-admin");
    await removeUser(rt.runtime.db, { name: "alice", actor: "olga", withdrawPending: async () => 0 });

    const second = await approve(held.id, bob.cookie);
    expect(second.status).toBe(200);
    expect((await bodyOf<{ call: CallView }>(second)).call).toMatchObject({
      status: "pending",
      approvedBy: ["bob"],
    });
    expect(rt.demoRuns()).toBe(0);

    const third = await approve(held.id, carl.cookie);
    expect((await bodyOf<{ call: CallView }>(third)).call).toMatchObject({
      status: "running",
      approvedBy: ["bob", "carl"],
    });
    await waitForCallStatus(rt.runtime, held.id, "succeeded", 10_000);
    expect(rt.demoRuns()).toBe(1);
  });
});
