import "server-only";
import { randomBytes } from "node:crypto";
import type { CallStoryView, CallView, GrantRequest, GrantView, TokenView } from "@/lib/api-types";
import { GatehouseError, isErrorCode } from "@/lib/errors";
import type { AgentLimits } from "../agents";
import type { EventBus } from "../events";
import { readGrantView } from "../grants";
import type { Logger } from "../log";
import type { TransactionOptions } from "../store/db";
import { WriteBatch } from "../store/write-batch";
import { rememberCallTrace } from "../tracing";
import { approve } from "./approve";
import { recordedArguments } from "./arguments";
import { writeBirth } from "./birth";
import {
  type CallNotify,
  type CallRow,
  type CallSubject,
  decisionText,
  newCall,
  nowIso,
  pendingMs,
  type Requester,
  toView,
} from "./call-row";
import { type DecisionDeps, decideCall } from "./decision";
import { HeldResults } from "./held-results";
import { type CallListParams, callAudit, callView, findCall, getCall, listCalls } from "./queries";
import { judgeAgain, judgePending } from "./rejudge";
import { revokeAgent } from "./revoke-agent";
import { interruptLeftRunning, type RunDeps, runCall } from "./run";
import { transition } from "./transition";
import { untilFinal } from "./wait";

export { type CallEventName, callCursor, RESULT_STORE_MAX_BYTES, type Requester } from "./call-row";

/** What deciding a call needs (the store, rules, argument bounds, tool sets: see decision.ts), and more. */
export interface BrokerDeps extends DecisionDeps {
  bus: EventBus;
  log: Logger;
  approvals: { expireAfterSeconds: number; selfApproval: boolean };
  /** Agents' limits (server/agents): their pace before a call is decided, their waiting calls at its birth. */
  limits?: AgentLimits;
  /**
   * Asks the tool server, with a way to hear its progress on the call until it answers; what it
   * reports is published on the bus as `call.progress` while the call runs (see run.ts). Asked to
   * wait for a server that is reconnecting, and to say how long it waited (`reconnect`).
   */
  callTool: RunDeps["callTool"];
  /**
   * Called inside the transaction that makes `event` true of `call` (the new pending row, or the
   * move out of pending or running, a refusal by the rules at start included), with that
   * transaction's `db`, so what it writes (the notification outbox) is committed with the call or
   * not at all. Awaited; a rejection fails the call's write. It may run more than once for one
   * event (PostgreSQL retries a transaction): it must only write to the store. Default: nothing.
   */
  notify?: CallNotify;
  /**
   * This process's replica id (`ReplicaRegistry`), stored on each call it runs, so that the
   * survivors end its running calls should it die. Default: an id of this broker alone, which
   * no replica row names: the next broker to start on the store ends its running calls.
   */
  replica?: string;
}

/** How many times an approval is tried when concurrent approvals of the same call keep winning. */
const APPROVAL_ATTEMPTS = 5;

/**
 * The call broker: checks a call, runs read-only tools at once, holds destructive ones as
 * `pending` until a reviewer decides, and records every step. Every move of a call after its
 * birth is a conditional update on its current status with its audit row in the same
 * transaction: a decision is a {@link transition}, committed at once; a tool's outcome is
 * `runCall`'s write, group-committed with the calls arriving beside it. So concurrent deciders
 * cannot both win, and no move goes unrecorded.
 */
export class CallBroker {
  /** Full results of held calls, for the agents waiting on them (on any replica). */
  private readonly held: HeldResults;
  private expiryTimer: NodeJS.Timeout | null = null;
  /** The expiry tick in flight, if any (see {@link start}). */
  private expiring: Promise<void> | null = null;
  private readonly running = new Set<Promise<void>>();
  /** The start's judgement of pending calls against the current rules (see rejudge.ts). */
  private judging: Promise<void> = Promise.resolve();
  /** The call path's writes (new calls, outcomes and their audit rows), group-committed. */
  private readonly writes: WriteBatch;

  /**
   * The writes of {@link writes} not yet resolved. On PostgreSQL each runs at once, outside the
   * batch, so {@link flushWrites} waits for them before the store closes.
   */
  private readonly inFlight = new Set<Promise<void>>();
  /** {@link writes}, with each write kept in {@link inFlight} until it resolves. */
  private readonly tracked: RunDeps["writes"] = {
    write: (write, opts) => {
      const done = this.writes.write(write, opts);
      this.inFlight.add(done);
      const forget = () => void this.inFlight.delete(done);
      done.then(forget, forget);
      return done;
    },
  };

  /** See {@link BrokerDeps.replica}. */
  readonly replica: string;

