import "server-only";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { GatehouseError } from "@/lib/errors";

/**
 * Ajv in a worker thread, waited for with a deadline. Input schemas come from untrusted tool
 * servers and arguments from agents: a `pattern` like `^(a|a)*$` backtracks for minutes on a
 * 40-character string, and `uniqueItems` compares every pair of a long array. The main thread
 * waits for the worker's answer with `Atomics.wait`: a check that overruns is abandoned, the
 * worker is terminated (V8 stops even a running regular expression) and replaced. The call stays
 * synchronous and in order; an ordinary check costs a message round trip (tens of microseconds).
 */

/** The longest a check (compiling the schema once, then validating) may take. */
export const CHECK_DEADLINE_MS = 1000;
/** How long a new worker may take to load Ajv before the first check counts its deadline. */
const START_DEADLINE_MS = 10_000;
/** Compiled validators the worker keeps, by definition hash. */
const CACHE_MAX = 2000;
/** Heap of the worker. */
const WORKER_HEAP_MB = 256;
/** Bytes of the worker's answer (an error message at most; longer ones are cut). */
const ANSWER_MAX = 8192;

// ctrl[0]: 0 = posted, 1 = the worker started on it, 2 = answered; ctrl[1]: answer length.
const POSTED = 0;
const STARTED = 1;

/** Runs in the worker (CommonJS, evaluated): compiles once per definition hash and validates. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createRequire } = require("node:module");
const { Ajv } = createRequire(workerData.base)("ajv");
// addUsedSchema false: two definitions naming one $id both compile (see arguments.ts).
const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false, logger: false, addUsedSchema: false });
const cache = new Map();
const ctrl = new Int32Array(workerData.ctrl);
const out = new Uint8Array(workerData.out);
const encoder = new TextEncoder();
function answer(value) {
  let bytes = encoder.encode(JSON.stringify(value));
  if (bytes.length > out.length) bytes = encoder.encode(JSON.stringify({ kind: "invalid", message: "do not match the input schema" }));
  out.set(bytes);
  Atomics.store(ctrl, 1, bytes.length);
  Atomics.store(ctrl, 0, 2);
  Atomics.notify(ctrl, 0);
}
parentPort.on("message", (m) => {
  Atomics.store(ctrl, 0, 1);
  Atomics.notify(ctrl, 0);
  let validate = cache.get(m.hash);
  if (!validate) {
    if (m.schema === undefined) return answer({ kind: "unknown" });
    try {
      const { $schema, ...rest } = m.schema && typeof m.schema === "object" ? m.schema : {};
      validate = ajv.compile(rest);
    } catch (err) {
      return answer({ kind: "compile", message: String(err && err.message || err) });
    }
    if (cache.size >= ${CACHE_MAX}) cache.clear();
    cache.set(m.hash, validate);
  }
  if (validate(m.args)) return answer({ kind: "ok" });
  const e = (validate.errors || [])[0] || {};
  answer({
    kind: "invalid",
    instancePath: e.instancePath || "",
    message: e.message || "do not match the input schema",
    missingProperty: e.keyword === "required" && e.params ? e.params.missingProperty : undefined,
  });
});
`;

/** What the worker said, or that it did not answer within {@link CHECK_DEADLINE_MS}. */
let posted = 0;

/** How many checks were handed to the worker since the process started (for tests and diagnostics). */
export function workerChecksPosted(): number {
  return posted;
}

export type WorkerAnswer =
  | { kind: "ok" }
  /** The worker was replaced since it compiled this definition: send the schema again. */
  | { kind: "unknown" }
  | { kind: "compile"; message: string }
  | { kind: "invalid"; instancePath: string; message: string; missingProperty?: string }
  | { kind: "overran" };

interface Checker {
  worker: Worker;
  ctrl: Int32Array;
  out: Uint8Array;
  /** Definition hashes this worker has compiled (so their schema need not be sent again). */
  known: Set<string>;
}

let checker: Checker | null = null;

function startChecker(): Checker {
  const ctrlBuffer = new SharedArrayBuffer(8);
  const outBuffer = new SharedArrayBuffer(ANSWER_MAX);
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      ctrl: ctrlBuffer,
      out: outBuffer,
      // Ajv is resolved from the app's node_modules (the working directory, as for migrations).
      base: path.join(/*turbopackIgnore: true*/ process.cwd(), "package.json"),
    },
    // Room for a 4 MiB schema compiled and 1 MiB of arguments, not for a compile that runs away.
    resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
  });
  const c: Checker = {
    worker,
    ctrl: new Int32Array(ctrlBuffer),
    out: new Uint8Array(outBuffer),
    known: new Set(),
  };
  // A worker that dies (out of memory, or a throw) must not take the process with it: an
  // 'error' event without a listener would. The check it was on has already timed out.
  worker.on("error", () => abandon(c));
  // An idle checker must not keep a CLI or a test process alive.
  worker.unref();
  return c;
}

function abandon(c: Checker): void {
  if (checker === c) checker = null;
  void c.worker.terminate();
}

function askOnce(definitionHash: string, schema: unknown, args: Record<string, unknown>): WorkerAnswer {
  checker ??= startChecker();
  const c = checker;
  Atomics.store(c.ctrl, 0, POSTED);
  const known = c.known.has(definitionHash);
  posted++;
  c.worker.postMessage({ hash: definitionHash, schema: known ? undefined : schema, args });
  if (Atomics.wait(c.ctrl, 0, POSTED, START_DEADLINE_MS) === "timed-out") {
    abandon(c);
    throw new GatehouseError("internal", "the argument checker did not start");
  }
  if (Atomics.wait(c.ctrl, 0, STARTED, CHECK_DEADLINE_MS) === "timed-out") {
    abandon(c);
    return { kind: "overran" };
  }
  const text = new TextDecoder().decode(c.out.slice(0, Atomics.load(c.ctrl, 1)));
  const answer = JSON.parse(text) as WorkerAnswer;
  if (answer.kind === "ok" || answer.kind === "invalid") c.known.add(definitionHash);
  else c.known.delete(definitionHash);
  return answer;
}

/**
 * Checks `args` against `schema` (compiled once per definition hash) in the worker, blocking
 * for at most {@link CHECK_DEADLINE_MS} once the worker has started on it. Answers `overran`
 * when the deadline passed (the worker is then replaced). Throws `internal` only when a new
 * worker could not load Ajv within 10 s.
 */
export function checkInWorker(
  definitionHash: string,
  schema: unknown,
  args: Record<string, unknown>,
): WorkerAnswer {
  const answer = askOnce(definitionHash, schema, args);
  return answer.kind === "unknown" ? askOnce(definitionHash, schema, args) : answer;
}
