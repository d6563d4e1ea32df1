import "server-only";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { and, asc, desc, eq, getTableColumns, gte, lt, lte, or, type SQL, sql } from "drizzle-orm";
import {
  type AuditEventView,
  type CallStatus,
  type CallStoryView,
  type CallView,
  finalCallStatuses,
} from "@/lib/api-types";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import {
  approvalNeed,
  availabilityOf,
  getToolRow,
  parseDefinition,
  type ToolRow,
} from "../catalogue/catalogue";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { prepared } from "../store/prepared";
import { auditEvents, calls, tools } from "../store/schema";
import { WriteBatch } from "../store/write-batch";
import { argumentsDigest, checkArguments } from "./arguments";
import { newCallId } from "./ids";

type CallRow = typeof calls.$inferSelect;

export interface Requester {
  kind: "agent" | "user";
  name: string;
}

export interface BrokerDeps {
  db: Db;
  bus: EventBus;
  log: Logger;
  approvals: { expireAfterSeconds: number; selfApproval: boolean };
  callTool(server: string, tool: string, args: Record<string, unknown>): Promise<CallToolResult>;
}

/** Results are stored up to this many bytes of JSON; longer ones are kept as a marked preview. */
export const RESULT_STORE_MAX_BYTES = 64 * 1024;
/** Full results of recent calls are kept in memory this long for waiting agents. */
const RECENT_RESULT_MS = 5 * 60 * 1000;

const isFinal = (s: string) => (finalCallStatuses as readonly string[]).includes(s);

/** What a call's view needs from the tool's current catalogue row (absent when the row is gone). */
interface ToolNow {
  description: string | null;
  definitionHash: string | null;
}

/** A call row with its tool's current description and hash: one left join, no extra lookups. */
const viewSelection = {
  call: calls,
  toolDescription: tools.description,
  toolHash: tools.definitionHash,
};

function toView(row: CallRow, tool: ToolNow, fullResult?: unknown): CallView {
  const started = row.startedAt ? Date.parse(row.startedAt) : Number.NaN;
  const finished = row.finishedAt ? Date.parse(row.finishedAt) : Number.NaN;
  return {
    id: row.id,
    tool: row.tool,
    server: row.server,
    status: row.status as CallStatus,
    destructive: row.destructive,
    approvalReason: row.approvalReason,
    toolDescription: tool.description,
    toolChanged:
      row.definitionHash !== null &&
      tool.definitionHash !== null &&
      tool.definitionHash !== row.definitionHash,
    arguments: JSON.parse(row.arguments) as Record<string, unknown>,
    requester: { kind: row.requesterKind as "agent" | "user", name: row.requesterName },
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    decidedAt: row.decidedAt,
    decidedBy: row.decidedBy,
    reason: row.reason,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    result: fullResult ?? (row.result ? JSON.parse(row.result) : null),
    resultTruncated: fullResult === undefined ? row.resultTruncated : false,
    error: row.errorCode ? { code: row.errorCode, message: row.errorMessage ?? "" } : null,
    durationMs: Number.isFinite(started) && Number.isFinite(finished) ? finished - started : null,
  };
}

/** The columns a call's outcome sets. */
type OutcomeColumns = Pick<
  CallRow,
  "status" | "finishedAt" | "result" | "resultTruncated" | "errorCode" | "errorMessage"
> & { status: CallStatus };

/** A call row's optional columns, unset; new rows spread it and fill in the rest. */
const emptyCall = {
  definitionHash: null,
  approvalReason: null,
  expiresAt: null,
  decidedAt: null,
  decidedBy: null,
  reason: null,
  startedAt: null,
  finishedAt: null,
  result: null,
  resultTruncated: false,
  errorCode: null,
  errorMessage: null,
} satisfies Partial<CallRow>;

