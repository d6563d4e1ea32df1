import "server-only";
import type {
  AnnotationFlip,
  DefinitionDiff,
  SchemaChange,
  TextDiffPart,
  ToolDefinitionView,
} from "@/lib/api-types";
import { canonicalJson } from "./definition";

/**
 * Before/after diffs of tool definitions (PRODUCT.md §5, "changed"): a word diff of the
 * description, a structural diff of the input and output schemas, and annotation flips spelled
 * out the way an owner reads them ("readOnlyHint: true → false"). Pure functions: the inputs are
 * untrusted and possibly huge, so every algorithm here has a bound on its work.
 */

/** Edit distance beyond which a finer diff gives up and a coarser one is tried. */
const MAX_EDITS = 500;
/** Tokens (words, spaces, punctuation) beyond which the word diff is not attempted. */
const MAX_WORD_TOKENS = 20_000;
/** Lines beyond which the line diff is not attempted either: the text is shown as replaced. */
const MAX_LINES = 5_000;

type Op = TextDiffPart["op"];

function same(a: unknown, b: unknown): boolean {
  return a === b || canonicalJson(a) === canonicalJson(b);
}

// ---------------------------------------------------------------------------------------------
// Text

/** Myers' O(ND) diff of two token lists; null when more than `maxEdits` edits would be needed. */
function myers(a: readonly string[], b: readonly string[], maxEdits: number): Op[] | null {
  const n = a.length;
  const m = b.length;
  const limit = Math.min(maxEdits, n + m);
  const off = limit + 1;
  const v = new Int32Array(2 * limit + 3);
  // trace[d] holds v for k in [-d-1, d+1] as it was before step d: O(D²) memory, not O(D·(N+M)).
  const trace: Int32Array[] = [];
  for (let d = 0; d <= limit; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && (v[off + k - 1] ?? 0) < (v[off + k + 1] ?? 0));
      let x = down ? (v[off + k + 1] ?? 0) : (v[off + k - 1] ?? 0) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(trace, d, n, m);
    }
  }
  return null;
}

function backtrack(trace: Int32Array[], edits: number, n: number, m: number): Op[] {
  const ops: Op[] = [];
  let x = n;
  let y = m;
  for (let d = edits; d > 0; d--) {
    const snap = trace[d] ?? new Int32Array(0);
    const at = (k: number) => snap[k + d + 1] ?? 0;
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push("same");
      x--;
      y--;
    }
    if (x === prevX) {
      ops.push("added");
      y--;
    } else {
      ops.push("removed");
      x--;
    }
  }
  while (x > 0 && y > 0) {
    ops.push("same");
    x--;
    y--;
  }
  return ops.reverse();
}

/** Diffs token lists after taking off their common prefix and suffix (the usual case: a small edit). */
function diffTokens(a: string[], b: string[], maxEdits: number): TextDiffPart[] | null {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const ops = myers(midA, midB, maxEdits);
  if (!ops) return null;
  const parts: TextDiffPart[] = [];
  const push = (op: Op, text: string) => {
    if (text === "") return;
    const last = parts[parts.length - 1];
    if (last && last.op === op) last.text += text;
    else parts.push({ op, text });
  };
  push("same", a.slice(0, start).join(""));
  let i = 0;
  let j = 0;
  for (const op of ops) {
    if (op === "same") {
      push("same", midA[i++] ?? "");
      j++;
    } else if (op === "removed") push("removed", midA[i++] ?? "");
    else push("added", midB[j++] ?? "");
  }
  push("same", a.slice(endA).join(""));
  return parts;
}

/**
 * Reads better: within a run of edits, removed text comes before added text, and a lone space
 * (or other whitespace) kept between two edits is folded into them, so "a b" → "x y" reads as
 * one replacement instead of four fragments.
 */
