import "server-only";
import type { CelEnv } from "@bufbuild/cel";
import * as cel from "@bufbuild/cel";
import { parse, plan } from "@bufbuild/cel";
import * as celExt from "@bufbuild/cel/ext";
import * as re2 from "@bufbuild/re2";
import { closestKey } from "./readers";

/**
 * The start-time check of one rule's `when` (PRODUCT.md §11): bounded, parsed, and every name it
 * uses known. Evaluation happens elsewhere (server/rules, in a worker with a deadline); this
 * only makes sure a typo stops the start instead of failing closed on every call.
 *
 * `@bufbuild/cel` 0.6.1 has no usable type checker (its `Checker` handles constants and
 * identifiers only and is not exported), so names are checked by walking the parsed tree:
 * identifiers must be a variable, a comprehension's own variable or a type name, and every
 * function must exist in the environment the evaluator uses. Argument types are not checked —
 * a wrong type is an evaluation error, which fails closed.
 */

/** Bounds of `when`, checked before parsing so parsing stays cheap. */
export const WHEN_LIMITS = {
  /** Characters of one condition. */
  maxChars: 2000,
  /** Depth of `(`, `[` and `{` outside string literals. */
  maxNesting: 32,
} as const;

/** The variables a condition sees. */
const WHEN_VARIABLES = ["args", "tool", "agent"] as const;

/**
 * The environment conditions are checked and evaluated in, as the body of a function of
 * `(cel, ext, re2)` (the modules `@bufbuild/cel`, `@bufbuild/cel/ext`, `@bufbuild/re2`) that
 * returns `{env, regex}`. It is text because the evaluator's worker is eval'd source that cannot
 * import this app's modules: the worker splices in this very text and start-time checks compile
 * it here, so the two cannot drift.
 *
 * The standard library plus the `strings` extension, with three repairs:
 * - `int`, `uint` and `double` of a string parse strictly, as cel-go's strconv does (optional
 *   sign and decimal digits; `uint` without a sign; `double` with a fraction and exponent, and
 *   finite) and are an error for anything else. The library's own overloads use `BigInt()` and
 *   `Number()`, which read "" as 0, "0x10" as 16, and "1,500" as NaN, which compares false with
 *   everything: `double(args.amount) > 1000.0` would be false, and a deny rule would not apply.
 *   Unlike cel-go, "NaN", "Infinity" and hex floats are refused too, for the same reason.
 * - `matches(text, pattern)`, the receiver-less form cel-spec defines, which the library lacks.
 * - compiled patterns are kept (at most 100), as most are constants of the condition.
 * No error message carries the value converted: messages can reach audit rows.
 */
// biome-ignore lint/complexity/noUselessStringRaw: it is source code; a backslash added later must reach it as written.
export const WHEN_ENV_SOURCE = String.raw`
const { CelScalar, celFunc, celUint } = cel;
const { STRING, INT, UINT, DOUBLE, BOOL } = CelScalar;
const INT_TEXT = /^[+-]?[0-9]+$/;
const UINT_TEXT = /^[0-9]+$/;
const DOUBLE_TEXT = /^[+-]?(?:[0-9]+(?:[.][0-9]*)?|[.][0-9]+)(?:[eE][+-]?[0-9]+)?$/;
const MIN_INT = -(2n ** 63n);
const MAX_INT = 2n ** 63n - 1n;
const MAX_UINT = 2n ** 64n - 1n;
function refused(type) {
  return new Error("type conversion error from string to " + type);
}
function toInt(text) {
  const n = INT_TEXT.test(text) ? BigInt(text) : null;
  if (n === null || n < MIN_INT || n > MAX_INT) throw refused("int");
  return n;
}
function toUint(text) {
  const n = UINT_TEXT.test(text) ? BigInt(text) : null;
  if (n === null || n > MAX_UINT) throw refused("uint");
  return celUint(n);
}
function toDouble(text) {
  const n = DOUBLE_TEXT.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(n)) throw refused("double");
  return n;
}
const patterns = new Map();
function regex(pattern) {
  let compiled = patterns.get(pattern);
  if (compiled === undefined) {
    compiled = re2.RE2JS.compile(pattern);
    if (patterns.size >= 100) patterns.clear();
    patterns.set(pattern, compiled);
  }
  return compiled;
}
const funcs = [
  ...ext.strings,
  celFunc("int", [STRING], INT, toInt),
  celFunc("uint", [STRING], UINT, toUint),
  celFunc("double", [STRING], DOUBLE, toDouble),
  celFunc("matches", [STRING, STRING], BOOL, (text, pattern) => regex(pattern).test(text)),
];
return { env: cel.celEnv({ funcs, re2: { compile: regex } }), regex };
`;