  constructor(private readonly deps: BrokerDeps) {
    this.writes = new WriteBatch(deps.db);
    this.held = new HeldResults(deps.db);
    this.replica = deps.replica ?? `broker-${randomBytes(6).toString("hex")}`;
  }

  /**
   * Marks calls left `running` by replicas that are gone (a crash, a stop mid-call) as
   * `interrupted` (never re-run), starts expiry, and
   * judges the pending calls against the current rules in the background (`judgePending`: a deny
   * rule refuses them, a raised count is recorded); an approval meanwhile judges its call itself.
   */
  async start(): Promise<void> {
    await interruptLeftRunning(this.deps, []);
    await this.expireDue();
    this.expiryTimer = setInterval(() => {
      // A tick still running (a slow store) is not overtaken by the next.
      if (this.expiring) return;
      // `wait: false`: on SQLite a store another process holds fails at once rather than stall
      // the process; tried again at the next tick. Idempotent, so every replica may run it.
      this.expiring = this.expireDue({ wait: false })
        .catch((err: unknown) => {
          // A store that is busy or failing now is tried again at the next tick.
          this.deps.log.error("expiring due calls failed", { error: String(err) });
        })
        .finally(() => {
          this.expiring = null;
        });
    }, 1000);
    this.expiryTimer.unref();
    this.judging = judgePending(this.deps);
  }

  /**
   * Marks the calls the replicas `dead` left running (and those of processes without a replica
   * row) `interrupted`, never re-run; see `interruptLeftRunning`. Returns how many moved.
   */
  async interruptLeftBy(dead: string[]): Promise<number> {
    return (await interruptLeftRunning(this.deps, dead)).length;
  }

  /** Stops the expiry timer and waits for its tick, the start's judgement and tool runs in flight. */
  async stop(): Promise<void> {
    if (this.expiryTimer) clearInterval(this.expiryTimer);
    await this.expiring;
    await this.judging;
    await Promise.allSettled([...this.running]);
    await this.flushWrites();
  }

  /**
   * Commits queued writes now. The runtime calls it last, before the store closes: calls that
   * failed because their tool server was stopped queue their outcome after {@link stop}.
   */
  async flushWrites(): Promise<void> {
    await this.writes.flush();
    await Promise.allSettled([...this.inFlight]);
  }

  /**
   * A call from an agent or a person, decided by {@link decideCall}: it runs now (`200`), waits
   * for reviewers (`202`), or is refused (thrown, after recording the attempt). Every row is
   * committed before this resolves. A call covered by a grant takes the grant's use in the same
   * write as its row; if the last use went to another call meanwhile, it waits instead.
   * `traceparent` (traces): the asking request's span; the call's decision, wait and run go under it.
   */
  async request(
    requester: Requester,
    body: { tool: string; arguments: Record<string, unknown> },
    traceparent: string | null = null,
  ): Promise<{ httpStatus: 200 | 202; call: CallView }> {
    const { db } = this.deps;
    const args = body.arguments;
    // Before the call is decided: a call over the agent's pace is no call at all.
    await this.deps.limits?.admit(requester);
    const input = { requester, tool: body.tool, args, traceparent };
    const { decision, row, skipped } = await decideCall(this.deps, input);
    const subject: CallSubject = {
      tool: row?.localName ?? body.tool,
      server: row?.server ?? "",
      remoteName: row?.remoteName ?? "",
      args: decision.outcome === "stop" ? recordedArguments(args) : args,
      destructive: decision.outcome === "run" ? decision.destructive : true,
    };
    const call: Omit<CallRow, "status"> = {
      ...newCall(requester, subject),
      definitionHash: row?.definitionHash ?? null,
    };
    const birth = { call, decision, requester, row, args, skipped, toolSets: this.deps.toolSets };
    let stored: CallRow | null = null;
    await this.tracked.write(async (tx) => {
      stored = await writeBirth(tx, {
        ...birth,
        expireAfterSeconds: this.deps.approvals.expireAfterSeconds,
        notify: this.deps.notify,
        replica: this.replica,
        limits: this.deps.limits,
      });
    });
    const running = stored as CallRow | null;
    if (!running) throw new Error(`call ${call.id} was not stored`);
    this.deps.bus.recordCall({ from: null, call: running });
    if (running.status === "refused") {
      // Committed before the caller hears of it.
      this.deps.bus.publish({ type: "call", id: call.id, status: "refused" });
      const code = isErrorCode(running.errorCode) ? running.errorCode : "internal";
      throw new GatehouseError(code, running.errorMessage ?? "refused");
    }
    const toolNow = { description: row?.description ?? null, definitionHash: row?.definitionHash ?? null };
    if (running.status === "pending") {
      rememberCallTrace(call.id, traceparent);
      this.deps.bus.publish({ type: "call", id: call.id, status: "pending" });
      return { httpStatus: 202, call: toView(running, toolNow) };
    }
    let outcome: Awaited<ReturnType<typeof runCall>>;
    try {
      outcome = await this.execute({ ...running, args }, traceparent);
    } catch (err) {
      // The tool was asked; only its outcome could not be stored (a busy or full store). That is
      // no "try again": a retry would run the tool twice.
      throw new GatehouseError(
        "internal",
        `call ${call.id} was sent to the tool, but its outcome could not be stored; do not repeat it: look it up with GET /api/calls/${call.id}`,
        { cause: err },
      );
    }
    // The view is built from what was just written: no read-back of the row, unless the row was
    // taken out of `running` meanwhile and the outcome was not written.
    const view = outcome.moved
      ? toView({ ...running, ...outcome.stored }, toolNow, outcome.full)
      : await callView(db, call.id);
    return { httpStatus: 200, call: view };
  }