function tidy(parts: TextDiffPart[]): TextDiffPart[] {
  const out: TextDiffPart[] = [];
  let removed = "";
  let added = "";
  const flush = () => {
    if (removed) out.push({ op: "removed", text: removed });
    if (added) out.push({ op: "added", text: added });
    removed = "";
    added = "";
  };
  parts.forEach((part, i) => {
    if (part.op === "removed") removed += part.text;
    else if (part.op === "added") added += part.text;
    else {
      const between =
        (removed !== "" || added !== "") &&
        /^\s+$/.test(part.text) &&
        i + 1 < parts.length &&
        parts[i + 1]?.op !== "same";
      if (between) {
        removed += part.text;
        added += part.text;
      } else {
        flush();
        out.push({ ...part });
      }
    }
  });
  flush();
  return out;
}

const WORDS = /\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;
const WORD_CHAR = /[\p{L}\p{N}_]/u;

const isWordChar = (ch: string | undefined) => ch !== undefined && WORD_CHAR.test(ch);
const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/**
 * The common prefix and suffix of two texts in characters, shortened so that neither cuts a word
 * or a surrogate pair in two: the middles are what the word diff has to look at.
 */
function commonEnds(a: string, b: string): { prefix: number; suffix: number } {
  const shorter = Math.min(a.length, b.length);
  let prefix = 0;
  while (prefix < shorter && a.charCodeAt(prefix) === b.charCodeAt(prefix)) prefix++;
  while (prefix > 0 && isWordChar(a[prefix - 1]) && (isWordChar(a[prefix]) || isWordChar(b[prefix])))
    prefix--;
  if (prefix > 0 && isHighSurrogate(a.charCodeAt(prefix - 1))) prefix--;
  let suffix = 0;
  while (
    suffix < shorter - prefix &&
    a.charCodeAt(a.length - 1 - suffix) === b.charCodeAt(b.length - 1 - suffix)
  ) {
    suffix++;
  }
  while (
    suffix > 0 &&
    isWordChar(a[a.length - suffix]) &&
    (isWordChar(a[a.length - suffix - 1]) || isWordChar(b[b.length - suffix - 1]))
  ) {
    suffix--;
  }
  if (suffix > 0 && isLowSurrogate(a.charCodeAt(a.length - suffix))) suffix--;
  return { prefix, suffix };
}

/** How good a place the boundary between `one` and `two` is for an edit to start or end. */
function boundaryScore(one: string, two: string): number {
  if (one === "" || two === "") return 6;
  const before = one[one.length - 1] ?? "";
  const after = two[0] ?? "";
  if (/\n\r?\n$/.test(one) || /^\r?\n\r?\n/.test(two)) return 5;
  if (before === "\n" || after === "\n") return 4;
  if (/[.!?]\s$/.test(one.slice(-2))) return 3;
  if (/\s/.test(before) || /\s/.test(after)) return 2;
  if (!isWordChar(before) || !isWordChar(after)) return 1;
  return 0;
}

/**
 * Slides each lone insertion or deletion that sits between two unchanged runs to where it reads
 * best: "line one\n[line two\n]line three" rather than "line one\nline [two\nline ]three".
 * Both texts stay the same; only where the edit is drawn moves.
 */
function alignEdits(parts: TextDiffPart[]): TextDiffPart[] {
  const out = parts.map((p) => ({ ...p }));
  for (let i = 1; i + 1 < out.length; i++) {
    const prev = out[i - 1];
    const edit = out[i];
    const next = out[i + 1];
    if (!prev || !edit || !next || prev.op !== "same" || next.op !== "same" || edit.op === "same") continue;
    let left = prev.text;
    let mid = edit.text;
    let right = next.text;
    // Slide as far left as the text allows, then walk right, keeping the best-scoring position.
    while (left !== "" && left[left.length - 1] === mid[mid.length - 1]) {
      const ch = left[left.length - 1] ?? "";
      left = left.slice(0, -1);
      mid = ch + mid.slice(0, -1);
      right = ch + right;
    }
    let best = { left, mid, right, score: boundaryScore(left, mid) + boundaryScore(mid, right) };
    while (right !== "" && mid[0] === right[0]) {
      const ch = right[0] ?? "";
      left += ch;
      mid = mid.slice(1) + ch;
      right = right.slice(1);
      const score = boundaryScore(left, mid) + boundaryScore(mid, right);
      if (score >= best.score) best = { left, mid, right, score };
    }
    prev.text = best.left;
    edit.text = best.mid;
    next.text = best.right;
  }
  return out.filter((p) => p.text !== "");
}