/** A new call's row, created now, before its status and outcome are known. */
function newCall(
  requester: Requester,
  c: {
    tool: string;
    server: string;
    remoteName: string;
    args: Record<string, unknown>;
    destructive: boolean;
  },
): Omit<CallRow, "status"> {
  return {
    ...emptyCall,
    id: newCallId(),
    tool: c.tool,
    server: c.server,
    remoteName: c.remoteName,
    arguments: JSON.stringify(c.args),
    argumentsDigest: argumentsDigest(c.args),
    destructive: c.destructive,
    requesterKind: requester.kind,
    requesterName: requester.name,
    createdAt: nowIso(),
  };
}

/**
 * The stored form of a result: its JSON when that fits in {@link RESULT_STORE_MAX_BYTES}, else
 * `{truncated: true, bytes, preview}` whose own JSON fits (the preview is the start of the JSON
 * text, shortened until the escaped whole is within the cap).
 */
export function capResult(result: unknown): { text: string; truncated: boolean } {
  const json = JSON.stringify(result) ?? "null";
  const bytes = Buffer.byteLength(json);
  if (bytes <= RESULT_STORE_MAX_BYTES) return { text: json, truncated: false };
  const whole = Buffer.from(json);
  let budget = RESULT_STORE_MAX_BYTES - 100;
  for (;;) {
    // A cut inside a multi-byte character decodes to U+FFFD; drop it rather than show it.
    const preview = whole
      .subarray(0, budget)
      .toString("utf8")
      .replace(/\uFFFD$/, "");
    const text = JSON.stringify({ truncated: true, bytes, preview });
    const over = Buffer.byteLength(text) - RESULT_STORE_MAX_BYTES;
    if (over <= 0) return { text, truncated: true };
    budget -= over;
  }
}

/** How a decided call was decided, for "already decided" answers. */
function decisionText(row: CallRow): string {
  switch (row.status as CallStatus) {
    case "running":
    case "succeeded":
    case "failed":
    case "interrupted":
      if (!row.decidedAt) return `it is already ${row.status}`;
      return row.decidedBy ? `${row.decidedBy} approved it` : "it was approved";
    case "denied":
      return row.decidedBy ? `${row.decidedBy} denied it` : "it was denied";
    case "expired":
      return "it expired before anyone decided";
    case "refused":
      return `it was refused${row.errorMessage ? `: ${row.errorMessage}` : ""}`;
    default:
      return `it is already ${row.status}`;
  }
}

/** Milliseconds a call waited for its decision (the duration of its pending state). */
function pendingMs(row: { createdAt: string }): number {
  return Math.max(0, Date.now() - Date.parse(row.createdAt));
}

/** `%`, `_` and the backslash in a search text match themselves (the query escapes with a backslash). */
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * Why an approval cannot apply to this call, or null when it can. An approval is bound to what
 * the reviewer was shown: the exact arguments (their digest at request time) and the tool's
 * definition as it was then; a tool that is no longer enabled and callable is refused too.
 */
function bindingProblem(row: CallRow, tool: ToolRow | null): { code: ErrorCode; message: string } | null {
  let args: Record<string, unknown> | null;
  try {
    args = JSON.parse(row.arguments) as Record<string, unknown>;
  } catch {
    args = null;
  }
  if (!args || argumentsDigest(args) !== row.argumentsDigest) {
    return { code: "arguments_changed", message: "the stored arguments no longer match what was requested" };
  }
  if (!tool?.present) return { code: "tool_gone", message: "the tool is no longer listed by its server" };
  if (tool.definitionHash !== row.definitionHash || availabilityOf(tool) === "changed") {
    return { code: "tool_changed", message: "the tool's definition changed since the call was requested" };
  }
  if (tool.status !== "enabled")
    return { code: "tool_not_enabled", message: "the tool is no longer enabled" };
  if (availabilityOf(tool) !== "ok") return { code: "tool_unusable", message: "the tool cannot be called" };
  return null;
}

/** A cursor for paging the activity list: the last call's creation time and id. */
export function callCursor(call: Pick<CallView, "createdAt" | "id">): string {
  return `${call.createdAt}|${call.id}`;
}

