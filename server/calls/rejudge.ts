import "server-only";
import { and, eq, lt } from "drizzle-orm";
import { approvalsNeededText } from "@/lib/decision-text";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { RuleSet } from "../rules";
import { writeAudit } from "../store/audit";
import { type Db, transaction } from "../store/db";
import { calls } from "../store/schema";
import { currentToolSet } from "./agent-set";
import type { CallNotify, CallRow } from "./call-row";
import { denialBy, reviewWait, type StopDecision } from "./decision";
import { transition } from "./transition";

/*
 * A pending call judged again against the rules as they are now. Rules change only with a restart,
 * so a call held before it was born under other rules: it is judged at start, and again when a
 * reviewer approves it (the start's pass may not have reached it yet).
 */

/**
 * What the current rules say of a held call. Judging only ever makes a held call harder to run:
 * - `deny`: a deny rule now matches it: it is refused (`denied_by_rule`, the rule named), never run;
 * - `raise`: a review rule now asks for more approvals than it was held for: it needs that many
 *   (the approvals given so far still count) and names that rule;
 * - `stands`: anything else (an allow rule, no rule, a review rule asking for as many or fewer): the
 *   call stays as it was held, and an approval goes through as usual. Reviewers were shown why it
 *   waits and how many must approve; a call an allow rule would now run at once still waits for
 *   the approval it was held for (the next such call runs at once).
 *
 * A `when` that cannot be evaluated fails closed, as at a call's birth (see server/rules).
 */
export type Judgement =
  | { kind: "deny"; stop: StopDecision }
  | { kind: "raise"; rule: string; approvalsNeeded: number; approvalReason: string }
  | { kind: "stands" };

export const STANDS: Judgement = { kind: "stands" };

/**
 * Judges the pending call `row` against `rules` (none: it stands). With `db`, an agent's call is
 * judged with the tool set its token has now (`agent.set`); without, with none.
 */
export async function judgeAgain(rules: RuleSet | undefined, row: CallRow, db?: Db): Promise<Judgement> {
  if (!rules || rules.rules.length === 0) return STANDS;
  const agent = row.requesterKind === "agent";
  const verdict = await rules.decide({
    tool: row.tool,
    agent: agent ? row.requesterName : "",
    agentSet: agent && db ? ((await currentToolSet(db, row.requesterName)) ?? "") : "",
    args: JSON.parse(row.arguments) as Record<string, unknown>,
  });
  const match = verdict.match;
  if (match?.rule.decision === "deny") return { kind: "deny", stop: denialBy(match) };
  if (match?.rule.decision === "review" && match.rule.approvals > row.approvalsNeeded) {
    const wait = reviewWait(match);
    return {
      kind: "raise",
      rule: match.rule.name,
      approvalsNeeded: wait.approvalsNeeded,
      approvalReason: wait.reason,
    };
  }
  return STANDS;
}

/** The call as a `raise` judgement makes it (the row as it stands otherwise). */
export function asJudged(row: CallRow, judgement: Judgement): CallRow {
  if (judgement.kind !== "raise") return row;
  const { rule, approvalsNeeded, approvalReason } = judgement;
  return { ...row, rule, approvalsNeeded, approvalReason };
}

/** 'rule "two-eyes" now asks for 2 approvals from different reviewers (it was held for a reviewer's approval)'. */
export function raisedText(judgement: Judgement & { kind: "raise" }, heldFor: number): string {
  return `rule "${judgement.rule}" now asks for ${approvalsNeededText(judgement.approvalsNeeded)} (it was held for ${approvalsNeededText(heldFor)})`;
}

export interface JudgeDeps {
  db: Db;
  bus: EventBus;
  log: Logger;
  rules?: RuleSet;
  notify?: CallNotify;
}

/** Why a call is refused as rules that changed say: for its audit row. */
const CHANGED = "the rules changed since the call was held";

/**
 * Judges every pending call against the current rules ({@link judgeAgain}), once, at start: a
 * deny refuses the call (`pending → refused`, by "gatehouse", told of as a decision), a raised
 * count is stored with the rule and recorded as `call.rejudged`. Each call is written on its
 * own, conditionally on its still being pending (with the count read): a reviewer deciding
 * meanwhile wins, and that approval was judged itself. Never throws: a call that cannot be judged
 * or written is logged and left as it was (its approval judges it again).
 */
export async function judgePending(deps: JudgeDeps): Promise<void> {
  const { db, bus } = deps;
  if (!deps.rules || deps.rules.rules.length === 0) return;
  const pending = await db.select().from(calls).where(eq(calls.status, "pending"));
  for (const row of pending) {
    try {
      const judgement = await judgeAgain(deps.rules, row, db);
      if (judgement.kind === "deny") {
        const { stop } = judgement;
        await transition(db, bus, {
          from: "pending",
          to: "refused",
          id: row.id,
          set: {
            finishedAt: new Date().toISOString(),
            errorCode: stop.code,
            errorMessage: stop.message,
            rule: stop.rule,
            reason: stop.reason,
          },
          actor: "gatehouse",
          audit: () => ({ detail: `${stop.code}: ${stop.message} (${stop.why}; ${CHANGED})` }),
          alsoWrite: async (tx, c) => {
            await deps.notify?.(tx, "call.decided", c);
          },
        });
      } else if (judgement.kind === "raise") {
        await raiseCount(deps, row, judgement);
      }
    } catch (err) {
      deps.log.error(`call ${row.id} could not be judged against the current rules`, { error: String(err) });
    }
  }
}

/** Stores a raised count on a call still pending with the count it was read with, and its audit row. */
async function raiseCount(
  deps: JudgeDeps,
  row: CallRow,
  judgement: Judgement & { kind: "raise" },
): Promise<void> {
  const { db, bus } = deps;
  // A conditional update (still pending, count still lower) in a transaction: on any replica, a
  // count is raised and audited once (a concurrent raise or decision makes this one match nothing).
  const raised = await transaction(db, async (tx) => {
    const updated = await tx
      .update(calls)
      .set({
        approvalsNeeded: judgement.approvalsNeeded,
        rule: judgement.rule,
        approvalReason: judgement.approvalReason,
      })
      .where(
        and(
          eq(calls.id, row.id),
          eq(calls.status, "pending"),
          lt(calls.approvalsNeeded, judgement.approvalsNeeded),
        ),
      )
      .returning({ id: calls.id });
    if (updated.length === 0) return false;
    await writeAudit(tx, {
      actor: "gatehouse",
      action: "call.rejudged",
      subject: row.tool,
      callId: row.id,
      detail: `${raisedText(judgement, row.approvalsNeeded)}; ${CHANGED}`,
    });
    return true;
  });
  // Still pending: the queue and the call's page learn of the new count.
  if (raised) bus.publish({ type: "call", id: row.id, status: "pending" });
}
