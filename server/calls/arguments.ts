import "server-only";
import { createHash } from "node:crypto";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { Ajv, type ValidateFunction } from "ajv";
import { GatehouseError } from "@/lib/errors";
import { canonicalJson } from "../catalogue/definition";

/**
 * Input schemas come from untrusted tool servers, and a JSON Schema `pattern` is a regular
 * expression: one like `^(a|a)*$` backtracks for minutes on a 40-character string, and would
 * freeze the whole process (every route, every server) if checked on the main thread. So Ajv runs
 * in a worker thread, and the main thread waits for its answer with `Atomics.wait` and a deadline:
 * a check that overruns is abandoned, the worker is terminated (V8 stops even a running regular
 * expression) and replaced, and that definition is refused from then on. The call stays
 * synchronous and in order; an ordinary check costs a message round trip (tens of microseconds).
 */

/** The longest a check (compiling the schema once, then validating) may take. */
export const CHECK_DEADLINE_MS = 1000;
/** How long a new worker may take to load Ajv before the first check counts its deadline. */
const START_DEADLINE_MS = 10_000;
/** Compiled validators the worker keeps, by definition hash. */
const CACHE_MAX = 2000;
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
const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false });
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

type Answer =
  | { kind: "ok" }
  | { kind: "unknown" }
  | { kind: "compile"; message: string }
  | { kind: "invalid"; instancePath: string; message: string; missingProperty?: string };

interface Checker {
  worker: Worker;
  ctrl: Int32Array;
  out: Uint8Array;
  /** Definition hashes this worker has compiled (so their schema need not be sent again). */
  known: Set<string>;
}

let checker: Checker | null = null;
/** Definitions whose check overran the deadline: refused at once from then on. */
const overran = new Set<string>();

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
  });
  // An idle checker must not keep a CLI or a test process alive.
  worker.unref();
  return { worker, ctrl: new Int32Array(ctrlBuffer), out: new Uint8Array(outBuffer), known: new Set() };
}

function abandon(c: Checker): void {
  if (checker === c) checker = null;
  void c.worker.terminate();
}

function ask(definitionHash: string, schema: unknown, args: Record<string, unknown>): Answer {
  checker ??= startChecker();
  const c = checker;
  Atomics.store(c.ctrl, 0, POSTED);
  const known = c.known.has(definitionHash);
  c.worker.postMessage({ hash: definitionHash, schema: known ? undefined : schema, args });
  if (Atomics.wait(c.ctrl, 0, POSTED, START_DEADLINE_MS) === "timed-out") {
    abandon(c);
    throw new GatehouseError("internal", "the argument checker did not start");
  }
  if (Atomics.wait(c.ctrl, 0, STARTED, CHECK_DEADLINE_MS) === "timed-out") {
    abandon(c);
    overran.add(definitionHash);
    throw overrun();
  }
  const text = new TextDecoder().decode(c.out.slice(0, Atomics.load(c.ctrl, 1)));
  const answer = JSON.parse(text) as Answer;
  if (answer.kind === "ok" || answer.kind === "invalid") c.known.add(definitionHash);
  return answer;
}

function overrun(): GatehouseError {
  return new GatehouseError(
    "tool_unusable",
    `checking arguments against the tool's input schema took over ${CHECK_DEADLINE_MS} ms (a pattern that backtracks?); the tool cannot be called`,
  );
}

/**
 * Throws `invalid_arguments` naming the first bad field when `args` do not match `schema`;
 * `tool_unusable` when the schema cannot be compiled or checking it overruns
 * {@link CHECK_DEADLINE_MS}. Compiled once per definition hash.
 */
export function checkArguments(definitionHash: string, schema: unknown, args: Record<string, unknown>): void {
  if (overran.has(definitionHash)) throw overrun();
  const fast = local.get(definitionHash);
  if (fast) {
    checkLocally(fast, args);
    return;
  }
  let answer = ask(definitionHash, schema, args);
  // The worker was replaced since this definition was compiled: send the schema again.
  if (answer.kind === "unknown") {
    checker?.known.delete(definitionHash);
    answer = ask(definitionHash, schema, args);
  }
  if (answer.kind === "ok" || answer.kind === "invalid") promoteToLocal(definitionHash, schema);
  if (answer.kind === "ok") return;
  if (answer.kind === "compile" || answer.kind === "unknown") {
    throw new GatehouseError("tool_unusable", "the tool's input schema cannot be compiled", {
      cause: answer.kind === "compile" ? new Error(answer.message) : undefined,
    });
  }
  throw invalidArguments(answer.instancePath, answer.message, answer.missingProperty);
}

/** The refusal naming the first bad field, the same whichever thread checked. */
function invalidArguments(instancePath: string, message: string, missingProperty?: unknown): GatehouseError {
  const where = instancePath ? `arguments${instancePath.replaceAll("/", ".")}` : "arguments";
  const extra = missingProperty !== undefined ? ` (missing ${String(missingProperty)})` : "";
  return new GatehouseError("invalid_arguments", `${where} ${message}${extra}`);
}

/**
 * Validators for schemas without regular expressions (no `pattern`, no `patternProperties`), run
 * on the main thread: without a regex a check is linear in the arguments' size, so the worker's
 * round trip (the hot path's largest single cost) buys nothing. A schema gets here only after
 * the worker compiled and checked it within the deadline.
 */
const local = new Map<string, ValidateFunction>();
const localAjv = new Ajv({ strict: false, allErrors: false, validateSchema: false });

/** Whether a schema contains a regular expression anywhere (conservatively: any such key). */
export function hasRegex(schema: unknown): boolean {
  if (Array.isArray(schema)) return schema.some(hasRegex);
  if (schema === null || typeof schema !== "object") return false;
  for (const [key, value] of Object.entries(schema)) {
    if (key === "pattern" || key === "patternProperties") return true;
    if (hasRegex(value)) return true;
  }
  return false;
}

function checkLocally(validate: ValidateFunction, args: Record<string, unknown>): void {
  if (validate(args)) return;
  const e = validate.errors?.[0];
  const missing =
    e?.keyword === "required" && e.params && "missingProperty" in e.params
      ? e.params.missingProperty
      : undefined;
  throw invalidArguments(e?.instancePath ?? "", e?.message ?? "do not match the input schema", missing);
}

function promoteToLocal(definitionHash: string, schema: unknown): void {
  if (local.has(definitionHash) || hasRegex(schema)) return;
  try {
    const { $schema: _ignored, ...rest } = (schema ?? {}) as Record<string, unknown>;
    if (local.size >= CACHE_MAX) local.clear();
    local.set(definitionHash, localAjv.compile(rest));
  } catch {
    // The worker compiled it; if this copy cannot, the worker keeps doing the checks.
  }
}

/** Digest of a call's exact arguments, independent of key order. */
export function argumentsDigest(args: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(args)).digest("hex");
}
