import "server-only";
import { and, eq } from "drizzle-orm";
import type { GrantRequest } from "@/lib/api-types";
import { approvalsText } from "@/lib/decision-text";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import type { ToolSets } from "../agents";
import { mayReviewNow } from "../auth/users";
import { getToolRow } from "../catalogue/catalogue";
import type { EventBus } from "../events";
import { createGrant, type GrantRow } from "../grants";
import { writeAudit } from "../store/audit";
import { type Db, first, transaction } from "../store/db";
import { agentTokens, calls } from "../store/schema";
import { currentToolSet } from "./agent-set";
import { approvedByOf, bindingProblem, type CallNotify, type CallRow, nowIso, pendingMs } from "./call-row";
import { asJudged, type Judgement, raisedText, STANDS } from "./rejudge";
import { transition } from "./transition";

export interface ApprovalDeps {
  db: Db;
  bus: EventBus;
  /** May a person approve a call they requested (one-reviewer calls only). */
  selfApproval: boolean;
  /** The tool sets: an agent's call whose token's set no longer holds the tool is refused. Absent: none. */
  toolSets?: ToolSets | undefined;
  notify?: CallNotify;
  /** The replica that runs the call once the last approval moves it to `running`. */
  replica: string;
}

/** What one reviewer's approval did. */
export type ApprovalStep =
  /** Counted, but more distinct reviewers are needed: the call still waits. */
  | { kind: "counted"; approvals: number; needed: number }
  /** The last approval needed: the call moved `pending → running` (and the grant, if asked, exists). */
  | { kind: "approved"; grant: GrantRow | null };

/**
 * The person behind a call: the user who asked, or for an agent the owner who created its token
 * (self-approval is about the person, not the account: an owner does not approve what their own
 * agent asked for). Null when no person is known (a token made by the CLI).
 */
async function requestedBy(db: Db, row: CallRow): Promise<string | null> {
  if (row.requesterKind === "user") return row.requesterName;
  const token = await first(
    db
      .select({ createdBy: agentTokens.createdBy })
      .from(agentTokens)
      .where(eq(agentTokens.name, row.requesterName)),
  );
  return token?.createdBy && token.createdBy !== CLI_ACTOR ? token.createdBy : null;
}

/** The creator recorded for tokens made with the CLI: such a token's calls are nobody's own. */
const CLI_ACTOR = "cli";

/**
 * The names of the agent tokens whose calls count as `person`'s own when they approve (see
 * `requestedBy`): the tokens they created, none for the CLI's actor name (a person may be
 * called "cli"; the CLI's tokens are still nobody's).
 */
export async function ownAgentTokens(db: Db, person: string): Promise<string[]> {
  if (person === CLI_ACTOR) return [];
  const rows = await db
    .select({ name: agentTokens.name })
    .from(agentTokens)
    .where(eq(agentTokens.createdBy, person));
  return rows.map((t) => t.name);
}

/**
 * Why this reviewer may not approve this call, or null. A call that needs two or more reviewers,
 * or that a rule held, is never approved by its requester, whatever `selfApproval` says; nor is
 * one approved twice by one reviewer. A grant is made only for an agent's call (a person does
 * not exempt their own calls), for a call bound to a definition, and never for a call that needs
 * two or more reviewers.
 */
