import "server-only";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { logger } from "../log";
import type { RuleInput, WhenOutcome } from "./types";
import { WORKER_SOURCE } from "./worker-source";

const log = logger("rules");

/**
 * Rule conditions are written by owners but run over arguments chosen by agents, and CEL has no
 * cost limit of its own: `args.items.all(x, args.items.all(y, ...))` over a few thousand items
 * runs for hours, and string building can fill the heap. So every condition runs in a worker
 * thread with a deadline and a heap limit, and the main thread never waits on it: an
 * evaluation is a message and a promise. A worker that overruns is terminated (V8 stops even a
 * running loop) and the evaluation fails; the next one gets a fresh worker. A small pool keeps
 * one hostile evaluation from holding everyone else's.
 */

/** The longest one evaluation may run, from when a worker starts on it. */
export const WHEN_DEADLINE_MS = 100;
/** Workers in the pool. */
export const WHEN_WORKERS = 2;
/** How long a new worker may take to load CEL before the evaluations waiting for it fail. */
const START_DEADLINE_MS = 10_000;
/** Evaluations that may wait for a worker; more fail at once (closed) rather than queue without end. */
const QUEUE_MAX = 1000;
/** Heap of one worker: room for 4 MiB of arguments as CEL values, not for a runaway string. */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 } as const;

export interface EvaluatorOptions {
  /** Default {@link WHEN_DEADLINE_MS}. */
  deadlineMs?: number;
  /** Default {@link WHEN_WORKERS}. */
  workers?: number;
}

interface Job {
  when: string;
  input: RuleInput;
  settle(outcome: WhenOutcome): void;
}

interface Slot {
  worker: Worker;
  state: "starting" | "idle" | "busy";
  job: Job | null;
  jobId: number;
  timer: NodeJS.Timeout | null;
  /** The last `error` event's message: why the worker is about to exit. */
  lastError: string | null;
}

type Answer = { type: "ready" } | { id: number; kind: "true" | "false" | "error"; message?: string };

function failed(message: string): WhenOutcome {
  return { kind: "error", message };
}

/**
 * Evaluates conditions in a pool of worker threads. {@link evaluate} never rejects: every way
 * an evaluation can go wrong (CEL error, deadline, a worker that dies or cannot start, too much
 * waiting) is an `error` outcome, which the caller fails closed.
 */
export class WhenEvaluator {
  private readonly deadlineMs: number;
  private readonly maxWorkers: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;

  constructor(opts: EvaluatorOptions = {}) {
    this.deadlineMs = opts.deadlineMs ?? WHEN_DEADLINE_MS;
    this.maxWorkers = Math.max(1, opts.workers ?? WHEN_WORKERS);
  }

  /** The outcome of `when` for `input`. */
  evaluate(when: string, input: RuleInput): Promise<WhenOutcome> {
    if (this.closed) return Promise.resolve(failed("the rule evaluator is closed"));
    if (this.queue.length >= QUEUE_MAX) {
      return Promise.resolve(failed("too many conditions are waiting to be evaluated"));
    }
    return new Promise<WhenOutcome>((resolve) => {
      let done = false;
      this.queue.push({
        when,
        input,
        settle: (outcome) => {
          if (done) return;
          done = true;
          resolve(outcome);
        },
      });
      this.pump();
    });
  }

  /** Fails whatever waits and stops every worker. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.settle(failed("the rule evaluator is closed"));
    const slots = this.slots.splice(0);
    for (const slot of slots) this.finish(slot, failed("the rule evaluator is closed"));
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  /** Hands waiting jobs to idle workers, starting workers while the pool has room. */
  private pump(): void {
    while (this.queue.length > 0) {
      const idle = this.slots.find((s) => s.state === "idle");
      if (idle) {
        const job = this.queue.shift();
        if (job) this.dispatch(idle, job);
        continue;
      }
      const starting = this.slots.filter((s) => s.state === "starting").length;
      if (this.slots.length < this.maxWorkers && this.queue.length > starting) {
        if (this.start()) continue;
        // No thread to be had (out of resources): fail what nothing else will take, never hang.
        if (this.slots.length === 0) {
          for (const job of this.queue.splice(0)) job.settle(failed("the rule evaluator could not start"));
        }
      }
      break;
    }
    this.refs();
  }

