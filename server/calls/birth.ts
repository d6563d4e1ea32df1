import "server-only";
import { and, count, eq, sql } from "drizzle-orm";
import type { AgentLimits, ToolSets } from "../agents";
import { callProblem } from "../catalogue/callable";
import { approvalNeed, getToolRow } from "../catalogue/catalogue";
import { takeGrant } from "../grants";
import type { RuleSkip } from "../rules";
import type { Db } from "../store/db";
import { prepared } from "../store/prepared";
import { agentTokens, calls, tools } from "../store/schema";
import type { CallNotify, CallRow, Requester } from "./call-row";
import {
  type CallDecision,
  coverQuery,
  grantText,
  runDetail,
  type StopDecision,
  type WaitDecision,
} from "./decision";
import { insertCall } from "./queries";

type ToolRow = typeof tools.$inferSelect;
type Notify = CallNotify | undefined;

/*
 * A call's birth: its first row and audit row, as its decision says, inside the broker's group
 * commit (one write, all or nothing), on that write's transaction. So what it reads and writes in
 * the store cannot interleave with another call's birth: on SQLite transactions take turns; on
 * PostgreSQL the transaction is SERIALIZABLE (run again when a concurrent one got in its way, so
 * nothing here does anything outside the store).
 */

/**
 * The tool row named `tool` as it is now and, for an agent's call, its token's tool set and whether
 * it has been revoked (tokens are never deleted, only revoked): one statement on every agent
 * call's birth, prepared once per store. A person's call reads the tool alone.
 */
async function toolAndRevocation(
  db: Db,
  tool: string,
  requester: Requester,
): Promise<{ row: ToolRow | null; revoked: boolean; toolSet: string | null }> {
  if (requester.kind !== "agent") return { row: await getToolRow(db, tool), revoked: false, toolSet: null };
  const ofToken = (column: typeof agentTokens.revokedAt | typeof agentTokens.toolSet) =>
    sql<
      string | null
    >`(select ${column} from ${agentTokens} where ${agentTokens.name} = ${sql.placeholder("token")})`;
  const query = prepared(db, "tools.byLocalNameWithToken", () =>
    db
      .select({
        row: tools,
        revokedAt: ofToken(agentTokens.revokedAt),
        toolSet: ofToken(agentTokens.toolSet),
      })
      .from(tools)
      .where(eq(tools.localName, sql.placeholder("tool")))
      .prepare(),
  );
  const [found] = await query.execute({ tool, token: requester.name });
  if (found) return { row: found.row, revoked: found.revokedAt !== null, toolSet: found.toolSet };
  // No such tool (any more): whether the token was revoked still comes first.
  const token = prepared(db, "agentTokens.revokedAtByName", () =>
    db
      .select({ revokedAt: agentTokens.revokedAt, toolSet: agentTokens.toolSet })
      .from(agentTokens)
      .where(eq(agentTokens.name, sql.placeholder("name")))
      .prepare(),
  );
  const [t] = await token.execute({ name: requester.name });
  return { row: null, revoked: t !== undefined && t.revokedAt !== null, toolSet: t?.toolSet ?? null };
}

/** What a call's birth is made of. */
export interface Birth {
  /** The new row's columns, before its status is known. */
  call: Omit<CallRow, "status">;
  decision: CallDecision;
  requester: Requester;
  /** The tool row the decision was made on; null when there was none. */
  row: ToolRow | null;
  args: Record<string, unknown>;
  /** Allow rules passed over because their condition could not be evaluated: said in the audit row. */
  skipped: readonly RuleSkip[];
  expireAfterSeconds: number;
  notify: Notify;
  /** The replica that will ask the tool, should the call run now. */
  replica: string;
  /** Agents' limits: a call that would wait past the agent's `maxPendingCalls` is refused, writing nothing. */
  limits?: AgentLimits | undefined;
  /** The tool sets: a call whose agent's token was moved to a set without the tool meanwhile is refused. */
  toolSets?: ToolSets | undefined;
}

/** Calls of agent `name` in `status` now (in the birth's transaction). */
async function agentCallsIn(db: Db, status: "pending" | "running", name: string): Promise<number> {
  const query = prepared(db, `calls.${status}OfAgent`, () =>
    db
      .select({ n: count() })
      .from(calls)
      .where(
        and(
          eq(calls.requesterName, sql.placeholder("name")),
          eq(calls.requesterKind, "agent"),
          eq(calls.status, status),
        ),
      )
      .prepare(),
  );
  const [row] = await query.execute({ name });
  return row?.n ?? 0;
}

/** "; passed over: rule "a" (its condition could not be evaluated: …)", or "". */
function skippedText(skipped: readonly RuleSkip[]): string {
  return skipped.map((s) => `; passed over: rule "${s.rule}" (${s.why})`).join("");
}

/**
 * The decision as it holds for the tool now. Rules are evaluated off the main thread, so while a
 * call was being decided an owner may have disabled the tool (or its server changed it): then the
 * call is refused, as it would be had it arrived a moment later; or an owner may have asked for
 * every call to be confirmed (or withdrawn a vouch): then a call the default would have run waits.
 */