type WhenEnv = { env: CelEnv; regex(pattern: string): unknown };

// Our own constant text (above), never input: the one way to share it with the worker.
const { env, regex } = new Function("cel", "ext", "re2", WHEN_ENV_SOURCE)(cel, celExt, re2) as WhenEnv;

type Expr = ReturnType<typeof parse>["expr"];
type Place = { line?: number; column?: number };

/** What is wrong with a condition; `column` (1-based, on `line`) when a place is known. */
export interface WhenProblem {
  kind: "length" | "nesting" | "syntax" | "name" | "constant" | "pattern";
  message: string;
  /** How to put it right, when the message alone does not say. */
  fix?: string;
  line?: number;
  column?: number;
}

/** Identifiers that name types (`type(x) == int`), as the evaluator resolves them. */
const TYPE_NAMES = new Set([
  "int",
  "uint",
  "double",
  "bool",
  "string",
  "bytes",
  "list",
  "map",
  "null_type",
  "type",
]);

/** Calls the planner handles itself rather than through the function table. */
const SPECIAL_CALLS = new Set([
  "_[_]",
  "_[?_]",
  "_?._",
  "_?_:_",
  "_&&_",
  "_||_",
  "@not_strictly_false",
  "__not_strictly_false__",
]);

/** Macros, expanded by the parser (their names never reach the tree, but typos are suggested against them). */
const MACROS = ["has", "all", "exists", "exists_one", "map", "filter"];

/** Every function and method name of {@link env}, for "did you mean". */
const FUNCTION_NAMES = [
  ...new Set([...[...env.funcs].map((f) => f.name).filter((n) => /^[A-Za-z]/.test(n)), ...MACROS]),
];

/** Nesting without brackets (thousands of unary or chained operators) can still exhaust the stack. */
const TOO_DEEP: WhenProblem = {
  kind: "nesting",
  message: "nests too deeply to be read; simplify it or split the rule in two",
};

/** The first problem of `source`, or null when it parses and every name in it is known. */
export function checkWhen(source: string): WhenProblem | null {
  if (source.length > WHEN_LIMITS.maxChars) {
    return {
      kind: "length",
      message: `is ${source.length} characters long; at most ${WHEN_LIMITS.maxChars} are allowed, so shorten it or split the rule in two`,
    };
  }
  const depth = bracketDepth(source);
  if (depth > WHEN_LIMITS.maxNesting) {
    return {
      kind: "nesting",
      message: `nests brackets ${depth} deep; at most ${WHEN_LIMITS.maxNesting} levels of (, [ and { are allowed`,
    };
  }
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (err) {
    return syntaxProblem(err);
  }
  const positions = parsed.sourceInfo?.positions ?? {};
  const at = (e: Expr) => place(source, positions[String(e.id)]);
  const top = parsed.expr.exprKind;
  if (top.case === "constExpr" && top.value.constantKind.case !== "boolValue") {
    return {
      kind: "constant",
      message: "is a constant, not a condition; write an expression that gives true or false",
    };
  }
  if (top.case === "listExpr" || top.case === "structExpr") {
    return {
      kind: "constant",
      message: `builds a ${top.case === "listExpr" ? "list" : "map"}, not a condition; write an expression that gives true or false`,
    };
  }
  let problem: WhenProblem | null;
  try {
    problem = firstProblem(parsed.expr, new Set(), at);
    // The planner refuses a few shapes the parser accepts (e.g. field keys in map literals).
    if (problem === null) plan(env, parsed);
  } catch (err) {
    return err instanceof RangeError ? TOO_DEEP : { kind: "syntax", message: messageOf(err) };
  }
  return problem;
}