  /**
   * Idle workers must not keep a CLI or a test alive; a worker with work to do must, or the
   * process could exit with a decision still owed.
   */
  private refs(): void {
    for (const slot of this.slots) {
      if (slot.state === "busy" || (slot.state === "starting" && this.queue.length > 0)) slot.worker.ref();
      else slot.worker.unref();
    }
  }

  /** Adds a starting worker to the pool; false when no thread could be created. */
  private start(): boolean {
    let worker: Worker;
    try {
      worker = new Worker(WORKER_SOURCE, {
        eval: true,
        // CEL is resolved from the app's node_modules (the working directory, as for migrations).
        workerData: { base: path.join(/*turbopackIgnore: true*/ process.cwd(), "package.json") },
        resourceLimits: RESOURCE_LIMITS,
      });
    } catch (err) {
      log.warn("rule evaluator worker could not be created", { error: String(err) });
      return false;
    }
    const slot: Slot = { worker, state: "starting", job: null, jobId: 0, timer: null, lastError: null };
    this.slots.push(slot);
    slot.timer = setTimeout(() => {
      this.lose(slot, `the rule evaluator did not start within ${START_DEADLINE_MS} ms`);
    }, START_DEADLINE_MS);
    slot.timer.unref();
    worker.on("message", (answer: Answer) => this.onAnswer(slot, answer));
    worker.on("error", (err: Error & { code?: string }) => {
      slot.lastError =
        err.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? `it ran out of memory (the evaluator's heap is limited to ${RESOURCE_LIMITS.maxOldGenerationSizeMb} MB)`
          : `the rule evaluator stopped (${err.message})`;
    });
    worker.on("exit", (code) => {
      this.lose(slot, slot.lastError ?? `the rule evaluator stopped (exit code ${code})`);
    });
    return true;
  }

  private dispatch(slot: Slot, job: Job): void {
    slot.state = "busy";
    slot.job = job;
    slot.jobId = this.nextId++;
    const { tool, agent, args } = job.input;
    try {
      slot.worker.postMessage({ id: slot.jobId, when: job.when, tool, agent, args });
    } catch (err) {
      // Arguments that cannot be cloned (too deep for the serializer): this job fails, the worker is fine.
      this.finish(slot, failed(`the arguments could not be handed to the evaluator (${String(err)})`));
      slot.state = "idle";
      return;
    }
    slot.timer = setTimeout(() => {
      this.lose(slot, `it ran longer than ${this.deadlineMs} ms`);
    }, this.deadlineMs);
  }

  private onAnswer(slot: Slot, answer: Answer): void {
    if (!this.slots.includes(slot)) return;
    if ("type" in answer) {
      if (slot.state !== "starting") return;
      this.clearTimer(slot);
      slot.state = "idle";
      this.pump();
      return;
    }
    if (slot.state !== "busy" || answer.id !== slot.jobId) return;
    const outcome: WhenOutcome =
      answer.kind === "error" ? failed(answer.message ?? "it could not be evaluated") : { kind: answer.kind };
    this.finish(slot, outcome);
    slot.state = "idle";
    this.pump();
  }

  /** Settles the slot's job, if any, and clears its timer. */
  private finish(slot: Slot, outcome: WhenOutcome): void {
    this.clearTimer(slot);
    const job = slot.job;
    slot.job = null;
    job?.settle(outcome);
  }

  private clearTimer(slot: Slot): void {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
  }

  /**
   * Takes a worker out of the pool (overrun, crash, or a start that never finished), fails its
   * evaluation with `why`, and stops it. Events it sends afterwards are ignored. When the last
   * worker could not start, the waiting evaluations fail too: the next start would most likely
   * fail the same way, and waiting for it must not become a hang.
   */
  private lose(slot: Slot, why: string): void {
    const at = this.slots.indexOf(slot);
    if (at < 0) return;
    this.slots.splice(at, 1);
    const wasStarting = slot.state === "starting";
    this.finish(slot, failed(why));
    void slot.worker.terminate();
    if (wasStarting) {
      log.warn("rule evaluator worker failed to start", { why });
      if (this.slots.length === 0) for (const job of this.queue.splice(0)) job.settle(failed(why));
    }
    this.pump();
  }
}
