/**
 * The full result of a held call whose tool answered more than the store keeps of it
 * (RESULT_STORE_MAX_BYTES): the agent waiting for it gets it whole on whichever replica it asks,
 * or after a restart, for as long as the full results are kept; a call with a result that fits
 * leaves nothing beside its row.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { setRuntime } from "@/server/runtime";
import { bodyOf, enableTool } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { first } from "../store/db";
import { heldResults } from "../store/schema";
import {
  approve,
  call,
  getCall,
  agentAndReviewers as people,
  runtimes,
  sameStore,
  startWithMutable,
  WRITE,
} from "./call-fixtures";

const { start, extra } = runtimes();
const BYTES = 200_000;

describe("the full result of a held call", () => {
  // Two runtimes on one store exist only on PostgreSQL (SQLite is one process per file): there
  // the agent waits on replica B while A runs the call.
  it.runIf(testDialect === "postgres")(
    "reaches an agent waiting on another replica than the one that ran it",
    async () => {
      const a = await startWithMutable(start);
      const b = await startWithMutable((opts) => start({ ...opts, databaseUrl: a.rt.databaseUrl }));
      await enableTool(a.rt.runtime, WRITE);
      const { agent, alice } = await people(a.rt);
      setRuntime(a.rt.runtime);
      const pending = await call(agent, WRITE, { path: "big", bytes: BYTES });
      const waited = b.rt.runtime.broker.wait(pending.id, 30);
      expect((await approve(pending.id, alice.cookie)).status).toBe(200);
      const view = await waited;
      expect(view.status).toBe("succeeded");
      expect(view.resultTruncated).toBe(false);
      expect(JSON.stringify(view.result)).toContain("x".repeat(BYTES));
    },
  );

  it("reaches the agent from the store when the replica asked has it not in memory (a restart)", async () => {
    const a = await startWithMutable(start);
    await enableTool(a.rt.runtime, WRITE);
    const { agent, alice } = await people(a.rt);
    const pending = await call(agent, WRITE, { path: "big", bytes: BYTES });
    expect((await approve(pending.id, alice.cookie)).status).toBe(200);

    await a.rt.stop({ keepDir: true });
    extra.push(a.rt);
    const b = await startWithMutable((opts) => start({ ...opts, ...sameStore(a.rt) }));
    setRuntime(b.rt.runtime);
    const res = await getCall(pending.id, { bearer: agent }, 30);
    expect(res.status).toBe(200);
    const view = await bodyOf<CallView>(res);
    expect(view.status).toBe("succeeded");
    expect(view.resultTruncated).toBe(false);
    expect(JSON.stringify(view.result)).toContain("x".repeat(BYTES));
  });

  it("is not written beside a result that fits", async () => {
    const m = await startWithMutable(start);
    await enableTool(m.rt.runtime, WRITE);
    const { agent, alice } = await people(m.rt);
    const pending = await call(agent, WRITE, { path: "small", bytes: 1000 });
    expect((await approve(pending.id, alice.cookie)).status).toBe(200);
    const row = await first(
      m.rt.runtime.db.select().from(heldResults).where(eq(heldResults.callId, pending.id)),
    );
    expect(row).toBeUndefined();
  });
});
