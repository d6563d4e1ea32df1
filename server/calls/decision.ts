import "server-only";
import { approvalsNeededText, grantScopeText } from "@/lib/decision-text";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import type { ToolSets } from "../agents";
import { callProblem } from "../catalogue/callable";
import { approvalNeed, getToolRow, parseDefinition } from "../catalogue/catalogue";
import { type CoverQuery, findCoveringGrant, type GrantRow } from "../grants";
import type { RuleMatch, RuleSet, RuleSkip } from "../rules";
import type { Db } from "../store/db";
import type { tools } from "../store/schema";
import { inSpan } from "../tracing";
import { argumentsDigest, checkArguments } from "./arguments";
import type { Requester } from "./call-row";

type ToolRow = typeof tools.$inferSelect;

/** The call does not go ahead: refused at once, nothing sent. */
export interface StopDecision {
  outcome: "stop";
  code: ErrorCode;
  /** What the requester is told. */
  message: string;
  /** The deny rule that stopped it, when one did. */
  rule: string | null;
  /** The deny rule's `reason`, stored as the call's reason; null otherwise. */
  reason: string | null;
  /** Why, in one sentence, for the audit row and a dry run. */
  why: string;
}

/** The call waits for reviewers. */
export interface WaitDecision {
  outcome: "wait";
  /** Distinct reviewers needed (a `review` rule's `approvals`; otherwise 1). */
  approvalsNeeded: number;
  /** What reviewers read as the reason it waits. */
  reason: string;
  /** The review rule that held it, when one did. */
  rule: string | null;
  /** Whether an approval may also grant (not when two or more reviewers are needed). */
  grantable: boolean;
  why: string;
}

/** The call runs at once. */
export interface RunDecision {
  outcome: "run";
  /** `default`: the tool is read-only (annotation or vouch); `rule`: an allow rule; `grant`: a live grant. */
  by: "default" | "rule" | "grant";
  rule: string | null;
  /**
   * The grant that covers it (by `grant` only). Its use is taken when the call is stored
   * (`takeGrant`, in the same write); if another call took the last use meanwhile, the call
   * follows `otherwise`.
   */
  grant: GrantRow | null;
  otherwise: WaitDecision | null;
  /** Whether the tool itself would need approval (the call row's `destructive`). */
  destructive: boolean;
  why: string;
}

export type CallDecision = StopDecision | WaitDecision | RunDecision;

/** A decision with what it was made about. */
export interface Decided {
  decision: CallDecision;
  /** The tool's catalogue row; null when there is none. */
  row: ToolRow | null;
  /** Allow rules passed over because their condition could not be evaluated. */
  skipped: RuleSkip[];
}

export interface DecisionDeps {
  db: Db;
  /** The configured rules; absent: none. */
  rules?: RuleSet;
  /**
   * A server's `maxArgumentBytes`, which bounds the arguments of every one of its tools; undefined
   * for a server without one. Absent: every server keeps the global bound (`ARGUMENT_LIMITS`).
   */
  argumentBytesFor?: (server: string) => number | undefined;
  /** The configured tool sets: an agent whose set does not hold the tool is stopped first. Absent: none. */
  toolSets?: ToolSets;
}

export interface DecisionInput {
  requester: Requester;
  tool: string;
  args: Record<string, unknown>;
  /** The span of the request asking (traces): the decision's span goes under it. */
  traceparent?: string | null;
}

/** What a grant must match for this call. */
export function coverQuery(requester: Requester, row: ToolRow, args: Record<string, unknown>): CoverQuery {
  return {
    requesterKind: requester.kind,
    requesterName: requester.name,
    tool: row.localName,
    definitionHash: row.definitionHash,
    argumentsDigest: argumentsDigest(args),
  };
}

/**
 * The one answer to "does this call run, wait or stop, and why" (PRODUCT.md §6 and §11), asked by
 * the broker for every call and by `gatehouse rules test` for a dry run. In order:
 *
 * 0. An agent whose token has a tool set may call only the tools it holds (`tool_not_in_set`),
 *    judged on the name before the tool is looked up, so nothing tells it which tools exist.
 * 1. The tool must exist, be enabled and unchanged (`callProblem`), and the arguments must keep
 *    its server's size bound (`argumentBytesFor`) and match its input schema: otherwise stop.
 *    Rules see only calls that got this far.
 * 2. The first rule whose tools, agents and `when` match decides: `deny` stops, `allow` runs,
 *    `review` waits for its `approvals`. A `when` that cannot be evaluated never allows and always
 *    denies or reviews (failing closed; see server/rules).
 * 3. A call that would wait for one reviewer runs when a live grant covers it. A deny rule is
 *    tried before any grant, and a rule asking for two or more approvals is never covered.
 * 4. Otherwise the tool's default: read-only tools run, the rest wait for one reviewer
 *    (`approvalNeed`: annotations, an owner's vouch, "Always confirm").
 *
 * Reads only; nothing is written and no grant use is taken here.
 */
export function decideCall(deps: DecisionDeps, input: DecisionInput, now = new Date()): Promise<Decided> {
  return inSpan("decide", { traceparent: input.traceparent ?? null }, async (span) => {
    const decided = await decide(deps, input, now);
    const { decision } = decided;
    span.setAttribute("gatehouse.decision", decision.outcome);
    if (decision.outcome === "run") span.setAttribute("gatehouse.decided_by", decision.by);
    if (decision.rule) span.setAttribute("gatehouse.rule", decision.rule);
    return decided;
  });
}