/** Filters of {@link CallBroker.list}; every field narrows the list. */
export interface CallListParams {
  status?: CallStatus;
  server?: string;
  /** Part of the tool's local name (case-insensitive). */
  tool?: string;
  /** A requester's name (agent token or person). */
  requesterName?: string;
  /** Only this requester's calls (an agent sees only its own). */
  requester?: Requester;
  /** Created at or after this ISO time. */
  from?: string;
  /** Created at or before this ISO time. */
  to?: string;
  /** Only calls older than this cursor ({@link callCursor}). */
  before?: string;
  limit: number;
}

const nowIso = () => new Date().toISOString();

/**
 * The call broker: checks a call, runs read-only tools at once, holds destructive ones as
 * `pending` until a reviewer decides, and records every step. State changes of a call are
 * conditional updates on its current status, so concurrent deciders cannot both win.
 */
export class CallBroker {
  private readonly recent = new Map<string, { result: unknown; at: number }>();
  private expiryTimer: NodeJS.Timeout | null = null;
  private readonly running = new Set<Promise<void>>();
  /** The call path's writes (new calls, outcomes and their audit rows), group-committed. */
  private readonly writes: WriteBatch;

  constructor(private readonly deps: BrokerDeps) {
    this.writes = new WriteBatch(deps.db.$client);
  }

  /** Marks calls left `running` by a crash as `interrupted` (never re-run) and starts expiry. */
  start(): void {
    const { db } = this.deps;
    const stuck = db
      .update(calls)
      .set({
        status: "interrupted",
        finishedAt: nowIso(),
        errorCode: "interrupted",
        errorMessage: "Gatehouse stopped while the call was running: outcome unknown",
      })
      .where(eq(calls.status, "running"))
      .returning({ id: calls.id, tool: calls.tool })
      .all();
    for (const c of stuck) this.audit("gatehouse", "call.interrupted", c.tool, c.id, "outcome unknown");
    this.expireDue();
    this.expiryTimer = setInterval(() => this.expireDue(), 1000);
    this.expiryTimer.unref();
  }

  /** Stops the expiry timer and waits for tool runs in flight. */
  async stop(): Promise<void> {
    if (this.expiryTimer) clearInterval(this.expiryTimer);
    await Promise.allSettled([...this.running]);
    this.flushWrites();
  }

  /**
   * Commits queued writes now. The runtime calls it last, before the store closes: calls that
   * failed because their tool server was stopped queue their outcome after {@link stop}.
   */
  flushWrites(): void {
    this.writes.flush();
  }

  /** Inserts a whole call row: one prepared statement, every column a placeholder. */
  private insertCall(row: CallRow): void {
    const { db } = this.deps;
    const insert = prepared(db, "calls.insert", () => {
      const values = Object.fromEntries(
        Object.keys(getTableColumns(calls)).map((k) => [k, sql.placeholder(k)]),
      );
      return db
        .insert(calls)
        .values(values as unknown as typeof calls.$inferInsert)
        .prepare();
    });
    insert.run(row);
  }

  private audit(
    actor: string,
    action: string,
    subject: string,
    callId: string | null,
    detail?: string | null,
    durationMs?: number,
  ) {
    const { db } = this.deps;
    const insert = prepared(db, "audit.insert", () =>
      db
        .insert(auditEvents)
        .values({
          actor: sql.placeholder("actor"),
          action: sql.placeholder("action"),
          subject: sql.placeholder("subject"),
          callId: sql.placeholder("callId"),
          detail: sql.placeholder("detail"),
          durationMs: sql.placeholder("durationMs"),
        })
        .prepare(),
    );
    insert.run({ actor, action, subject, callId, detail: detail ?? null, durationMs: durationMs ?? null });
  }

  private publish(id: string, status: CallStatus): void {
    this.deps.bus.publish({ type: "call", id, status });
  }

  /** Records a refused attempt (committed before the caller hears of it), then throws the refusal. */
  private async refuse(
    requester: Requester,
    base: {
      tool: string;
      server: string;
      remoteName: string;
      args: Record<string, unknown>;
      destructive: boolean;
    },
    code: ErrorCode,
    message: string,
  ): Promise<never> {
    const call = newCall(requester, base);
    await this.writes.write(() => {
      this.insertCall({
        ...call,
        status: "refused",
        finishedAt: call.createdAt,
        errorCode: code,
        errorMessage: message,
      });
      this.audit(requester.name, "call.refused", base.tool, call.id, `${code}: ${message}`);
    });
    this.publish(call.id, "refused");
    throw new GatehouseError(code, message);
  }