function merge(parts: TextDiffPart[]): TextDiffPart[] {
  const out: TextDiffPart[] = [];
  for (const part of parts) {
    const last = out[out.length - 1];
    if (last && last.op === part.op) last.text += part.text;
    else if (part.text !== "") out.push({ ...part });
  }
  return out;
}

/**
 * A word-level diff of two texts: words, runs of whitespace and single punctuation marks are
 * the units. A diff too large for that falls back to whole lines, and one too large even for
 * lines shows the old text removed and the new one added. Concatenating the parts that are not
 * `added` gives `before`; those not `removed`, `after`.
 */
export function diffText(before: string, after: string): TextDiffPart[] {
  if (before === after) return before === "" ? [] : [{ op: "same", text: before }];
  const { prefix, suffix } = commonEnds(before, after);
  const a = before.slice(prefix, before.length - suffix);
  const b = after.slice(prefix, after.length - suffix);
  const head: TextDiffPart = { op: "same", text: before.slice(0, prefix) };
  const tail: TextDiffPart = { op: "same", text: before.slice(before.length - suffix) };
  const wrap = (middle: TextDiffPart[]) => tidy(merge(alignEdits(merge([head, ...tidy(middle), tail]))));

  const wordsA = a.match(WORDS) ?? [];
  const wordsB = b.match(WORDS) ?? [];
  if (wordsA.length + wordsB.length <= MAX_WORD_TOKENS) {
    const words = diffTokens(wordsA, wordsB, MAX_EDITS);
    if (words) return wrap(words);
  }
  const linesA = a.split(/(?<=\n)/);
  const linesB = b.split(/(?<=\n)/);
  if (linesA.length + linesB.length <= MAX_LINES) {
    const lines = diffTokens(linesA, linesB, MAX_EDITS);
    if (lines) return wrap(lines);
  }
  return wrap([
    { op: "removed", text: a },
    { op: "added", text: b },
  ]);
}

// ---------------------------------------------------------------------------------------------
// Schemas

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isPrimitive(value: unknown): boolean {
  return value === null || typeof value !== "object";
}

/** `properties.path.type`, `anyOf[1]`, `properties["a.b"]`. */
function childPath(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  if (/^[A-Za-z_$][\w$-]*$/.test(key)) return parent === "" ? key : `${parent}.${key}`;
  return `${parent}[${JSON.stringify(key)}]`;
}

function walk(before: unknown, after: unknown, path: string, out: SchemaChange[]): void {
  if (same(before, after)) return;
  if (isPlainObject(before) && isPlainObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    for (const key of keys) {
      const inBefore = Object.hasOwn(before, key) && before[key] !== undefined;
      const inAfter = Object.hasOwn(after, key) && after[key] !== undefined;
      const at = childPath(path, key);
      if (!inBefore && inAfter) out.push({ path: at, kind: "added", after: after[key] });
      else if (inBefore && !inAfter) out.push({ path: at, kind: "removed", before: before[key] });
      else if (inBefore && inAfter) walk(before[key], after[key], at, out);
    }
    return;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    // Lists of plain values (`required`, `enum`, `type: [...]`) read best whole: ["a"] → ["a", "b"].
    if (before.every(isPrimitive) && after.every(isPrimitive)) {
      out.push({ path, kind: "changed", before, after });
      return;
    }
    const length = Math.max(before.length, after.length);
    for (let i = 0; i < length; i++) {
      const at = childPath(path, i);
      if (i >= before.length) out.push({ path: at, kind: "added", after: after[i] });
      else if (i >= after.length) out.push({ path: at, kind: "removed", before: before[i] });
      else walk(before[i], after[i], at, out);
    }
    return;
  }
  out.push({ path, kind: "changed", before, after });
}

