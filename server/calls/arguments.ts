import "server-only";
import { createHash } from "node:crypto";
import { Ajv, type ValidateFunction } from "ajv";
import { GatehouseError } from "@/lib/errors";
import { formatBytes } from "@/lib/format";
import { canonicalJson } from "../catalogue/definition";
import { CHECK_DEADLINE_MS, checkInWorker } from "./argument-checker";
import { OVERRUN_LIMITS, OverrunLedger } from "./argument-overruns";
import {
  ARGUMENT_LIMITS,
  type ArgumentLimits,
  type ArgumentsSize,
  measureArguments,
  type SchemaProfile,
  schemaProfile,
} from "./argument-size";

/**
 * A call's arguments checked against its tool's input schema without letting either freeze the
 * process. In order:
 *
 * 1. Size: arguments over {@link ARGUMENT_LIMITS} (1 MiB of JSON, 64 levels) are refused before
 *    any schema sees them, measured without recursion.
 * 2. Main thread, only when provably cheap: the schema has none of the keywords whose cost can
 *    outgrow the schema's size times the arguments' (regular expressions, `format`,
 *    `uniqueItems`, references), is at most {@link LOCAL_SCHEMA_MAX_NODES} values, was compiled
 *    and checked by the worker within the deadline, and these arguments are at most
 *    {@link LOCAL_MAX_BYTES} with schema values × argument bytes at most {@link LOCAL_MAX_WORK}.
 *    The worker's round trip (the hot path's largest single cost) buys nothing there.
 * 3. Otherwise the worker (`argument-checker.ts`), with its {@link CHECK_DEADLINE_MS} deadline.
 *    An overrun refuses that call and counts against its requester: one with 3 overruns in 10
 *    minutes ({@link OVERRUN_LIMITS}) has its worker checks refused until the oldest expires.
 *    Other requesters call the same tool as before.
 */

export { ARGUMENT_LIMITS, type ArgumentLimits } from "./argument-size";
export { CHECK_DEADLINE_MS };

/** Largest arguments (bytes of JSON) checked on the main thread. */
export const LOCAL_MAX_BYTES = 64 * 1024;
/**
 * Largest schema (values in its JSON) whose checks may move to the main thread, which compiles it
 * again. Ajv's compiling costs far more than checking and grows faster than the schema (here,
 * warm: 150 values ~15 ms, 300 ~45 ms, 1,500 ~270 ms, 2,000 ~520 ms), so only small ones.
 */
export const LOCAL_SCHEMA_MAX_NODES = 200;
/**
 * Schema values × argument bytes allowed on the main thread. Without the costly keywords a schema
 * is a tree and Ajv applies each of its values at most once to each part of the arguments, so
 * this bounds the work: about 10 ns a unit in the worst shapes tried here (an `enum` of objects
 * against objects of thousands of keys, a wide `anyOf` over many items), so about 10 ms at most.
 * An ordinary call (50 values, 1 KiB) is 50,000.
 */
export const LOCAL_MAX_WORK = 1_000_000;

/** Who asks: overruns are counted per requester (an agent's token, or a person). */
export interface CheckRequester {
  kind: string;
  name: string;
}

export interface CheckOptions {
  /** Bounds for this tool's arguments; default {@link ARGUMENT_LIMITS}. */
  limits?: Partial<ArgumentLimits>;
  /**
   * The server whose `maxArgumentBytes` set `limits.maxBytes`: a refusal for size then names it
   * and where the bound is set. Absent: the bound is the global one, and the refusal says so.
   */
  server?: string;
  /** The time (ms) overruns are counted at; default `Date.now()`. */
  now?: number;
}

const overruns = new OverrunLedger();

/**
 * Throws `invalid_arguments` naming the first bad field when `args` do not match `schema`, when
 * they are over the size bounds, or when checking them overran {@link CHECK_DEADLINE_MS};
 * `too_many_attempts` when `requester`'s checks overran too often lately (only checks that need
 * the worker are refused then); `tool_unusable` when the schema cannot be compiled. Compiled
 * once per definition hash.
 */
export function checkArguments(
  definitionHash: string,
  schema: unknown,
  args: Record<string, unknown>,
  requester: CheckRequester,
  options: CheckOptions = {},
): void {
  const limits = { ...ARGUMENT_LIMITS, ...options.limits };
  const size = measureArguments(args, limits);
  if (size.over) throw tooLarge(size.over, limits, options.server);
  const fast = local.get(definitionHash);
  if (fast?.validate && cheapEnough(fast.profile, size)) {
    checkLocally(fast.validate, args);
    return;
  }
  const failed = uncompilable.get(definitionHash);
  if (failed !== undefined) throw cannotCompile(failed);
  const key = `${requester.kind}:${requester.name}`;
  const now = options.now ?? Date.now();
  const wait = overruns.refusedFor(key, now);
  if (wait > 0) throw tooManyOverruns(wait);
  const answer = checkInWorker(definitionHash, schema, args);
  if (answer.kind === "overran") {
    overruns.record(key, now);
    throw new GatehouseError(
      "invalid_arguments",
      `checking the arguments against the tool's input schema took over ${CHECK_DEADLINE_MS} ms (a pattern that backtracks, or arguments too costly to check); the call is refused`,
    );
  }
  if (answer.kind === "ok" || answer.kind === "invalid") promoteToLocal(definitionHash, schema);
  if (answer.kind === "ok") return;
  if (answer.kind === "compile" || answer.kind === "unknown") {
    const message = answer.kind === "compile" ? answer.message : "the worker lost the schema";
    // A schema that does not compile never will (a definition is fixed by its hash): refused at
    // once from now on, instead of sent and compiled again, on the clock of every call.
    if (answer.kind === "compile") {
      if (uncompilable.size >= UNCOMPILABLE_MAX) uncompilable.clear();
      uncompilable.set(definitionHash, message);
    }
    throw cannotCompile(message);
  }
  throw invalidArguments(answer.instancePath, answer.message, answer.missingProperty);
}