  /**
   * A call from an agent or a person. Read-only tools run now (`200`); destructive ones become
   * pending (`202`). Refusals throw after recording the attempt. Every row is committed before
   * this resolves.
   */
  async request(
    requester: Requester,
    body: { tool: string; arguments: Record<string, unknown> },
  ): Promise<{ httpStatus: 200 | 202; call: CallView }> {
    const { db } = this.deps;
    const args = body.arguments;
    const row = getToolRow(db, body.tool);
    const base = {
      tool: body.tool,
      server: row?.server ?? "",
      remoteName: row?.remoteName ?? "",
      args,
      destructive: row ? !row.readOnly : true,
    };
    if (!row) return this.refuse(requester, base, "tool_not_found", `no tool named "${body.tool}"`);
    if (row.status !== "enabled")
      return this.refuse(requester, base, "tool_not_enabled", `${row.localName} is not enabled`);
    const availability = availabilityOf(row);
    if (availability === "changed") {
      return this.refuse(
        requester,
        base,
        "tool_changed",
        `${row.localName} changed on its server and must be re-enabled by an owner`,
      );
    }
    if (availability === "gone")
      return this.refuse(requester, base, "tool_gone", `${row.localName} is no longer listed by its server`);
    if (availability === "unusable") {
      return this.refuse(
        requester,
        base,
        "tool_unusable",
        `${row.localName} is unusable: ${row.unusableReason}`,
      );
    }
    const definition = parseDefinition(row);
    try {
      checkArguments(row.definitionHash, definition.inputSchema, args);
    } catch (err) {
      if (err instanceof GatehouseError) return this.refuse(requester, base, err.code, err.message);
      throw err;
    }

    // The catalogue's one answer to "does this call wait?": annotations, an owner's vouch, "Always confirm".
    const need = approvalNeed(row, definition.annotations);
    const call: Omit<CallRow, "status"> = {
      ...newCall(requester, { ...base, tool: row.localName, destructive: need.destructive }),
      definitionHash: row.definitionHash,
      approvalReason: need.reason,
    };
    const toolNow = { description: row.description, definitionHash: row.definitionHash };
    if (need.reason === null) {
      const started: CallRow = { ...call, status: "running", startedAt: call.createdAt };
      // The row exists before the tool is asked: a crash mid-call leaves it `interrupted`.
      await this.writes.write(() => {
        this.insertCall(started);
        this.audit(requester.name, "call.started", row.localName, call.id, "read-only");
      });
      const outcome = await this.execute({ ...started, args });
      // The view is built from what was just written: no read-back of the row.
      return { httpStatus: 200, call: toView({ ...started, ...outcome.stored }, toolNow, outcome.full) };
    }
    const pending: CallRow = {
      ...call,
      status: "pending",
      expiresAt: new Date(Date.now() + this.deps.approvals.expireAfterSeconds * 1000).toISOString(),
    };
    await this.writes.write(() => {
      this.insertCall(pending);
      this.audit(requester.name, "call.pending", row.localName, call.id, need.reason);
    });
    this.publish(call.id, "pending");
    return { httpStatus: 202, call: toView(pending, toolNow) };
  }

