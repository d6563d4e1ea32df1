import "server-only";
import type { CelEnv } from "@bufbuild/cel";
import { celEnv, parse, plan } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
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
export const WHEN_VARIABLES = ["args", "tool", "agent"] as const;

/** The environment conditions are parsed and evaluated against: the standard library plus `strings`. */
export function whenEnv(): CelEnv {
  return celEnv({ funcs: strings });
}

const env = whenEnv();

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
export function bracketDepth(source: string): number {
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
        fix: `${close ? `did you mean ${JSON.stringify(close)}? ` : ""}A condition can use args (the call's arguments), tool and agent`,
        ...at(e),
      };
    }
    case "selectExpr": {
      const qualified = qualifiedName(e);
      if (qualified !== null && env.registry.getMessage(qualified)) return null;
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
        const pattern = call.args.find((a) => backspaceIn(a));
        if (pattern) {
          // JSON's "\\b" reaches CEL as '\b', which CEL reads as a backspace: a pattern that never
          // matches, and a deny rule that silently never applies.
          return {
            kind: "pattern",
            message: "the pattern given to matches() holds a backspace character",
            fix: "in a CEL string \\b is a backspace, not a word boundary; in gatehouse.json write \\\\\\\\b (CEL then reads \\\\b), or use a raw string: \"args.sql.matches(r'(?i)\\\\bdrop\\\\b')\"",
            ...at(pattern),
          };
        }
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

/** A string constant holding U+0008 (what CEL makes of the `\b` a JSON file's "\\b" becomes). */
function backspaceIn(e: Expr): boolean {
  const k = e.exprKind;
  return (
    k.case === "constExpr" &&
    k.value.constantKind.case === "stringValue" &&
    k.value.constantKind.value.includes("\b")
  );
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
