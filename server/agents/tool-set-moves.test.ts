/**
 * A token moved to another tool set while its calls are in flight: the set it has now decides a
 * call's birth and its approval, and a held call is judged again with it as `agent.set`. Real
 * parts: the demo server, the route modules, the store of the project under test.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import { setTokenToolSet } from "../auth/tokens";
import { addNote, approve, getCall } from "../calls/call-fixtures";

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

const toolSets = {
  reader: { tools: ["demo_list_*"] },
  writer: { tools: ["demo_*"] },
  quarantine: { tools: ["demo_*"] },
};
const rules = [
  {
    name: "quarantined",
    tools: [ADD_NOTE],
    when: "agent.set == 'quarantine'",
    decision: "deny",
    reason: "held back",
  },
];

async function start() {
  const t = await startTestRuntime({ config: { toolSets, rules } });
  rt = t;
  await enableTool(t.runtime, LIST_NOTES);
  await enableTool(t.runtime, ADD_NOTE);
  const bot = await createAgentToken(t.runtime, "mover-bot", { toolSet: "writer" });
  const reviewer = await createTestUser(t.runtime, "rita", ["reviewer"]);
  const move = (toolSet: string) =>
    setTokenToolSet(t.runtime.db, {
      name: "mover-bot",
      toolSet,
      actor: "test",
      knownSets: Object.keys(toolSets),
    });
  return { t, bot, reviewer, move };
}

describe("a token moved while its calls are in flight", () => {
  it("a call held before its token was moved out of the tool's set is refused at approval, never run", async () => {
    const { t, bot, reviewer, move } = await start();
    const held = await addNote(bot, "written before the move");
    await move("reader");
    const before = t.demoRuns();
    const res = await approve(held.id, reviewer.cookie);
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("tool_not_in_set");
    expect(body.error.message).toMatch(/not in tool set "reader"/);
    const after = await bodyOf<CallView>(await getCall(held.id, { bearer: bot }));
    expect(after.status).toBe("refused");
    expect(t.demoRuns()).toBe(before);
  });

  it("a call decided under the set its token had is not born once the token was moved to one without the tool", async () => {
    const { t, move } = await start();
    await move("reader");
    // As a request authenticated just before the move would carry it: the set it had then.
    const stale = { kind: "agent" as const, name: "mover-bot", toolSet: "writer" };
    await expect(
      t.runtime.broker.request(stale, { tool: ADD_NOTE, arguments: { text: "raced the move" } }),
    ).rejects.toMatchObject({ code: "tool_not_in_set" });
  });

  it("a held call is judged again with the set its token has now as agent.set", async () => {
    const { bot, reviewer, move } = await start();
    const held = await addNote(bot, "judged again");
    await move("quarantine");
    const res = await approve(held.id, reviewer.cookie);
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("denied_by_rule");
    expect(body.error.message).toMatch(/"quarantined"/);
    // The same call pattern from a token that stays in "writer" is still approved and run.
    const other = await createAgentToken((rt as TestRuntime).runtime, "steady-bot", { toolSet: "writer" });
    const fine = await addNote(other, "steady");
    expect((await approve(fine.id, reviewer.cookie)).status).toBe(200);
    expect((await request("GET", `/api/calls/${fine.id}?wait=10`, { bearer: other })).status).toBe(200);
  });
});