  /** Runs a `running` call, records its outcome and publishes it; held calls keep their full result. */
  private async execute(call: Parameters<typeof runCall>[1], inRequest?: string | null) {
    const outcome = await runCall({ ...this.deps, writes: this.tracked }, call, inRequest);
    // A call that was no longer running got no outcome: nothing to keep or announce.
    if (!outcome.moved) return outcome;
    // Only calls someone may be waiting on (held for approval) keep their full result; kept
    // before the outcome is announced, so whoever it wakes, on any replica, finds it.
    if (outcome.full !== undefined && call.destructive) {
      await this.held.keep(call.id, outcome.full, outcome.stored.resultTruncated).catch((err: unknown) => {
        this.deps.log.warn(`call ${call.id}: its full result could not be kept`, { error: String(err) });
      });
    }
    this.deps.bus.publish({ type: "call", id: call.id, status: outcome.stored.status });
    this.deps.bus.recordCall({ from: "running", call: { ...call, ...outcome.stored } });
    return outcome;
  }

  /** "Already decided", saying how; used both before deciding and when a conditional update lost. */
  private async alreadyDecided(id: string): Promise<GatehouseError> {
    return new GatehouseError(
      "already_decided",
      `Already decided: ${decisionText(await getCall(this.deps.db, id))}.`,
    );
  }

  /**
   * The pending row of a call about to be decided. A call past its deadline is expired first (the
   * timer may not have run yet), so a late approval or denial can never beat expiry.
   */
  private async decidable(id: string): Promise<CallRow> {
    const row = await getCall(this.deps.db, id);
    if (row.status === "pending" && row.expiresAt && row.expiresAt <= nowIso()) await this.expireDue();
    if (row.status !== "pending" || (row.expiresAt && row.expiresAt <= nowIso()))
      throw await this.alreadyDecided(id);
    return row;
  }

  /**
   * A reviewer approves a pending call (see `approve` in approve.ts), judged first against the
   * rules as they are now (`judgeAgain`: a deny rule refuses it, a review rule asking for more
   * approvals raises its count): short of the approvals it needs, the approval is counted and the
   * call keeps waiting; the last one moves it `pending → running` exactly once and runs it in the
   * background. With `grant`, the approval also creates a grant for the same requester and tool.
   * An approval that no longer applies moves the call to `refused` and throws why.
   */
  async approve(
    reviewer: string,
    id: string,
    opts: { grant?: GrantRequest } = {},
  ): Promise<{ call: CallView; grant: GrantView | null }> {
    const { db, bus } = this.deps;
    let row: CallRow;
    let step: Awaited<ReturnType<typeof approve>> = null;
    for (let attempt = 1; ; attempt++) {
      const judgement = await judgeAgain(this.deps.rules, await this.decidable(id), db);
      // Read again: the call may have been decided, or approved by another, while rules were evaluated.
      row = await this.decidable(id);
      step = await approve(
        {
          db,
          bus,
          selfApproval: this.deps.approvals.selfApproval,
          toolSets: this.deps.toolSets,
          notify: this.deps.notify,
          replica: this.replica,
        },
        reviewer,
        row,
        opts.grant,
        judgement,
      );
      // Lost to a concurrent approval that was only counted (the call still waits, with one
      // approval more than read): approve again on the call as it now is. A decided call makes
      // `decidable` throw how it was decided.
      if (step || attempt >= APPROVAL_ATTEMPTS) break;
    }
    if (!step) throw await this.alreadyDecided(id);
    if (step.kind === "counted") return { call: await callView(db, id), grant: null };
    const run = this.execute({ ...row, args: JSON.parse(row.arguments) as Record<string, unknown> }).then(
      () => undefined,
      (err) => this.deps.log.error(`call ${id}: ${String(err)}`),
    );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return {
      call: await callView(db, id),
      grant: step.grant ? await readGrantView(db, step.grant.id) : null,
    };
  }