async function asNow(db: Db, b: Birth): Promise<CallDecision> {
  const decision = b.decision;
  if (decision.outcome === "stop" || !b.row) return decision;
  const { row: now, revoked, toolSet } = await toolAndRevocation(db, b.row.localName, b.requester);
  // Revoking a token withdraws its pending calls; one being decided meanwhile must not be born.
  if (revoked) {
    const message = "the agent's token was revoked while the call was being decided";
    return { outcome: "stop", code: "unauthenticated", message, rule: null, reason: null, why: message };
  }
  // So is a move of the token to a set without the tool: the set it has now decides.
  const outside =
    b.requester.kind === "agent" ? b.toolSets?.refusal({ ...b.requester, toolSet }, b.row.localName) : null;
  if (outside) {
    const { code, message } = outside;
    return { outcome: "stop", code, message, rule: null, reason: null, why: message };
  }
  const problem = callProblem(now, b.row.localName);
  if (problem || !now || now.definitionHash !== b.row.definitionHash) {
    const { code, message } = problem ?? {
      code: "tool_changed" as const,
      message: `${b.row.localName} changed on its server while the call was being decided`,
    };
    return { outcome: "stop", code, message, rule: null, reason: null, why: message };
  }
  if (decision.outcome === "run" && decision.by === "default") {
    const need = approvalNeed(now);
    if (need.reason !== null) {
      return {
        outcome: "wait",
        approvalsNeeded: 1,
        reason: need.reason,
        rule: null,
        grantable: true,
        why: `an owner changed the tool while the call was being decided (${need.reason})`,
      };
    }
  }
  return decision;
}

/**
 * Stores the call as its decision says and returns its row: `refused` (a stop, or a decision
 * the tool no longer supports), `pending` (wait) or `running` (run). A call covered by a grant
 * takes the grant's use here, in its own write, so N covered calls use exactly N; when the last use
 * went to another call first, the call waits as it would have without the grant.
 */
export async function writeBirth(db: Db, b: Birth): Promise<CallRow> {
  const decision = await asNow(db, b);
  if (decision.outcome === "stop") return writeRefusal(db, b, decision);
  const { call, requester } = b;
  const row = b.row as ToolRow;
  let wait: WaitDecision | null = decision.outcome === "wait" ? decision : null;
  let grantId: string | null = null;
  let detail = decision.outcome === "run" ? runDetail(decision) : "";
  if (decision.outcome === "run" && decision.by === "grant") {
    // One conditional statement in this transaction: of concurrent calls on any replica, only as
    // many as the grant has uses left take one (see `takeGrant`); a retried transaction
    // (PostgreSQL) takes it again from the rows as they then are.
    const used = await takeGrant(db, coverQuery(requester, row, b.args));
    if (used) {
      grantId = used.id;
      detail = grantText(used);
    } else wait = decision.otherwise;
  }
  if (wait) {
    const max = b.limits?.maxPendingOf(requester) ?? 0;
    if (max > 0) {
      // Read in this transaction: concurrent births of the same agent take turns (SQLite) or one
      // is run again (PostgreSQL, SERIALIZABLE), so the count is never passed.
      const pending = await agentCallsIn(db, "pending", requester.name);
      if (pending >= max && b.limits) throw b.limits.pendingRefusal(requester, pending);
    }
    const held: CallRow = {
      ...call,
      status: "pending",
      destructive: true,
      approvalReason: wait.reason,
      approvalsNeeded: wait.approvalsNeeded,
      rule: wait.rule,
      expiresAt: new Date(Date.now() + b.expireAfterSeconds * 1000).toISOString(),
    };
    await insertCall(db, held, {
      actor: requester.name,
      action: "call.pending",
      subject: held.tool,
      detail: `${wait.rule ? `held by rule "${wait.rule}": ${wait.reason}` : wait.reason}${skippedText(b.skipped)}`,
    });
    await b.notify?.(db, "call.pending", held);
    return held;
  }
  const maxRunning = b.limits?.maxConcurrentOf(requester) ?? 0;
  if (maxRunning > 0) {
    // Counted as `maxPendingCalls` is, in this transaction, so no replica passes it.
    const running = await agentCallsIn(db, "running", requester.name);
    if (running >= maxRunning && b.limits) throw b.limits.concurrentRefusal(requester, running);
  }
  const run = decision.outcome === "run" ? decision : null;
  const started: CallRow = {
    ...call,
    status: "running",
    startedAt: call.createdAt,
    replica: b.replica,
    rule: run?.rule ?? null,
    grantId,
    // A call that would have waited keeps its reason, so its story says what the grant skipped.
    approvalReason: run?.by === "grant" ? (run.otherwise?.reason ?? null) : null,
  };
  // The row exists before the tool is asked: a crash mid-call leaves it `interrupted`.
  await insertCall(db, started, {
    actor: requester.name,
    action: "call.started",
    subject: started.tool,
    detail: `${detail}${skippedText(b.skipped)}`,
  });
  if (run && run.by !== "default") await b.notify?.(db, "call.decided", started);
  return started;
}

/** Stores a refused call. A refusal by a deny rule is an automatic decision: it is told of. */
async function writeRefusal(db: Db, b: Birth, stop: StopDecision): Promise<CallRow> {
  const refused: CallRow = {
    ...b.call,
    // A refused call was never bound to a definition.
    definitionHash: null,
    status: "refused",
    finishedAt: b.call.createdAt,
    errorCode: stop.code,
    errorMessage: stop.message,
    rule: stop.rule,
    reason: stop.reason,
  };
  const detail = stop.rule ? `${stop.code}: ${stop.message} (${stop.why})` : `${stop.code}: ${stop.message}`;
  await insertCall(db, refused, {
    actor: refused.requesterName,
    action: "call.refused",
    subject: refused.tool,
    detail: `${detail}${skippedText(b.skipped)}`,
  });
  if (stop.rule) await b.notify?.(db, "call.decided", refused);
  return refused;
}