async function decide(deps: DecisionDeps, input: DecisionInput, now: Date): Promise<Decided> {
  const { db } = deps;
  const outside = deps.toolSets?.refusal(input.requester, input.tool);
  if (outside)
    return { decision: stop(outside.code, outside.message, null, outside.message), row: null, skipped: [] };
  const row = await getToolRow(db, input.tool);
  const problem = await callProblem(row, input.tool, db);
  if (problem || !row) {
    const decision = problem
      ? stop(problem.code, problem.message, null, problem.message)
      : stopUnknown(input.tool);
    return { decision, row, skipped: [] };
  }
  const definition = parseDefinition(row);
  try {
    const maxBytes = deps.argumentBytesFor?.(row.server);
    const bound = maxBytes === undefined ? {} : { limits: { maxBytes }, server: row.server };
    checkArguments(row.definitionHash, definition.inputSchema, input.args, input.requester, bound);
  } catch (err) {
    if (err instanceof GatehouseError) {
      return { decision: stop(err.code, err.message, null, err.message), row, skipped: [] };
    }
    throw err;
  }
  const need = approvalNeed(row, definition.annotations);
  const agent = input.requester.kind === "agent" ? input.requester.name : "";
  const agentSet = input.requester.kind === "agent" ? (input.requester.toolSet ?? "") : "";
  const verdict = deps.rules
    ? await deps.rules.decide({ tool: row.localName, agent, agentSet, args: input.args })
    : { match: null, skipped: [] };
  const skipped = verdict.skipped;
  const decided = (decision: CallDecision): Decided => ({ decision, row, skipped });
  const match = verdict.match;

  if (match?.rule.decision === "deny") return decided(denialBy(match));
  if (match?.rule.decision === "allow") {
    return decided({
      outcome: "run",
      by: "rule",
      rule: match.rule.name,
      grant: null,
      otherwise: null,
      destructive: need.destructive,
      why: match.explanation,
    });
  }
  let wait: WaitDecision;
  if (match) {
    wait = reviewWait(match);
    if (!wait.grantable) return decided(wait);
  } else if (need.reason === null) {
    return decided({
      outcome: "run",
      by: "default",
      rule: null,
      grant: null,
      otherwise: null,
      destructive: false,
      why:
        need.readOnlyBy === "vouch"
          ? "no rule matched; an owner vouched the tool read-only"
          : "no rule matched; the tool is read-only (readOnlyHint: true)",
    });
  } else {
    wait = {
      outcome: "wait",
      approvalsNeeded: 1,
      reason: need.reason,
      rule: null,
      grantable: true,
      why: `no rule matched; the tool needs approval (${need.reason})`,
    };
  }
  const grant = await findCoveringGrant(db, coverQuery(input.requester, row, input.args), now);
  if (!grant) return decided(wait);
  return decided({
    outcome: "run",
    by: "grant",
    rule: wait.rule,
    grant,
    otherwise: wait,
    destructive: true,
    why: `${grantText(grant)}${wait.rule ? ` (rule "${wait.rule}" asks for one review)` : ""}`,
  });
}

/** A refusal for a name with no catalogue row. */
export function stopUnknown(tool: string): StopDecision {
  const message = `no tool named "${tool}"`;
  return stop("tool_not_found", message, null, message);
}

/** The `call.started` audit detail of a call that runs at once (a grant's is `grantText`). */
export function runDetail(run: RunDecision): string {
  return run.by === "rule" ? `allowed by rule "${run.rule}"` : "read-only";
}

function stop(code: ErrorCode, message: string, rule: string | null, why: string): StopDecision {
  return { outcome: "stop", code, message, rule, reason: null, why };
}

/** The refusal a matching deny rule makes: `denied_by_rule`, the rule named, its reason given. */
export function denialBy(match: RuleMatch): StopDecision {
  const reason = match.rule.reason ?? "the rule denies this call";
  // Failing closed is said, so a requester does not take "DROP never…" for a verdict on its SQL.
  const closed = match.when.kind === "error" ? ` (its condition could not be evaluated, so it applies)` : "";
  return {
    ...stop(
      "denied_by_rule",
      `denied by rule "${match.rule.name}"${closed}: ${reason}`,
      match.rule.name,
      match.explanation,
    ),
    reason: match.rule.reason,
  };
}

/** The wait a matching review rule asks for. */
export function reviewWait(match: RuleMatch): WaitDecision {
  const n = match.rule.approvals;
  const closed = match.when.kind === "error" ? " (its condition could not be evaluated, so it applies)" : "";
  return {
    outcome: "wait",
    approvalsNeeded: n,
    // The rule itself is named beside the reason wherever it is shown (`rule` on the call).
    reason: `${match.rule.reason ?? `rule "${match.rule.name}" asks for ${approvalsNeededText(n)}`}${closed}`,
    rule: match.rule.name,
    grantable: n === 1,
    why: match.explanation,
  };
}

/** "covered by grant g_… from alice (any arguments, 2 of 10 uses taken)", for audit rows and dry runs. */
export function grantText(grant: GrantRow): string {
  const scope = grantScopeText[grant.scope];
  const uses =
    grant.usesAllowed === null ? `${grant.uses} used` : `${grant.uses} of ${grant.usesAllowed} used`;
  return `covered by grant ${grant.id} from ${grant.createdBy} (${scope}, ${uses}, until ${grant.expiresAt})`;
}