  /**
   * Runs a call that is already `running` and records its outcome (committed before this
   * resolves). Returns the columns it wrote and the full result, when there is one.
   */
  private async execute(
    call: Pick<CallRow, "id" | "tool" | "server" | "remoteName" | "requesterName" | "destructive"> & {
      args: Record<string, unknown>;
    },
  ): Promise<{ stored: OutcomeColumns; full: unknown }> {
    const { db } = this.deps;
    const { id } = call;
    const started = Date.now();
    let full: unknown;
    let truncatedNote: string | null = null;
    const stored: OutcomeColumns = {
      status: "failed",
      finishedAt: "",
      result: null,
      resultTruncated: false,
      errorCode: null,
      errorMessage: null,
    };
    try {
      const result = await this.deps.callTool(call.server, call.remoteName, call.args);
      full = result;
      const capped = capResult(result);
      stored.status = result.isError === true ? "failed" : "succeeded";
      stored.result = capped.text;
      stored.resultTruncated = capped.truncated;
      if (result.isError === true) {
        stored.errorCode = "tool_error";
        stored.errorMessage = "the tool reported an error";
      }
      if (capped.truncated) truncatedNote = `result stored truncated to ${RESULT_STORE_MAX_BYTES} bytes`;
    } catch (err) {
      stored.errorCode = err instanceof GatehouseError ? err.code : "internal";
      stored.errorMessage = err instanceof GatehouseError ? err.message : "the call failed unexpectedly";
      if (!(err instanceof GatehouseError)) this.deps.log.error(`call ${id} failed`, { error: String(err) });
    }
    stored.finishedAt = nowIso();
    const finish = prepared(db, "calls.finish", () =>
      db
        .update(calls)
        // drizzle binds placeholders in set() through each column's encoder; its types only
        // list plain values, hence the cast.
        .set({
          status: sql.placeholder("status"),
          finishedAt: sql.placeholder("finishedAt"),
          result: sql.placeholder("result"),
          resultTruncated: sql.placeholder("resultTruncated"),
          errorCode: sql.placeholder("errorCode"),
          errorMessage: sql.placeholder("errorMessage"),
        } as unknown as Partial<CallRow>)
        .where(and(eq(calls.id, sql.placeholder("id")), eq(calls.status, "running")))
        .prepare(),
    );
    const durationMs = Date.now() - started;
    await this.writes.write(() => {
      finish.run({ ...stored, id });
      this.audit(
        call.requesterName,
        `call.${stored.status}`,
        call.tool,
        id,
        [stored.errorMessage, truncatedNote].filter(Boolean).join("; ") || null,
        durationMs,
      );
    });
    // Only calls someone may be waiting on (held for approval) keep their full result in memory.
    if (full !== undefined && call.destructive) {
      this.recent.set(id, { result: full, at: Date.now() });
      this.pruneRecent();
    }
    this.publish(id, stored.status);
    return { stored, full };
  }

  /** A call as its view, with its tool's current description; `fullResult` replaces a capped one. */
  private view(id: string, fullResult?: unknown): CallView {
    const { db } = this.deps;
    const query = prepared(db, "calls.view", () =>
      db
        .select(viewSelection)
        .from(calls)
        .leftJoin(tools, eq(tools.localName, calls.tool))
        .where(eq(calls.id, sql.placeholder("id")))
        .prepare(),
    );
    const r = query.get({ id });
    if (!r) throw new GatehouseError("call_not_found", `no call ${id}`);
    return toView(r.call, { description: r.toolDescription, definitionHash: r.toolHash }, fullResult);
  }

  private pruneRecent(): void {
    const cutoff = Date.now() - RECENT_RESULT_MS;
    // Insertion order is time order: stop at the first entry still recent.
    for (const [id, r] of this.recent) {
      if (r.at >= cutoff) break;
      this.recent.delete(id);
    }
  }

  private row(id: string): CallRow {
    const row = this.deps.db.select().from(calls).where(eq(calls.id, id)).get();
    if (!row) throw new GatehouseError("call_not_found", `no call ${id}`);
    return row;
  }

  /** "Already decided", saying how; used both before deciding and when a conditional update lost. */
  private alreadyDecided(id: string): GatehouseError {
    return new GatehouseError("already_decided", `Already decided: ${decisionText(this.row(id))}.`);
  }

  /**
   * The pending row of a call about to be decided. A call past its deadline is expired first (the
   * timer may not have run yet), so a late approval or denial can never beat expiry.
   */
  private decidable(id: string): CallRow {
    const row = this.row(id);
    if (row.status === "pending" && row.expiresAt && row.expiresAt <= nowIso()) this.expireDue();
    if (row.status !== "pending" || (row.expiresAt && row.expiresAt <= nowIso()))
      throw this.alreadyDecided(id);
    return row;
  }

