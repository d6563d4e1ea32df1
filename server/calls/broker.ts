import "server-only";
import { randomUUID } from "node:crypto";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { and, desc, eq, lte } from "drizzle-orm";
import { type CallStatus, type CallView, finalCallStatuses } from "@/lib/api-types";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import { availabilityOf, getToolRow, parseDefinition } from "../catalogue/catalogue";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { auditEvents, calls } from "../store/schema";
import { argumentsDigest, checkArguments } from "./arguments";

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

function toView(row: CallRow, fullResult?: unknown): CallView {
  return {
    id: row.id,
    tool: row.tool,
    server: row.server,
    status: row.status as CallStatus,
    destructive: row.destructive,
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
  };
}

function capResult(result: unknown): { text: string; truncated: boolean } {
  const json = JSON.stringify(result) ?? "null";
  if (Buffer.byteLength(json) <= RESULT_STORE_MAX_BYTES) return { text: json, truncated: false };
  const preview = Buffer.from(json).subarray(0, RESULT_STORE_MAX_BYTES).toString("utf8");
  return { text: JSON.stringify({ truncated: true, preview }), truncated: true };
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

  constructor(private readonly deps: BrokerDeps) {}

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
  }

  private audit(
    actor: string,
    action: string,
    subject: string,
    callId: string | null,
    detail?: string | null,
    durationMs?: number,
  ) {
    this.deps.db
      .insert(auditEvents)
      .values({ actor, action, subject, callId, detail: detail ?? null, durationMs: durationMs ?? null })
      .run();
  }

  private publish(id: string, status: CallStatus): void {
    this.deps.bus.publish({ type: "call", id, status });
  }

  /** Records a refused attempt and throws the refusal. */
  private refuse(
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
  ): never {
    const id = randomUUID();
    this.deps.db
      .insert(calls)
      .values({
        id,
        tool: base.tool,
        server: base.server,
        remoteName: base.remoteName,
        arguments: JSON.stringify(base.args),
        argumentsDigest: argumentsDigest(base.args),
        destructive: base.destructive,
        requesterKind: requester.kind,
        requesterName: requester.name,
        status: "refused",
        createdAt: nowIso(),
        finishedAt: nowIso(),
        errorCode: code,
        errorMessage: message,
      })
      .run();
    this.audit(requester.name, "call.refused", base.tool, id, `${code}: ${message}`);
    this.publish(id, "refused");
    throw new GatehouseError(code, message);
  }

  /**
   * A call from an agent or a person. Read-only tools run now (`200`); destructive ones become
   * pending (`202`). Refusals throw after recording the attempt.
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
    if (!row) this.refuse(requester, base, "tool_not_found", `no tool named "${body.tool}"`);
    if (row.status !== "enabled")
      this.refuse(requester, base, "tool_not_enabled", `${row.localName} is not enabled`);
    const availability = availabilityOf(row);
    if (availability === "changed") {
      this.refuse(
        requester,
        base,
        "tool_changed",
        `${row.localName} changed on its server and must be re-enabled by an owner`,
      );
    }
    if (availability === "gone")
      this.refuse(requester, base, "tool_gone", `${row.localName} is no longer listed by its server`);
    if (availability === "unusable") {
      this.refuse(requester, base, "tool_unusable", `${row.localName} is unusable: ${row.unusableReason}`);
    }
    try {
      checkArguments(row.definitionHash, parseDefinition(row).inputSchema, args);
    } catch (err) {
      if (err instanceof GatehouseError) this.refuse(requester, base, err.code, err.message);
      throw err;
    }

    const id = randomUUID();
    const createdAt = nowIso();
    const common = {
      id,
      tool: row.localName,
      server: row.server,
      remoteName: row.remoteName,
      arguments: JSON.stringify(args),
      argumentsDigest: argumentsDigest(args),
      definitionHash: row.definitionHash,
      destructive: !row.readOnly,
      requesterKind: requester.kind,
      requesterName: requester.name,
      createdAt,
    };
    if (row.readOnly) {
      db.insert(calls)
        .values({ ...common, status: "running", startedAt: createdAt })
        .run();
      this.audit(requester.name, "call.started", row.localName, id, "read-only");
      const view = await this.execute(id);
      return { httpStatus: 200, call: view };
    }
    const expiresAt = new Date(Date.now() + this.deps.approvals.expireAfterSeconds * 1000).toISOString();
    db.insert(calls)
      .values({ ...common, status: "pending", expiresAt })
      .run();
    this.audit(requester.name, "call.pending", row.localName, id);
    this.publish(id, "pending");
    const view = this.get(id);
    if (!view) throw new GatehouseError("internal", "the call was not recorded");
    return { httpStatus: 202, call: view };
  }

  /** Runs a call that is already `running` and records its outcome. */
  private async execute(id: string): Promise<CallView> {
    const { db } = this.deps;
    const row = db.select().from(calls).where(eq(calls.id, id)).get();
    if (!row) throw new GatehouseError("call_not_found", `no call ${id}`);
    const started = Date.now();
    let status: CallStatus;
    let update: Partial<CallRow>;
    let full: unknown;
    try {
      const result = await this.deps.callTool(row.server, row.remoteName, JSON.parse(row.arguments));
      full = result;
      const capped = capResult(result);
      status = result.isError === true ? "failed" : "succeeded";
      update = { result: capped.text, resultTruncated: capped.truncated };
      if (result.isError === true) update.errorCode = "tool_error";
      if (result.isError === true) update.errorMessage = "the tool reported an error";
    } catch (err) {
      status = "failed";
      const code = err instanceof GatehouseError ? err.code : "internal";
      const message = err instanceof GatehouseError ? err.message : "the call failed unexpectedly";
      if (!(err instanceof GatehouseError)) this.deps.log.error(`call ${id} failed`, { error: String(err) });
      update = { errorCode: code, errorMessage: message };
    }
    const finished = db
      .update(calls)
      .set({ ...update, status, finishedAt: nowIso() })
      .where(and(eq(calls.id, id), eq(calls.status, "running")))
      .returning()
      .get();
    this.audit(
      row.requesterName,
      `call.${status}`,
      row.tool,
      id,
      update.errorMessage ?? null,
      Date.now() - started,
    );
    if (full !== undefined) {
      this.recent.set(id, { result: full, at: Date.now() });
      this.pruneRecent();
    }
    this.publish(id, status);
    return toView(finished ?? row, full);
  }

  private pruneRecent(): void {
    const cutoff = Date.now() - RECENT_RESULT_MS;
    for (const [id, r] of this.recent) if (r.at < cutoff) this.recent.delete(id);
  }

  private decidable(id: string): CallRow {
    const row = this.deps.db.select().from(calls).where(eq(calls.id, id)).get();
    if (!row) throw new GatehouseError("call_not_found", `no call ${id}`);
    if (row.status !== "pending") {
      throw new GatehouseError("already_decided", `this call is already ${row.status}`);
    }
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
      throw new GatehouseError("self_approval", "you cannot approve a call you requested yourself");
    }
    if (row.expiresAt && row.expiresAt <= nowIso()) {
      this.expireDue();
      throw new GatehouseError("already_decided", "this call has expired");
    }
    const tool = getToolRow(db, row.tool);
    if (
      !tool ||
      availabilityOf(tool) !== "ok" ||
      tool.status !== "enabled" ||
      tool.definitionHash !== row.definitionHash
    ) {
      const moved = db
        .update(calls)
        .set({
          status: "refused",
          decidedAt: nowIso(),
          decidedBy: reviewer,
          finishedAt: nowIso(),
          errorCode: "tool_changed",
          errorMessage: "the tool changed or was disabled after the call was requested; it was not run",
        })
        .where(and(eq(calls.id, id), eq(calls.status, "pending")))
        .returning()
        .get();
      if (moved) {
        this.audit(reviewer, "call.refused", row.tool, id, "tool changed since request");
        this.publish(id, "refused");
      }
      throw new GatehouseError(
        "tool_changed",
        "approval refused: the tool changed since the call was requested",
      );
    }
    const now = nowIso();
    const moved = db
      .update(calls)
      .set({ status: "running", decidedAt: now, decidedBy: reviewer, startedAt: now })
      .where(and(eq(calls.id, id), eq(calls.status, "pending")))
      .returning()
      .get();
    if (!moved) throw new GatehouseError("already_decided", "this call was decided by someone else");
    this.audit(reviewer, "call.approved", row.tool, id);
    this.publish(id, "running");
    const run = this.execute(id).then(
      () => undefined,
      (err) => this.deps.log.error(`call ${id}: ${String(err)}`),
    );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return toView(moved);
  }

  deny(reviewer: string, id: string, reason: string): CallView {
    const { db } = this.deps;
    this.decidable(id);
    const now = nowIso();
    const moved = db
      .update(calls)
      .set({ status: "denied", decidedAt: now, decidedBy: reviewer, reason, finishedAt: now })
      .where(and(eq(calls.id, id), eq(calls.status, "pending")))
      .returning()
      .get();
    if (!moved) throw new GatehouseError("already_decided", "this call was decided by someone else");
    this.audit(reviewer, "call.denied", moved.tool, id, reason);
    this.publish(id, "denied");
    return toView(moved);
  }

  /** Moves every pending call past its deadline to `expired`. */
  expireDue(): void {
    const expired = this.deps.db
      .update(calls)
      .set({ status: "expired", finishedAt: nowIso() })
      .where(and(eq(calls.status, "pending"), lte(calls.expiresAt, nowIso())))
      .returning({ id: calls.id, tool: calls.tool })
      .all();
    for (const c of expired) {
      this.audit("gatehouse", "call.expired", c.tool, c.id);
      this.publish(c.id, "expired");
    }
  }

  get(id: string): CallView | null {
    const row = this.deps.db.select().from(calls).where(eq(calls.id, id)).get();
    return row ? toView(row, this.recent.get(id)?.result) : null;
  }

  /**
   * Resolves when the call reaches a final status, after `seconds`, or when `signal` aborts,
   * whichever is first; woken by the event bus, never by polling.
   */
  async wait(id: string, seconds: number, signal?: AbortSignal): Promise<CallView> {
    const first = this.get(id);
    if (!first) throw new GatehouseError("call_not_found", `no call ${id}`);
    if (isFinal(first.status) || seconds <= 0) return first;
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

  list(params: { status?: CallStatus; limit: number; requester?: Requester }): CallView[] {
    const conds = [];
    if (params.status) conds.push(eq(calls.status, params.status));
    if (params.requester) {
      conds.push(
        eq(calls.requesterKind, params.requester.kind),
        eq(calls.requesterName, params.requester.name),
      );
    }
    return this.deps.db
      .select()
      .from(calls)
      .where(conds.length > 0 ? and(...conds) : undefined)
      .orderBy(desc(calls.createdAt))
      .limit(params.limit)
      .all()
      .map((r) => toView(r));
  }
}