/**
 * The structural difference of two JSON schemas (or any JSON): each added, removed or changed
 * path with its values, in key order. A schema that appears or disappears as a whole (`null`
 * before or after) is one change at path "".
 */
export function diffSchemas(before: unknown, after: unknown): SchemaChange[] {
  const absentBefore = before === null || before === undefined;
  const absentAfter = after === null || after === undefined;
  if (absentBefore && absentAfter) return [];
  if (absentBefore) return [{ path: "", kind: "added", after }];
  if (absentAfter) return [{ path: "", kind: "removed", before }];
  const out: SchemaChange[] = [];
  walk(before, after, "", out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Annotations

/** The MCP hints in the order people care about them; other keys (title, ...) follow by name. */
const HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/**
 * Whether a value of a hint means the riskier reading. Absent hints take the MCP defaults:
 * readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true.
 */
const RISKY: Record<string, (value: unknown) => boolean> = {
  readOnlyHint: (v) => v !== true,
  destructiveHint: (v) => v !== false,
  idempotentHint: (v) => v !== true,
  openWorldHint: (v) => v !== false,
};

function showValue(value: unknown): string {
  if (value === undefined || value === null) return "(not set)";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/** Each annotation that differs, hints first; `riskier` when the new value reads as more dangerous. */
export function diffAnnotations(
  before: Record<string, unknown> | null,
  after: Record<string, unknown> | null,
): AnnotationFlip[] {
  const a = before ?? {};
  const b = after ?? {};
  const others = [...new Set([...Object.keys(a), ...Object.keys(b)])]
    .filter((k) => !HINTS.includes(k))
    .sort();
  const flips: AnnotationFlip[] = [];
  for (const key of [...HINTS, ...others]) {
    const was = Object.hasOwn(a, key) ? (a[key] ?? null) : null;
    const now = Object.hasOwn(b, key) ? (b[key] ?? null) : null;
    if (same(was, now)) continue;
    const risky = RISKY[key];
    flips.push({
      key,
      before: was,
      after: now,
      text: `${key}: ${showValue(was)} → ${showValue(now)}`,
      riskier: risky ? !risky(was) && risky(now) : false,
    });
  }
  return flips;
}

// ---------------------------------------------------------------------------------------------
// Definitions

/**
 * Everything that differs between two definitions of a tool: name, title, description (word
 * diff), input and output schema (structural), annotations (flips), icons, and a short summary
 * for lists. Equal definitions give an empty summary.
 */
export function diffDefinitions(before: ToolDefinitionView, after: ToolDefinitionView): DefinitionDiff {
  const name = before.name === after.name ? null : { before: before.name, after: after.name };
  const titleBefore = before.title ?? null;
  const titleAfter = after.title ?? null;
  const title = titleBefore === titleAfter ? null : { before: titleBefore, after: titleAfter };
  const icons = !same(before.icons ?? [], after.icons ?? []);
  const description =
    before.description === after.description ? null : diffText(before.description, after.description);
  const inputSchema = diffSchemas(before.inputSchema, after.inputSchema);
  const outputSchema = diffSchemas(before.outputSchema, after.outputSchema);
  const annotations = diffAnnotations(before.annotations, after.annotations);
  const summary: string[] = [];
  if (name) summary.push(`name: ${showValue(name.before)} → ${showValue(name.after)}`);
  if (title) summary.push(`title: ${showValue(title.before)} → ${showValue(title.after)}`);
  if (description) summary.push("description");
  if (inputSchema.length > 0) summary.push("input schema");
  if (outputSchema.length > 0) summary.push("output schema");
  for (const flip of annotations) summary.push(flip.text);
  if (icons) summary.push("icons");
  return {
    name,
    title,
    description,
    inputSchema,
    outputSchema,
    annotations,
    icons,
    summary,
    riskier: annotations.some((f) => f.riskier),
  };
}