  /**
   * Approves a pending call: `pending → running` in one conditional update (so two reviewers
   * approving at once run it once), then runs it in the background.
   */
  approve(reviewer: string, id: string): CallView {
    const { db } = this.deps;
    const row = this.decidable(id);
    if (row.requesterKind === "user" && row.requesterName === reviewer && !this.deps.approvals.selfApproval) {
      throw new GatehouseError(
        "self_approval",
        "You cannot approve a call you requested yourself; another reviewer has to.",
      );
    }
    const problem = bindingProblem(row, getToolRow(db, row.tool));
    if (problem) {
      const now = nowIso();
      const moved = db
        .update(calls)
        .set({
          status: "refused",
          decidedAt: now,
          decidedBy: reviewer,
          finishedAt: now,
          errorCode: problem.code,
          errorMessage: `${problem.message}; it was not run`,
        })
        .where(and(eq(calls.id, id), eq(calls.status, "pending")))
        .run();
      if (moved.changes === 0) throw this.alreadyDecided(id);
      this.audit(
        reviewer,
        "call.refused",
        row.tool,
        id,
        `approval refused: ${problem.message}`,
        pendingMs(row),
      );
      this.publish(id, "refused");
      throw new GatehouseError(problem.code, `Approval refused: ${problem.message}.`);
    }
    const now = nowIso();
    // The one step that lets a call run: only the first of concurrent deciders moves the row.
    const moved = db
      .update(calls)
      .set({ status: "running", decidedAt: now, decidedBy: reviewer, startedAt: now })
      .where(and(eq(calls.id, id), eq(calls.status, "pending")))
      .run();
    if (moved.changes === 0) throw this.alreadyDecided(id);
    this.audit(reviewer, "call.approved", row.tool, id, null, pendingMs(row));
    this.publish(id, "running");
    const run = this.execute({ ...row, args: JSON.parse(row.arguments) as Record<string, unknown> }).then(
      () => undefined,
      (err) => this.deps.log.error(`call ${id}: ${String(err)}`),
    );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return this.view(id);
  }

  deny(reviewer: string, id: string, reason: string): CallView {
    const { db } = this.deps;
    const row = this.decidable(id);
    const now = nowIso();
    const moved = db
      .update(calls)
      .set({ status: "denied", decidedAt: now, decidedBy: reviewer, reason, finishedAt: now })
      .where(and(eq(calls.id, id), eq(calls.status, "pending")))
      .run();
    if (moved.changes === 0) throw this.alreadyDecided(id);
    this.audit(reviewer, "call.denied", row.tool, id, reason, pendingMs(row));
    this.publish(id, "denied");
    return this.view(id);
  }

  /**
   * The requester takes back its own pending call (issue 7: an MCP client cancelled the held
   * request). `pending → withdrawn` is one conditional update, so a reviewer deciding at the same
   * moment either wins (and the call stays decided) or finds it withdrawn. Another requester's
   * call answers `call_not_found`, as it does on the REST API.
   */
  withdraw(requester: Requester, id: string): CallView {
    const { db } = this.deps;
    const row = db.select().from(calls).where(eq(calls.id, id)).get();
    if (!row || row.requesterKind !== requester.kind || row.requesterName !== requester.name) {
      throw new GatehouseError("call_not_found", `no call ${id}`);
    }
    const moved = db
      .update(calls)
      .set({
        status: "withdrawn",
        finishedAt: nowIso(),
        errorCode: "withdrawn",
        errorMessage: "the requester cancelled the call before anyone decided",
      })
      .where(and(eq(calls.id, id), eq(calls.status, "pending")))
      .returning({ tool: calls.tool })
      .get();
    if (!moved) {
      const now = db.select({ status: calls.status }).from(calls).where(eq(calls.id, id)).get();
      throw new GatehouseError("already_decided", `this call is already ${now?.status ?? row.status}`);
    }
    this.audit(requester.name, "call.withdrawn", moved.tool, id, "cancelled by the requester");
    this.publish(id, "withdrawn");
    const view = this.get(id);
    if (!view) throw new GatehouseError("call_not_found", `no call ${id}`);
    return view;
  }

