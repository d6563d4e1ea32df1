/**
 * Calls arriving all the time, as a busy team's agents make them: {@link CALLERS} callers each
 * making their calls back to back, through the real call path to the demo server. On PostgreSQL
 * the calls' births and outcomes then overlap constantly and touch the same index pages
 * (time-ordered ids); as SERIALIZABLE transactions the outcome writes failed past every retry:
 * the call answered 500 ("its outcome could not be stored") and stayed `running`.
 */
import { and, eq, inArray } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { bodyOf, LIST_NOTES, request } from "@/test/support/runtime";
import { auditEvents, calls } from "../store/schema";
import { people, runtimes } from "./call-fixtures";

const { start } = runtimes();

/** Callers at once: the benchmark's concurrency, which showed the failure. */
const CALLERS = 32;
/** Calls each caller makes, one after the other. */
const EACH = 10;

describe("calls arriving all the time", () => {
  it(`${CALLERS} callers making ${EACH} read-only calls each, back to back, all get 200 succeeded, and each call is stored succeeded with one outcome row`, async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const answers = (
      await Promise.all(
        Array.from({ length: CALLERS }, async () => {
          const mine: { status: number; body: CallView }[] = [];
          for (let i = 0; i < EACH; i++) {
            const res = await request("POST", "/api/calls", {
              bearer: agent,
              body: { tool: LIST_NOTES, arguments: {} },
            });
            mine.push({ status: res.status, body: await bodyOf<CallView>(res) });
          }
          return mine;
        }),
      )
    ).flat();
    // Every answer, so that a failure shows what the failing calls said.
    expect(answers.map((a) => [a.status, a.body.status])).toEqual(
      Array.from({ length: CALLERS * EACH }, () => [200, "succeeded"]),
    );
    const ids = answers.map((a) => a.body.id);

    const stored = await rt.runtime.db
      .select({ status: calls.status })
      .from(calls)
      .where(inArray(calls.id, ids));
    expect(stored.map((r) => r.status)).toEqual(ids.map(() => "succeeded"));
    const outcomes = await rt.runtime.db
      .select({ callId: auditEvents.callId })
      .from(auditEvents)
      .where(and(inArray(auditEvents.callId, ids), eq(auditEvents.action, "call.succeeded")));
    expect(outcomes).toHaveLength(ids.length);
  });
});