/** Definitions whose input schema failed to compile, with why; at most {@link UNCOMPILABLE_MAX}. */
const uncompilable = new Map<string, string>();
const UNCOMPILABLE_MAX = 2000;

function cannotCompile(message: string): GatehouseError {
  return new GatehouseError("tool_unusable", "the tool's input schema cannot be compiled", {
    cause: new Error(message),
  });
}

function tooLarge(over: "bytes" | "depth", limits: ArgumentLimits, server?: string): GatehouseError {
  const byServer =
    server === undefined
      ? "the most a call may send"
      : `the most a call to ${server} may send (set by mcpServers.${server}.maxArgumentBytes in the config)`;
  return new GatehouseError(
    "invalid_arguments",
    over === "bytes"
      ? `arguments are over ${formatBytes(limits.maxBytes)} of JSON (${limits.maxBytes} bytes), ${byServer}`
      : `arguments are nested deeper than ${limits.maxDepth} levels, the most a call may send`,
  );
}

function tooManyOverruns(waitMs: number): GatehouseError {
  const minutes = Math.max(1, Math.ceil(waitMs / 60_000));
  const { max, windowMs } = OVERRUN_LIMITS;
  return new GatehouseError(
    "too_many_attempts",
    `checks of this requester's arguments took over ${CHECK_DEADLINE_MS} ms ${max} times in ${windowMs / 60_000} minutes: calls whose arguments need a full check are refused for ${minutes} more minute${minutes === 1 ? "" : "s"}`,
  );
}

/** The refusal naming the first bad field, the same whichever thread checked. */
function invalidArguments(instancePath: string, message: string, missingProperty?: unknown): GatehouseError {
  const where = instancePath ? `arguments${instancePath.replaceAll("/", ".")}` : "arguments";
  const extra = missingProperty !== undefined ? ` (missing ${String(missingProperty)})` : "";
  return new GatehouseError("invalid_arguments", `${where} ${message}${extra}`);
}

/**
 * By definition hash, once the worker has checked it: the schema's profile, and its main-thread
 * validator when it fits (step 2 above; null otherwise, so it is profiled only once).
 */
const local = new Map<string, { validate: ValidateFunction | null; profile: SchemaProfile }>();
// `addUsedSchema: false`: a schema's `$id` is not registered, so two definitions naming the same
// `$id` (one tool before and after a change) each compile, rather than the second failing.
const localAjv = new Ajv({
  strict: false,
  allErrors: false,
  validateSchema: false,
  logger: false,
  addUsedSchema: false,
});

/** Whether a schema's checks may ever run on the main thread (by its keywords and size alone). */
export function mainThreadSchema(schema: unknown): boolean {
  return fitsMainThread(schemaProfile(schema));
}

/** Whether these arguments would be checked against this schema on the main thread. */
export function checkedOnMainThread(schema: unknown, args: Record<string, unknown>): boolean {
  const profile = schemaProfile(schema);
  return fitsMainThread(profile) && cheapEnough(profile, measureArguments(args, ARGUMENT_LIMITS));
}

function fitsMainThread(profile: SchemaProfile): boolean {
  return profile.costly === null && profile.nodes <= LOCAL_SCHEMA_MAX_NODES;
}

function cheapEnough(profile: SchemaProfile, size: ArgumentsSize): boolean {
  return size.bytes <= LOCAL_MAX_BYTES && profile.nodes * size.bytes <= LOCAL_MAX_WORK;
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
  if (local.has(definitionHash)) return;
  const profile = schemaProfile(schema);
  let validate: ValidateFunction | null = null;
  if (fitsMainThread(profile)) {
    try {
      const { $schema: _ignored, ...rest } = (schema ?? {}) as Record<string, unknown>;
      validate = localAjv.compile(rest);
    } catch {
      // The worker compiled it; if this copy cannot, the worker keeps doing the checks.
    }
  }
  if (local.size >= LOCAL_CACHE_MAX) local.clear();
  local.set(definitionHash, { validate, profile });
}

/** Definitions remembered in {@link local}. */
const LOCAL_CACHE_MAX = 2000;

/**
 * The arguments as a call's row keeps them: as sent, unless they are over
 * {@link ARGUMENT_LIMITS} (such a call is refused): then a one-key object saying so, so that a
 * refused call's row cannot hold megabytes, nor nesting that breaks every later listing that
 * includes it (`JSON.stringify` of the view, the reviewer's page).
 */
export function recordedArguments(args: Record<string, unknown>): Record<string, unknown> {
  const over = measureArguments(args, ARGUMENT_LIMITS).over;
  if (!over) return args;
  return { "(not kept)": tooLarge(over, ARGUMENT_LIMITS).message };
}

/** Digest of a call's exact arguments, independent of key order. */
export function argumentsDigest(args: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(args)).digest("hex");
}
