import "server-only";

/**
 * The evaluator worker (CommonJS, run with `eval: true`): loads `@bufbuild/cel` from the app's
 * node_modules (`workerData.base`), says `{type: "ready"}`, then answers each
 * `{id, when, tool, agent, args}` with `{id, kind: "true" | "false" | "error", message?}`.
 *
 * Each distinct condition is parsed and planned once. Arguments arrive as plain JSON values and
 * become CEL values here, off the main thread: objects become maps, arrays lists, whole numbers
 * ints (so `args.n + 1` works), other numbers doubles. The environment is the one config
 * validation checks names against (the standard library plus the `strings` extension).
 */
export const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createRequire } = require("node:module");
const load = createRequire(workerData.base);
const cel = load("@bufbuild/cel");
const { strings } = load("@bufbuild/cel/ext");
const env = cel.celEnv({ funcs: strings });
const plans = new Map();
const MESSAGE_MAX = 200;

function short(text) {
  const s = String(text);
  return s.length > MESSAGE_MAX ? s.slice(0, MESSAGE_MAX - 3) + "..." : s;
}
function failure(err) {
  const text = String((err && err.message) || err);
  return short(/call stack/i.test(text) ? "it nests too deeply" : text);
}
function compile(source) {
  let compiled = plans.get(source);
  if (compiled) return compiled;
  try {
    compiled = { run: cel.plan(env, cel.parse(source)) };
  } catch (err) {
    compiled = { error: failure(err) };
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
function kindOf(value) {
  if (value === null) return "null";
  if (typeof value === "bigint") return "an int";
  if (typeof value === "number") return "a double";
  if (typeof value === "string") return "a string";
  if (value instanceof Uint8Array) return "bytes";
  if (Array.isArray(value) || cel.isCelList(value)) return "a list";
  if (value instanceof Map || cel.isCelMap(value)) return "a map";
  if (cel.isCelUint(value)) return "a uint";
  return "a value that is not a bool";
}
function evaluate(m) {
  const compiled = compile(m.when);
  if (compiled.error) return { kind: "error", message: compiled.error };
  const result = compiled.run({ args: toCel(m.args), tool: m.tool, agent: m.agent });
  if (cel.isCelError(result)) return { kind: "error", message: short(result.message) };
  if (typeof result === "boolean") return { kind: result ? "true" : "false" };
  return { kind: "error", message: "it gave " + kindOf(result) + ", not true or false" };
}
parentPort.on("message", (m) => {
  let answer;
  try {
    answer = evaluate(m);
  } catch (err) {
    answer = { kind: "error", message: failure(err) };
  }
  answer.id = m.id;
  parentPort.postMessage(answer);
});
parentPort.postMessage({ type: "ready" });
`;
