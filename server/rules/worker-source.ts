import "server-only";
import { WHEN_ENV_SOURCE } from "../config/rule-when";

/**
 * The evaluator worker (CommonJS, run with `eval: true`): loads `@bufbuild/cel` from the app's
 * node_modules (`workerData.base`), says `{type: "ready"}`, then answers each
 * `{id, when, tool, agent, agentSet, args}` with `{id, kind: "true" | "false"}` or
 * `{id, kind: "error", code, key?, gave?}` (see `WhenErrorCode` in evaluator.ts).
 *
 * Each distinct condition is parsed and planned once. Arguments arrive as plain JSON values and
 * become CEL values here, off the main thread: objects become maps, arrays lists, whole numbers
 * ints (so `args.n + 1` works), other numbers doubles. The environment is built from
 * {@link WHEN_ENV_SOURCE}, the very text config validation checks conditions with.
 *
 * Errors leave the worker as a code, never as CEL's message: those quote values ("field not
 * found: <the key an argument named>", "index 12345 out of bounds", a pattern that does not
 * compile), and an error's explanation goes to audit rows and reviewers. The one name that may
 * leave is a missing key's, and only when that key is a constant of the condition (`args.sql`,
 * `args['sql']`), which the owner wrote, not the caller.
 */
export const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createRequire } = require("node:module");
const load = createRequire(workerData.base);
const cel = load("@bufbuild/cel");
const { env } = (function (cel, ext, re2) {${WHEN_ENV_SOURCE}})(cel, load("@bufbuild/cel/ext"), load("@bufbuild/re2"));
const plans = new Map();
const KEY_MAX = 64;

/** Field names and constants of the condition: the keys an error may name. */
function constantsOf(expr, into) {
  const k = expr && expr.exprKind;
  if (!k) return into;
  const v = k.value;
  switch (k.case) {
    case "constExpr":
      if (v.constantKind.case === "stringValue") into.add(v.constantKind.value);
      else if (typeof v.constantKind.value === "bigint") into.add(String(v.constantKind.value));
      break;
    case "selectExpr":
      into.add(v.field);
      constantsOf(v.operand, into);
      break;
    case "callExpr":
      constantsOf(v.target, into);
      for (const a of v.args) constantsOf(a, into);
      break;
    case "listExpr":
      for (const e of v.elements) constantsOf(e, into);
      break;
    case "structExpr":
      for (const e of v.entries) {
        if (e.keyKind.case === "mapKey") constantsOf(e.keyKind.value, into);
        constantsOf(e.value, into);
      }
      break;
    case "comprehensionExpr":
      for (const e of [v.iterRange, v.accuInit, v.loopCondition, v.loopStep, v.result]) constantsOf(e, into);
      break;
  }
  return into;
}

/** CEL's error messages, by what went wrong; the first that matches decides. */
const CODES = [
  [/^field not found: /, "missing_key"],
  [/^no such key/, "missing_key"],
  [/^index .* out of bounds/, "missing_key"],
  [/^type conversion error|overflow during type conversion|^Failed to parse (timestamp|duration)|^Unable to convert|^Cannot convert/, "not_converted"],
  [/^found no matching overload|^type mismatch|^unsupported key type|^no such overload/, "wrong_type"],
  [/overflow|divide by zero|modulus by zero|out of range/, "out_of_range"],
  [/^error parsing regexp/, "bad_pattern"],
];

function codeOf(message) {
  for (const [pattern, code] of CODES) if (pattern.test(message)) return code;
  return "failed";
}
function errorOf(err, constants) {
  const message = String((err && err.message) || err);
  if (/call stack/i.test(message)) return { kind: "error", code: "too_deep" };
  const code = codeOf(message);
  const missing = /^field not found: ([\\s\\S]*)$/.exec(message);
  const key = missing && missing[1];
  if (code === "missing_key" && key && key.length <= KEY_MAX && constants && constants.has(key)) {
    return { kind: "error", code, key };
  }
  return { kind: "error", code };
}
function compile(source) {
  let compiled = plans.get(source);
  if (compiled) return compiled;
  try {
    const parsed = cel.parse(source);
    compiled = { run: cel.plan(env, parsed), constants: constantsOf(parsed.expr, new Set()) };
  } catch (err) {
    compiled = { error: errorOf(err, null) };
  }
  if (plans.size >= 1000) plans.clear();
  plans.set(source, compiled);
  return compiled;
}
function toCel(value) {
  if (Array.isArray(value)) return value.map(toCel);
  if (value !== null && typeof value === "object") {
    const map = new Map();
    for (const key of Object.keys(value)) map.set(key, toCel(value[key]));
    return map;
  }
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  return value;
}
/** What a result that is not a bool is, in words from a fixed list. */
function kindOf(value) {
  if (value === null) return "null";
  if (typeof value === "bigint") return "an int";
  if (typeof value === "number") return "a double";
  if (typeof value === "string") return "a string";
  if (value instanceof Uint8Array) return "bytes";
  if (Array.isArray(value) || cel.isCelList(value)) return "a list";
  if (value instanceof Map || cel.isCelMap(value)) return "a map";
  if (cel.isCelUint(value)) return "a uint";
  return "a value of another type";
}
function evaluate(m) {
  const compiled = compile(m.when);
  if (compiled.error) return compiled.error;
  // CEL resolves the qualified name "agent.set" before a field of "agent", so both are variables.
  const result = compiled.run({ args: toCel(m.args), tool: m.tool, agent: m.agent, "agent.set": m.agentSet });
  if (cel.isCelError(result)) return errorOf(result, compiled.constants);
  if (typeof result === "boolean") return { kind: result ? "true" : "false" };
  return { kind: "error", code: "not_bool", gave: kindOf(result) };
}
parentPort.on("message", (m) => {
  let answer;
  try {
    answer = evaluate(m);
  } catch (err) {
    answer = errorOf(err, null);
  }
  answer.id = m.id;
  parentPort.postMessage(answer);
});
parentPort.postMessage({ type: "ready" });
`;