async function approverProblem(
  deps: ApprovalDeps,
  reviewer: string,
  row: CallRow,
  grant: GrantRequest | undefined,
): Promise<GatehouseError | null> {
  const own = (await requestedBy(deps.db, row)) === reviewer;
  const needed = row.approvalsNeeded;
  // "You requested" or "your agent requested": either way the same person.
  const asked =
    row.requesterKind === "agent"
      ? `This call came from agent ${row.requesterName}, whose token you created`
      : "You requested this call";
  if (own && (needed >= 2 || row.rule !== null)) {
    const why = needed >= 2 ? `it needs ${needed} approvals` : `rule "${row.rule}" held it`;
    return new GatehouseError(
      "self_approval",
      `${asked} and ${why}: reviewers other than its requester have to approve it.`,
    );
  }
  if (own && !deps.selfApproval) {
    return new GatehouseError(
      "self_approval",
      row.requesterKind === "agent"
        ? `${asked}; another reviewer has to approve it.`
        : "You cannot approve a call you requested yourself; another reviewer has to.",
    );
  }
  const approvedBy = approvedByOf(row);
  if (approvedBy.includes(reviewer)) {
    return new GatehouseError(
      "already_approved",
      `You already approved this call (${approvalsText(approvedBy.length, needed)}); another reviewer has to approve it.`,
    );
  }
  if (!grant) return null;
  if (needed >= 2) {
    return new GatehouseError(
      "grant_not_allowed",
      `This call needs ${needed} approvals${row.rule ? ` (rule "${row.rule}")` : ""}, so its tool cannot be granted; approve without a grant.`,
    );
  }
  if (row.requesterKind !== "agent") {
    return new GatehouseError(
      "grant_not_allowed",
      "Grants are for agents; a person asked for this call. Approve without a grant.",
    );
  }
  if (!row.definitionHash) {
    return new GatehouseError(
      "grant_not_allowed",
      "This call is not bound to a tool definition, so no grant can be pinned to one.",
    );
  }
  return null;
}

/**
 * One reviewer approves a pending call (`stored`, read just now), as the current rules judge it
 * (`judgement`, see rejudge.ts; default: it stands as held). A `raise` counts this approval toward
 * the raised number, stored with the rule that asks for it. The approval must still apply
 * (`bindingProblem`, and no deny rule may match now); if it does not, the call moves to
 * `refused` (the deny rule named) and this throws why. Short of the call's `approvalsNeeded`, the
 * approval is added to `approvedBy` with one conditional update (the row must still be pending
 * with the approvals read), audited as `call.approval`. The last approval moves the call
 * `pending → running` in one {@link transition}, so whoever clicks at the same moment, it runs
 * once; a grant asked for is created in that same transaction.
 *
 * Returns null when the call was decided meanwhile (the caller says how).
 */