/** The deepest nesting of (, [ and { outside string literals and comments. */
function bracketDepth(source: string): number {
  let depth = 0;
  let max = 0;
  let i = 0;
  while (i < source.length) {
    const c = source[i] ?? "";
    if (c === "/" && source[i + 1] === "/") {
      const end = source.indexOf("\n", i);
      i = end < 0 ? source.length : end + 1;
    } else if (c === "'" || c === '"') {
      const raw = /[rR]/.test(source[i - 1] ?? "") && !/[A-Za-z0-9_]/.test(source[i - 2] ?? "");
      i = skipString(source, i, raw);
    } else {
      if (c === "(" || c === "[" || c === "{") max = Math.max(max, ++depth);
      else if ((c === ")" || c === "]" || c === "}") && depth > 0) depth--;
      i++;
    }
  }
  return max;
}

/** The index after the string literal opening at `start` (its end, if it is never closed). */
function skipString(source: string, start: number, raw: boolean): number {
  const q = source[start] ?? "";
  const triple = source.startsWith(q.repeat(3), start);
  const close = triple ? q.repeat(3) : q;
  let i = start + close.length;
  while (i < source.length) {
    if (!raw && source[i] === "\\") i += 2;
    else if (source.startsWith(close, i)) return i + close.length;
    else if (!triple && source[i] === "\n") return i;
    else i++;
  }
  return i;
}

function syntaxProblem(err: unknown): WhenProblem {
  if (err instanceof RangeError) return TOO_DEEP;
  const located = err as { rawMessage?: unknown; location?: { start?: { line?: number; column?: number } } };
  const start = located.location?.start;
  if (typeof located.rawMessage === "string" && start?.column !== undefined) {
    return {
      kind: "syntax",
      message: located.rawMessage,
      line: start.line ?? 1,
      column: start.column,
    };
  }
  return { kind: "syntax", message: messageOf(err) };
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/^syntax error: /, "").slice(0, 200);
}

function place(source: string, offset: number | undefined): Place {
  if (offset === undefined) return {};
  const before = source.slice(0, offset);
  const line = before.split("\n").length;
  return { line, column: offset - (before.lastIndexOf("\n") + 1) + 1 };
}

type Placer = (e: Expr) => Place;

/**
 * The first identifier or function in `e` that nothing defines, walking in source order, or a
 * `matches()` pattern that cannot mean what it says.
 */
