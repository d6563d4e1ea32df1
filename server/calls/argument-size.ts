import "server-only";

/**
 * How big a call's arguments are, and how costly a schema is to check, both measured without
 * recursion: arguments come from agents and schemas from tool servers, and a value nested a few
 * thousand levels deep overflows the stack of anything recursive (`JSON.stringify`, Ajv, a
 * canonical form), while `JSON.parse` reads a million levels without complaint.
 */

/** The bounds a call's arguments must keep before any schema check. */
export interface ArgumentLimits {
  /** Bytes of the arguments as JSON (UTF-8). */
  maxBytes: number;
  /** Levels of objects and arrays: `{}` is 1, `{"a":[1]}` is 2. */
  maxDepth: number;
}

/**
 * The default bounds: 1 MiB of JSON, 64 levels. A request body may carry 4 MiB
 * (`MAX_REQUEST_BODY_BYTES`), so arguments at their bound always fit in a request with room to
 * spare, and what is kept of a call (its row, the reviewer's page, a rule condition's view of it)
 * stays a quarter of what the edge lets in. 64 levels is far past any tool's schema and far short
 * of where recursive code runs out of stack (about 5,000 levels for `JSON.stringify` here).
 */
export const ARGUMENT_LIMITS: Readonly<ArgumentLimits> = { maxBytes: 1024 * 1024, maxDepth: 64 };

/** What {@link measureArguments} found. */
export interface ArgumentsSize {
  /** Bytes of JSON; counted up to the first bound passed. */
  bytes: number;
  /** Values (objects, arrays, strings, numbers, booleans, nulls); likewise. */
  nodes: number;
  /** Which bound the arguments pass, if any; measuring stopped there. */
  over: "bytes" | "depth" | null;
}

/**
 * Measures `value` as `JSON.stringify` would write it (UTF-8 bytes, values, depth), stopping as
 * soon as it passes a bound of `limits`, so the walk is at most linear in the bound, never in
 * what an agent sent beyond it (listing one object's or array's members aside). Values JSON cannot
 * hold count as `null`.
 */
export function measureArguments(value: unknown, limits: ArgumentLimits): ArgumentsSize {
  let bytes = 0;
  let nodes = 0;
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  for (let next = stack.pop(); next; next = stack.pop()) {
    nodes++;
    const v = next.value;
    if (v !== null && typeof v === "object") {
      const depth = next.depth + 1;
      if (depth > limits.maxDepth) return { bytes, nodes, over: "depth" };
      const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
      // Brackets and the commas between children; then each key with its quotes and colon.
      bytes += 2 + Math.max(0, children.length - 1);
      if (bytes > limits.maxBytes) return { bytes, nodes, over: "bytes" };
      if (!Array.isArray(v)) {
        for (const key of Object.keys(v)) {
          bytes += jsonBytes(key) + 1;
          if (bytes > limits.maxBytes) return { bytes, nodes, over: "bytes" };
        }
      }
      for (const child of children) stack.push({ value: child, depth });
    } else {
      bytes += jsonBytes(v);
      if (bytes > limits.maxBytes) return { bytes, nodes, over: "bytes" };
    }
  }
  return { bytes, nodes, over: null };
}

/** Bytes of a scalar's JSON; what JSON cannot hold (`undefined`, `NaN`) counts as `null`. */
function jsonBytes(v: unknown): number {
  if (typeof v === "string") return Buffer.byteLength(JSON.stringify(v));
  if (typeof v === "number") return Number.isFinite(v) ? String(v).length : 4;
  if (typeof v === "boolean") return v ? 4 : 5;
  return 4;
}

/**
 * Keywords whose cost is not bounded by the schema's size times the arguments' size: regular
 * expressions (`pattern`, `patternProperties`, and `format`, whose validators are regexes when
 * formats are loaded), `uniqueItems` (Ajv compares every pair of items unless it knows them to
 * be scalars), and references (`$ref` and its dynamic forms), which turn the schema into a graph
 * whose paths, and so Ajv's work, can grow exponentially with the arguments' depth
 * (`anyOf: [{items: {$ref: "#"}, …}, {items: {$ref: "#"}}]`).
 */
const COSTLY_KEYWORDS = new Set([
  "pattern",
  "patternProperties",
  "format",
  "uniqueItems",
  "$ref",
  "$dynamicRef",
  "$recursiveRef",
]);

/** What decides whether a schema's checks may run on the main thread. */
export interface SchemaProfile {
  /** Values in the schema's JSON (an `enum`'s values included: each is compared with the data). */
  nodes: number;
  /** The first costly keyword found, or null. A property of that name counts too (conservatively). */
  costly: string | null;
}

/** Profiles a schema (iteratively; stops at the first costly keyword). */
export function schemaProfile(schema: unknown): SchemaProfile {
  let nodes = 0;
  const stack: unknown[] = [schema];
  for (let i = stack.length; i > 0; i = stack.length) {
    const v = stack.pop();
    nodes++;
    if (Array.isArray(v)) {
      for (const child of v) stack.push(child);
    } else if (v !== null && typeof v === "object") {
      for (const [key, child] of Object.entries(v)) {
        if (COSTLY_KEYWORDS.has(key)) return { nodes, costly: key };
        stack.push(child);
      }
    }
  }
  return { nodes, costly: null };
}