  /** Moves every pending call past its deadline to `expired`. */
  expireDue(): void {
    const expired = this.deps.db
      .update(calls)
      .set({ status: "expired", finishedAt: nowIso() })
      .where(and(eq(calls.status, "pending"), lte(calls.expiresAt, nowIso())))
      .returning({ id: calls.id, tool: calls.tool, createdAt: calls.createdAt })
      .all();
    for (const c of expired) {
      this.audit("gatehouse", "call.expired", c.tool, c.id, null, pendingMs(c));
      this.publish(c.id, "expired");
    }
  }

  get(id: string): CallView | null {
    try {
      return this.view(id, this.recent.get(id)?.result);
    } catch (err) {
      if (err instanceof GatehouseError && err.code === "call_not_found") return null;
      throw err;
    }
  }

  /**
   * A call's whole story: the call as stored (its result capped, marked when truncated; never
   * the in-memory full copy) and every audit row about it, oldest first.
   */
  story(id: string): CallStoryView {
    const call = this.view(id);
    const audit: AuditEventView[] = this.deps.db
      .select({
        id: auditEvents.id,
        at: auditEvents.at,
        actor: auditEvents.actor,
        action: auditEvents.action,
        detail: auditEvents.detail,
        durationMs: auditEvents.durationMs,
      })
      .from(auditEvents)
      .where(eq(auditEvents.callId, id))
      .orderBy(asc(auditEvents.id))
      .all();
    return { call, audit };
  }

  /**
   * Resolves when the call reaches a final status, after `seconds`, or when `signal` aborts,
   * whichever is first; woken by the event bus, never by polling.
   */
  async wait(id: string, seconds: number, signal?: AbortSignal): Promise<CallView> {
    const first = this.get(id);
    if (!first) throw new GatehouseError("call_not_found", `no call ${id}`);
    // An abort that came before the wait (a cancellation while the call was being stored) would
    // never fire its listener: it ends the wait at once, as a later one does.
    if (isFinal(first.status) || seconds <= 0 || signal?.aborted) return first;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, seconds * 1000);
      const unsubscribe = this.deps.bus.subscribe((e) => {
        if (e.type === "call" && e.id === id && isFinal(e.status)) done();
      });
      signal?.addEventListener("abort", done);
      // The decision may have landed between the first read and the subscription.
      const again = this.get(id);
      if (again && isFinal(again.status)) done();
    });
    return this.get(id) ?? first;
  }

  /** Calls newest first (ties by id), narrowed by `params`; page on with `before`. */
  list(params: CallListParams): CallView[] {
    const conds: (SQL | undefined)[] = [];
    if (params.status) conds.push(eq(calls.status, params.status));
    if (params.server) conds.push(eq(calls.server, params.server));
    if (params.tool) conds.push(sql`${calls.tool} LIKE ${`%${escapeLike(params.tool)}%`} ESCAPE '\\'`);
    if (params.requesterName) conds.push(eq(calls.requesterName, params.requesterName));
    if (params.requester) {
      conds.push(
        eq(calls.requesterKind, params.requester.kind),
        eq(calls.requesterName, params.requester.name),
      );
    }
    if (params.from) conds.push(gte(calls.createdAt, params.from));
    if (params.to) conds.push(lte(calls.createdAt, params.to));
    if (params.before) {
      const cut = params.before.lastIndexOf("|");
      const at = params.before.slice(0, cut);
      const id = params.before.slice(cut + 1);
      conds.push(or(lt(calls.createdAt, at), and(eq(calls.createdAt, at), lt(calls.id, id))));
    }
    return this.deps.db
      .select(viewSelection)
      .from(calls)
      .leftJoin(tools, eq(tools.localName, calls.tool))
      .where(and(...conds))
      .orderBy(desc(calls.createdAt), desc(calls.id))
      .limit(params.limit)
      .all()
      .map((r) => toView(r.call, { description: r.toolDescription, definitionHash: r.toolHash }));
  }
}