function firstProblem(e: Expr, bound: ReadonlySet<string>, at: Placer): WhenProblem | null {
  const k = e.exprKind;
  switch (k.case) {
    case "identExpr": {
      const name = k.value.name;
      if (bound.has(name) || (WHEN_VARIABLES as readonly string[]).includes(name) || TYPE_NAMES.has(name)) {
        return null;
      }
      const close = closestKey(name, WHEN_VARIABLES);
      return {
        kind: "name",
        message: `unknown name ${JSON.stringify(name)}`,
        fix: `${close ? `did you mean ${JSON.stringify(close)}? ` : ""}A condition can use args (the call's arguments), tool, agent and agent.set`,
        ...at(e),
      };
    }
    case "selectExpr": {
      const qualified = qualifiedName(e);
      if (qualified !== null && env.registry.getMessage(qualified)) return null;
      // `agent` is a string; `agent.set` is a variable of its own (the token's tool set), and
      // nothing else is selected from it.
      const operand = k.value.operand?.exprKind;
      if (operand?.case === "identExpr" && operand.value.name === "agent" && !bound.has("agent")) {
        if (k.value.field === "set" && !k.value.testOnly) return null;
        return {
          kind: "name",
          message: `unknown name ${JSON.stringify(`agent.${k.value.field}`)}`,
          fix: 'did you mean "agent.set" (the agent\'s tool set, "" without one)? "agent" alone is its token name',
          ...at(e),
        };
      }
      return k.value.operand ? firstProblem(k.value.operand, bound, at) : null;
    }
    case "callExpr": {
      const call = k.value;
      const qualified = call.target ? qualifiedName(call.target) : null;
      const known =
        SPECIAL_CALLS.has(call.function) ||
        env.funcs.find(call.function) !== undefined ||
        (qualified !== null && env.funcs.find(`${qualified}.${call.function}`) !== undefined);
      if (!known) {
        const close = closestKey(call.function, FUNCTION_NAMES);
        return {
          kind: "name",
          message: `unknown function ${JSON.stringify(call.function)}`,
          fix: close
            ? `did you mean ${JSON.stringify(close)}?`
            : "see docs/RULES.md for the functions a condition can call",
          ...at(e),
        };
      }
      if (call.function === "matches") {
        // `text.matches(pattern)` or `matches(text, pattern)`.
        const pattern = call.target ? call.args[0] : call.args[1];
        const problem = pattern ? patternProblem(pattern) : null;
        if (problem && pattern) return { ...problem, ...at(pattern) };
      }
      if (qualified !== null && env.funcs.find(`${qualified}.${call.function}`)) {
        return firstOf(call.args, bound, at);
      }
      return firstOf(call.target ? [call.target, ...call.args] : call.args, bound, at);
    }
    case "listExpr":
      return firstOf(k.value.elements, bound, at);
    case "structExpr":
      return firstOf(
        k.value.entries.flatMap((entry) => [
          ...(entry.keyKind.case === "mapKey" ? [entry.keyKind.value] : []),
          ...(entry.value ? [entry.value] : []),
        ]),
        bound,
        at,
      );
    case "comprehensionExpr": {
      const c = k.value;
      const outer = firstOf([c.iterRange, c.accuInit], bound, at);
      if (outer) return outer;
      const inner = new Set([...bound, c.accuVar, c.iterVar, ...(c.iterVar2 ? [c.iterVar2] : [])]);
      return firstOf([c.loopCondition, c.loopStep, c.result], inner, at);
    }
    default:
      return null;
  }
}

/** Longest part of a pattern quoted in a message. */
const PATTERN_SHOWN = 60;

/**
 * What is wrong with a constant `matches()` pattern: one that does not compile would make the
 * condition an error on every call, and one holding a backspace would never match what it means.
 * A pattern computed from the arguments is only known at run time (and an error there fails closed).
 */
function patternProblem(e: Expr): Omit<WhenProblem, "line" | "column"> | null {
  const k = e.exprKind;
  if (k.case !== "constExpr" || k.value.constantKind.case !== "stringValue") return null;
  const pattern = k.value.constantKind.value;
  if (pattern.includes("\b")) {
    // JSON's "\\b" reaches CEL as '\b', which CEL reads as a backspace: a pattern that never
    // matches, and a deny rule that silently never applies.
    return {
      kind: "pattern",
      message: "the pattern given to matches() holds a backspace character",
      fix: "in a CEL string \\b is a backspace, not a word boundary; in gatehouse.json write \\\\\\\\b (CEL then reads \\\\b), or use a raw string: \"args.sql.matches(r'(?i)\\\\bdrop\\\\b')\"",
    };
  }
  try {
    regex(pattern);
    return null;
  } catch (err) {
    const why = (err instanceof Error ? err.message : String(err)).replace(/^error parsing regexp: /, "");
    const shown = pattern.length > PATTERN_SHOWN ? `${pattern.slice(0, PATTERN_SHOWN - 3)}...` : pattern;
    return {
      kind: "pattern",
      message: `the regular expression '${shown}' does not compile: ${why.slice(0, 200)}`,
    };
  }
}

function firstOf(
  list: readonly (Expr | undefined)[],
  bound: ReadonlySet<string>,
  at: Placer,
): WhenProblem | null {
  for (const e of list) {
    if (!e) continue;
    const problem = firstProblem(e, bound, at);
    if (problem) return problem;
  }
  return null;
}

/** `a.b.c` as written, when `e` is a chain of selects on an identifier; otherwise null. */
function qualifiedName(e: Expr): string | null {
  const k = e.exprKind;
  if (k.case === "identExpr") return k.value.name;
  if (k.case === "selectExpr" && !k.value.testOnly && k.value.operand) {
    const head = qualifiedName(k.value.operand);
    return head === null ? null : `${head}.${k.value.field}`;
  }
  return null;
}