export async function approve(
  deps: ApprovalDeps,
  reviewer: string,
  stored: CallRow,
  grant?: GrantRequest,
  judged: Judgement = STANDS,
): Promise<ApprovalStep | null> {
  const { db, bus } = deps;
  // A count the start's judgement already stored is no raise of this approval's.
  const judgement =
    judged.kind === "raise" && judged.approvalsNeeded <= stored.approvalsNeeded ? STANDS : judged;
  const row = asJudged(stored, judgement);
  const refusal = await approverProblem(deps, reviewer, row, grant);
  if (refusal) throw refusal;
  const now = nowIso();
  const problem: Refusal | null =
    (await setProblem(deps, row)) ??
    bindingProblem(row, await getToolRow(db, row.tool)) ??
    ruleProblem(judgement);
  if (problem) {
    const moved = await transition(db, bus, {
      from: "pending",
      to: "refused",
      id: row.id,
      set: {
        decidedAt: now,
        decidedBy: reviewer,
        finishedAt: now,
        errorCode: problem.code,
        errorMessage: `${problem.message}; it was not run`,
        ...(problem.rule ? { rule: problem.rule, reason: problem.reason ?? null } : {}),
      },
      actor: reviewer,
      audit: (c) => ({ detail: `approval refused: ${problem.message}`, durationMs: pendingMs(c) }),
      alsoWrite: async (tx, c) => {
        await deps.notify?.(tx, "call.decided", c);
      },
    });
    if (moved.length === 0) return null;
    throw new GatehouseError(problem.code, `Approval refused: ${problem.message}.`);
  }
  // A raised count is stored with this approval (counted or the last), and said in its audit row.
  const raised =
    judgement.kind === "raise"
      ? {
          set: { approvalsNeeded: row.approvalsNeeded, rule: row.rule, approvalReason: row.approvalReason },
          text: raisedText(judgement, stored.approvalsNeeded),
        }
      : null;
  // An approval counts while its giver may still review: one removed, or whose role was taken,
  // since giving it is no longer one of the eyes (a compromised reviewer's "1 of 2" goes with them).
  const before: string[] = [];
  for (const name of approvedByOf(row)) if (await mayReviewNow(db, name)) before.push(name);
  const approvedBy = [...before, reviewer];
  const needed = row.approvalsNeeded;
  if (approvedBy.length < needed) {
    // Exactly once per approval read, on PostgreSQL too: a conditional UPDATE (still pending, with
    // the approvals read) in a SERIALIZABLE transaction; a concurrent approval that committed first
    // makes this one's retry match nothing (see `transition`). Published only once committed.
    const counted = await transaction(db, async (tx) => {
      const updated = await tx
        .update(calls)
        .set({ approvedBy: JSON.stringify(approvedBy), ...raised?.set })
        .where(and(eq(calls.id, row.id), eq(calls.status, "pending"), eq(calls.approvedBy, row.approvedBy)))
        .returning({ id: calls.id });
      if (updated.length === 0) return false;
      await writeAudit(tx, {
        actor: reviewer,
        action: "call.approval",
        subject: row.tool,
        callId: row.id,
        detail: [approvalsText(approvedBy.length, needed), raised?.text].filter(Boolean).join("; "),
      });
      return true;
    });
    if (!counted) return null;
    // Still pending: the queue and the call's page learn of the new count.
    bus.publish({ type: "call", id: row.id, status: "pending" });
    return { kind: "counted", approvals: approvedBy.length, needed };
  }
  let made: GrantRow | null = null;
  // The one step that lets a held call run: only the first of concurrent deciders moves the row
  // (a conditional update in a transaction: exactly once on PostgreSQL too, see `transition`).
  const moved = await transition(db, bus, {
    from: "pending",
    to: "running",
    id: row.id,
    // Only with the approvals read: another process adding one meanwhile makes this a lost race.
    approvedBy: row.approvedBy,
    set: {
      decidedAt: now,
      decidedBy: reviewer,
      startedAt: now,
      replica: deps.replica,
      approvedBy: JSON.stringify(approvedBy),
      ...raised?.set,
    },
    actor: reviewer,
    audit: (c) => ({
      detail:
        [needed >= 2 ? approvalsText(approvedBy.length, needed) : null, raised?.text]
          .filter(Boolean)
          .join("; ") || null,
      durationMs: pendingMs(c),
    }),
    alsoWrite: async (tx, c) => {
      // Set on every attempt: a retried transaction (PostgreSQL) makes its grant again.
      made = null;
      if (grant && c.definitionHash !== null) {
        made = await createGrant(tx, {
          requesterKind: c.requesterKind as "agent" | "user",
          requesterName: c.requesterName,
          tool: c.tool,
          definitionHash: c.definitionHash,
          scope: grant.scope,
          argumentsDigest: c.argumentsDigest,
          callId: c.id,
          createdBy: reviewer,
          minutes: grant.minutes,
          ...(grant.uses === undefined ? {} : { uses: grant.uses }),
        });
      }
      await deps.notify?.(tx, "call.decided", c);
    },
  });
  if (moved.length === 0) return null;
  return { kind: "approved", grant: made };
}

/** Why an approval no longer applies; a deny rule's refusal names the rule and its reason. */
/** `tool_not_in_set` when the agent's token has been moved to a set that does not hold the call's tool. */
async function setProblem(deps: ApprovalDeps, row: CallRow): Promise<Refusal | null> {
  if (!deps.toolSets || row.requesterKind !== "agent") return null;
  const who = {
    kind: "agent" as const,
    name: row.requesterName,
    toolSet: await currentToolSet(deps.db, row.requesterName),
  };
  const refusal = deps.toolSets.refusal(who, row.tool);
  return refusal ? { code: refusal.code, message: refusal.message } : null;
}

interface Refusal {
  code: ErrorCode;
  message: string;
  rule?: string | null;
  reason?: string | null;
}

/** The refusal a deny rule that now matches makes of an approval, or null. */
function ruleProblem(judgement: Judgement): Refusal | null {
  if (judgement.kind !== "deny") return null;
  const { stop } = judgement;
  const message = `${stop.message} (${stop.why}; the rules changed since the call was held)`;
  return { code: stop.code, message, rule: stop.rule, reason: stop.reason };
}
