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
 * one hostile evaluation from holding everyone else's, and a share of the queue per requester
 * keeps one flooding agent from pushing everyone else's out.
 *
 * CEL is `@bufbuild/cel`: maintained by Buf, run against the cel-spec conformance suite, and pure
 * TypeScript with its own RE2-semantics regex engine, so `matches()` runs in linear time whatever
 * pattern an owner writes or string an agent sends.
 */

/** The longest one evaluation may run, from when a worker starts on it. */
export const WHEN_DEADLINE_MS = 100;
/** Workers in the pool. */
const WHEN_WORKERS = 2;
/** How long a new worker may take to load CEL before the evaluations waiting for it fail. */
const START_DEADLINE_MS = 10_000;
/** Evaluations that may wait for a worker; more fail at once (closed) rather than queue without end. */
const QUEUE_MAX = 1000;
/**
 * Evaluations one requester (an agent's token name; every person counts as one, "") may have
 * waiting: an agent that floods is refused itself, and the others keep their places.
 */
const QUEUE_PER_REQUESTER = 100;
/** Heap of one worker: room for 4 MiB of arguments as CEL values, not for a runaway string. */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 } as const;

export interface EvaluatorOptions {
  /** Default {@link WHEN_DEADLINE_MS}. */
  deadlineMs?: number;
  /** Default 2. */
  workers?: number;
  /**
   * The package.json whose node_modules the workers load `@bufbuild/cel` from; default the one
   * in the working directory (where the app runs from, as for migrations).
   */
  moduleBase?: string;
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
  /** What the worker's last `error` event said is about to end it, as an outcome's message. */
  lastError: string | null;
}

/**
 * What went wrong in the worker, as a code: CEL's own messages quote argument values, and an
 * outcome's message is written to audit rows and shown to reviewers, so it is built here from
 * this table and nothing else (worker-source.ts says which message is which code).
 */
const ERROR_TEXTS = {
  missing_key: "a key it reads is missing",
  wrong_type: "a value has the wrong type",
  not_converted: "a value could not be converted",
  out_of_range: "a number went out of range",
  bad_pattern: "a regular expression it uses does not compile",
  not_bool: "it did not give true or false",
  too_deep: "it nests too deeply",
  failed: "it could not be evaluated",
} as const;
type WhenErrorCode = keyof typeof ERROR_TEXTS;

/** The words a worker may use for a result that is not a bool. */
const RESULT_KINDS = new Set([
  "null",
  "an int",
  "a double",
  "a string",
  "bytes",
  "a list",
  "a map",
  "a uint",
  "a value of another type",
]);

type Answer =
  | { type: "ready" }
  | { id: number; kind: "true" | "false" }
  | { id: number; kind: "error"; code?: string; key?: string; gave?: string };

const BUSY = "the rule evaluator is busy";
const CLOSED = "the rule evaluator is closed";
const NOT_STARTED = "the rule evaluator could not start";

function failed(message: string): WhenOutcome {
  return { kind: "error", message };
}

/**
 * The message of a worker's error answer. A key is named only when it is written in the
 * condition itself (the worker names only constants; this checks again): never a value.
 */
function errorMessage(when: string, answer: { code?: string; key?: string; gave?: string }): string {
  const code: WhenErrorCode =
    answer.code !== undefined && Object.hasOwn(ERROR_TEXTS, answer.code)
      ? (answer.code as WhenErrorCode)
      : "failed";
  const text = ERROR_TEXTS[code];
  if (code === "missing_key" && answer.key && when.includes(answer.key)) {
    return `${text}: ${JSON.stringify(answer.key)}`;
  }
  if (code === "not_bool" && answer.gave && RESULT_KINDS.has(answer.gave))
    return `${text}, but ${answer.gave}`;
  return text;
}

/**
 * Evaluates conditions in a pool of worker threads. {@link evaluate} never rejects: every way
 * an evaluation can go wrong (CEL error, deadline, a worker that dies or cannot start, too much
 * waiting) is an `error` outcome, which the caller fails closed.
 */
export class WhenEvaluator {
  private readonly deadlineMs: number;
  private readonly maxWorkers: number;
  private readonly moduleBase: string;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  /** Waiting evaluations by requester (`RuleInput.agent`). */
  private readonly waiting = new Map<string, number>();
  /**
   * Set when a worker failed to start while another was up, cleared when one starts: the
   * working one serves the queue, and a start that keeps failing is not retried in a loop.
   */
  private startFailed = false;
  private nextId = 1;
  private closed = false;

