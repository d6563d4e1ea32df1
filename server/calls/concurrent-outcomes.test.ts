/**
 * Calls arriving together, as a busy team's agents make them, through the real call path with
 * the demo server: each answers with its own result. On PostgreSQL the outcome writes of
 * concurrent calls share index pages (time-ordered ids), and as SERIALIZABLE transactions they
 * failed one another past every retry, answering 500 ("its outcome could not be stored").
 */
import { and, eq, inArray } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { bodyOf, LIST_NOTES, request } from "@/test/support/runtime";
import { auditEvents, calls } from "../store/schema";
import { people, runtimes } from "./call-fixtures";

const { start } = runtimes();

/** Calls in flight at once: the benchmark's concurrency, which showed the failure. */
const AT_ONCE = 32;
/** Rounds of {@link AT_ONCE}: a conflict is a matter of timing, so more than one chance to show. */
const ROUNDS = 3;

describe("calls arriving together", () => {
  it(`${AT_ONCE} concurrent read-only calls, ${ROUNDS} times, all answer 200 succeeded and are stored succeeded with one outcome row each`, async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const ids: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const answers = await Promise.all(
        Array.from({ length: AT_ONCE }, async () => {
          const res = await request("POST", "/api/calls", {
            bearer: agent,
            body: { tool: LIST_NOTES, arguments: {} },
          });
          return { status: res.status, body: await bodyOf<CallView>(res) };
        }),
      );
      // Every answer, so that a failure shows what the failing calls said.
      expect(answers.map((a) => [a.status, a.body.status])).toEqual(
        Array.from({ length: AT_ONCE }, () => [200, "succeeded"]),
      );
      ids.push(...answers.map((a) => a.body.id));
    }

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