  async deny(reviewer: string, id: string, reason: string): Promise<CallView> {
    const { db, bus } = this.deps;
    await this.decidable(id);
    const now = nowIso();
    // A conditional update in a transaction: of a denial and an approval at once, on any replica,
    // one moves the call (see `transition`).
    const moved = await transition(db, bus, {
      from: "pending",
      to: "denied",
      id,
      set: { decidedAt: now, decidedBy: reviewer, reason, finishedAt: now },
      actor: reviewer,
      audit: (c) => ({ detail: reason, durationMs: pendingMs(c) }),
      alsoWrite: async (tx, c) => {
        await this.deps.notify?.(tx, "call.decided", c);
      },
    });
    if (moved.length === 0) throw await this.alreadyDecided(id);
    return await callView(db, id);
  }

  /**
   * The requester takes back its own pending call (an MCP client cancelled the held request).
   * `pending → withdrawn` is one conditional update, so a reviewer deciding at the same moment
   * either wins (and the call stays decided) or finds it withdrawn. Another requester's call
   * answers `call_not_found`, as it does on the REST API.
   */
  async withdraw(requester: Requester, id: string): Promise<CallView> {
    const { db, bus } = this.deps;
    const row = await findCall(db, id);
    if (!row || row.requesterKind !== requester.kind || row.requesterName !== requester.name) {
      throw new GatehouseError("call_not_found", `no call ${id}`);
    }
    const moved = await transition(db, bus, {
      from: "pending",
      to: "withdrawn",
      id,
      set: {
        finishedAt: nowIso(),
        errorCode: "withdrawn",
        errorMessage: "the requester cancelled the call before anyone decided",
      },
      actor: requester.name,
      audit: () => ({ detail: "cancelled by the requester" }),
    });
    if (moved.length === 0) {
      const status = (await findCall(db, id))?.status ?? row.status;
      throw new GatehouseError("already_decided", `this call is already ${status}`);
    }
    return await this.view(id);
  }

  /** Revokes an agent's token and withdraws its pending calls: see {@link revokeAgent}. */
  revokeAgent(params: { name: string; actor: string }): Promise<{ token: TokenView; withdrawn: number }> {
    return revokeAgent(this.deps.db, this.deps.bus, params);
  }

  /**
   * Moves every pending call past its deadline to `expired`. Idempotent and safe on every replica
   * at once: one conditional update (`status = 'pending'` and due) in a transaction, so a call is
   * expired, audited and told of once, by whichever replica's update reached it first (see
   * `transition`). `opts.wait: false` for the background tick (see `TransactionOptions`).
   */
  async expireDue(opts: TransactionOptions = {}): Promise<void> {
    const now = nowIso();
    await transition(this.deps.db, this.deps.bus, {
      from: "pending",
      to: "expired",
      dueBy: now,
      set: { finishedAt: now },
      actor: "gatehouse",
      audit: (c) => ({ durationMs: pendingMs(c) }),
      alsoWrite: async (tx, c) => {
        await this.deps.notify?.(tx, "call.expired", c);
      },
      ...opts,
    });
  }

  /** A call as its view, with the full result of a recent held call when there is one. */
  private async view(id: string): Promise<CallView> {
    const kept = this.held.inMemory(id);
    if (kept !== undefined) return callView(this.deps.db, id, kept);
    return this.held.completed(await callView(this.deps.db, id));
  }

  async get(id: string): Promise<CallView | null> {
    try {
      return await this.view(id);
    } catch (err) {
      if (err instanceof GatehouseError && err.code === "call_not_found") return null;
      throw err;
    }
  }

  /**
   * A call's whole story: the call as stored (its result capped, marked when truncated; never
   * the in-memory full copy) and every audit row about it, oldest first.
   */
  async story(id: string): Promise<CallStoryView> {
    const call = await callView(this.deps.db, id);
    const grant = call.grantId ? await readGrantView(this.deps.db, call.grantId) : null;
    return { call, audit: await callAudit(this.deps.db, id), grant };
  }

  /**
   * Resolves when the call reaches a final status, after `seconds`, or when `signal` aborts,
   * whichever is first (see {@link untilFinal}).
   */
  wait(id: string, seconds: number, signal?: AbortSignal, traceparent?: string | null): Promise<CallView> {
    const source = { bus: this.deps.bus, get: (callId: string) => this.get(callId) };
    return untilFinal(source, id, seconds, signal, traceparent);
  }

  /** Calls newest first (ties by id), narrowed by `params`; page on with `before`. */
  list(params: CallListParams): Promise<CallView[]> {
    return listCalls(this.deps.db, params);
  }
}