  constructor(opts: EvaluatorOptions = {}) {
    this.deadlineMs = opts.deadlineMs ?? WHEN_DEADLINE_MS;
    this.maxWorkers = Math.max(1, opts.workers ?? WHEN_WORKERS);
    // CEL is resolved from the app's node_modules (the working directory, as for migrations).
    this.moduleBase = opts.moduleBase ?? path.join(/*turbopackIgnore: true*/ process.cwd(), "package.json");
  }

  /** The outcome of `when` for `input`. */
  evaluate(when: string, input: RuleInput): Promise<WhenOutcome> {
    if (this.closed) return Promise.resolve(failed(CLOSED));
    const mine = this.waiting.get(input.agent) ?? 0;
    if (this.queue.length >= QUEUE_MAX || mine >= QUEUE_PER_REQUESTER) return Promise.resolve(failed(BUSY));
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
      this.waiting.set(input.agent, mine + 1);
      this.pump();
    });
  }

  /** Fails whatever waits and stops every worker. */
  async close(): Promise<void> {
    this.closed = true;
    this.failWaiting(CLOSED);
    const slots = this.slots.splice(0);
    for (const slot of slots) this.finish(slot, failed(CLOSED));
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  /** The next waiting job, taken off the queue. */
  private take(): Job | undefined {
    const job = this.queue.shift();
    if (job) this.leftQueue(job);
    return job;
  }

  /** Fails every waiting evaluation with `why`. */
  private failWaiting(why: string): void {
    for (const job of this.queue.splice(0)) {
      this.leftQueue(job);
      job.settle(failed(why));
    }
  }

  private leftQueue(job: Job): void {
    const left = (this.waiting.get(job.input.agent) ?? 1) - 1;
    if (left > 0) this.waiting.set(job.input.agent, left);
    else this.waiting.delete(job.input.agent);
  }

  /** Hands waiting jobs to idle workers, starting workers while the pool has room. */
  private pump(): void {
    while (this.queue.length > 0) {
      const idle = this.slots.find((s) => s.state === "idle");
      if (idle) {
        const job = this.take();
        if (job) this.dispatch(idle, job);
        continue;
      }
      const starting = this.slots.filter((s) => s.state === "starting").length;
      const mayStart = !this.startFailed || this.slots.every((s) => s.state === "starting");
      if (mayStart && this.slots.length < this.maxWorkers && this.queue.length > starting) {
        if (this.start()) continue;
        // No thread to be had (out of resources): fail what nothing else will take, never hang.
        if (this.slots.length === 0) this.failWaiting(NOT_STARTED);
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
        workerData: { base: this.moduleBase },
        resourceLimits: RESOURCE_LIMITS,
      });
    } catch (err) {
      log.warn("rule evaluator worker could not be created", { error: String(err) });
      return false;
    }
    const slot: Slot = { worker, state: "starting", job: null, jobId: 0, timer: null, lastError: null };
    this.slots.push(slot);
    slot.timer = setTimeout(() => {
      this.lose(slot, `it did not start within ${START_DEADLINE_MS} ms`);
    }, START_DEADLINE_MS);
    slot.timer.unref();
    worker.on("message", (answer: Answer) => this.onAnswer(slot, answer));
    worker.on("error", (err: Error & { code?: string }) => {
      // Said in the log only: the error is the worker's, and its text is not ours to vouch for.
      log.warn("rule evaluator worker failed", { code: err.code ?? err.name });
      slot.lastError =
        err.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? `it ran out of memory (the evaluator's heap is limited to ${RESOURCE_LIMITS.maxOldGenerationSizeMb} MB)`
          : "the rule evaluator stopped";
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
    const { tool, agent, args, agentSet = "" } = job.input;
    try {
      slot.worker.postMessage({ id: slot.jobId, when: job.when, tool, agent, agentSet, args });
    } catch {
      // Arguments that cannot be cloned (too deep for the serializer): this job fails, the worker is fine.
      this.finish(slot, failed("the arguments could not be handed to the evaluator"));
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
      this.startFailed = false;
      this.pump();
      return;
    }
    if (slot.state !== "busy" || answer.id !== slot.jobId || !slot.job) return;
    const outcome: WhenOutcome =
      answer.kind === "error" ? failed(errorMessage(slot.job.when, answer)) : { kind: answer.kind };
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
   * evaluation with `why`, and stops it. Events it sends afterwards are ignored.
   *
   * A start that failed fails the evaluations waiting, unless a worker that did start is there
   * to take them: the next start would most likely fail the same way, and waiting for it must
   * not become a hang, nor a loop of starts.
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
      if (this.slots.some((s) => s.state !== "starting")) this.startFailed = true;
      else this.failWaiting(NOT_STARTED);
    }
    this.pump();
  }
}
