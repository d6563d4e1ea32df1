import "server-only";
import { createHash } from "node:crypto";
import type { JsonSchemaType, Tool } from "@modelcontextprotocol/server";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/server/validators/ajv";
import { Ajv } from "ajv";
import { canonicalJson } from "../catalogue/definition";

/**
 * Which tool schemas may be served to agents on the 2025 protocol. The v1 TypeScript SDK client
 * (`@modelcontextprotocol/sdk`: Claude Desktop, mcp-remote, most TS agents) checks the whole
 * `tools/list` result against its zod shape and compiles every output schema with Ajv inside
 * `listTools()`: one tool failing either makes the whole list throw, and the agent sees no tool
 * at all. A 2026-07-28 upstream's wire schema is looser (`required: "x"` passes it), and a
 * schema of either era can be sound in shape yet not compile (`{type: "nonsense"}`), so every
 * schema is checked here before it is served.
 */

/** Verdicts kept, by the hash of the schema's canonical JSON; the oldest goes first. */
export const VERDICT_CACHE_MAX = 2000;

/**
 * Most values (objects, arrays and scalars, counted in the JSON) a schema may have and still be
 * compiled here. Ajv's compiling runs on the main thread and grows faster than the schema
 * (cold, on this machine: 6,000 values ~0.6 s, 60,000 ~2.6 s); a client compiles a served output
 * schema as slowly, in its `listTools()`. Real tool schemas are a few hundred values.
 */
export const SCHEMA_MAX_VALUES = 10_000;

/** The JSON Schema root MCP requires of input and output schemas. */
type ObjectSchema = Tool["inputSchema"];

interface Verdict {
  /** Why a 2025 client cannot take it (shape, size or compiling), or null when it can. */
  problem: string | null;
  /** An `$id` below the root names a schema resource (see {@link isServableOutputSchema}). */
  embedsId: boolean;
}

const verdicts = new Map<string, Verdict>();

/**
 * Whether `schema` may be served as a tool's `inputSchema` to 2025 clients: see
 * {@link schemaProblem}. One that may not is served as `{type: "object"}`; calls are still checked
 * against the real one (server/calls/arguments.ts), which refuses them when it does not compile.
 */
export function isServableInputSchema(schema: unknown): schema is ObjectSchema {
  return verdictOf(schema).problem === null;
}

/**
 * Whether `schema` may be served as a tool's `outputSchema` to 2025 clients: {@link schemaProblem}
 * says nothing against it, and it embeds no schema resource by `$id` below its root. The client
 * compiles every output schema it is served into one Ajv instance, kept for the client's
 * lifetime; an embedded resource's id is the one way schemas that compile alone fail together:
 * one tool's `{$id: "X"}` and another's `{properties: {a: {$id: "X", ...}}}` make Ajv throw
 * "resolves to more than one schema", whichever tool that comes from. Root ids cannot clash so:
 * the client reuses the schema it already has under that id.
 */
export function isServableOutputSchema(schema: unknown): schema is ObjectSchema {
  const verdict = verdictOf(schema);
  return verdict.problem === null && !verdict.embedsId;
}

/**
 * Why `schema` cannot be served to a 2025 client, or null when it can: it must be an object
 * with `type: "object"`, `properties` absent or an object whose every value is an object (the
 * v1 zod shape refuses even the boolean schemas JSON Schema allows there), `required` absent or
 * an array of strings, at most {@link SCHEMA_MAX_VALUES} values, and compile as the v1 client
 * compiles an output schema. Verdicts are cached by the schema's canonical JSON (at most
 * {@link VERDICT_CACHE_MAX}), so each schema is compiled once while it is listed.
 */
export function schemaProblem(schema: unknown): string | null {
  return verdictOf(schema).problem;
}

function verdictOf(schema: unknown): Verdict {
  const shape = shapeProblem(schema);
  if (shape !== null) return { problem: shape, embedsId: false };
  let key: string;
  try {
    key = createHash("sha256").update(canonicalJson(schema)).digest("hex");
  } catch {
    // Nested past what recursion reaches: no client could take it either.
    return { problem: "the schema is nested too deeply", embedsId: false };
  }
  const known = verdicts.get(key);
  if (known) return known;
  const verdict = judge(schema as ObjectSchema);
  if (verdicts.size >= VERDICT_CACHE_MAX) {
    const oldest = verdicts.keys().next().value;
    if (oldest !== undefined) verdicts.delete(oldest);
  }
  verdicts.set(key, verdict);
  return verdict;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** What the v1 SDK's zod shape of `inputSchema`/`outputSchema` refuses. */
function shapeProblem(schema: unknown): string | null {
  if (!isRecord(schema)) return "the schema is not an object";
  if (schema.type !== "object") return 'the schema\'s type is not "object"';
  const { properties, required } = schema;
  if (properties !== undefined) {
    if (!isRecord(properties)) return "properties is not an object";
    // zod's check is `typeof v === "object"` and not null: arrays pass it (and Ajv takes them).
    const bad = Object.entries(properties).find(([, v]) => v === null || typeof v !== "object");
    if (bad) return `property ${JSON.stringify(bad[0])} is not a schema object`;
  }
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((r) => typeof r === "string")) {
      return "required is not an array of strings";
    }
  }
  return null;
}

function judge(schema: ObjectSchema): Verdict {
  const walked = walk(schema);
  if (walked.values > SCHEMA_MAX_VALUES) {
    return { problem: `the schema has over ${SCHEMA_MAX_VALUES} values`, embedsId: walked.embedsId };
  }
  try {
    // The v1 client's own path (`getValidator`: a schema whose root `$id` it already has is not
    // compiled again; SDK v2's validator, handed an instance, takes the same path) on a fresh
    // instance, as a client meets the schema in its first list.
    new AjvJsonSchemaValidator(clientAjv()).getValidator(schema as JsonSchemaType);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return { problem: `the schema does not compile: ${why}`, embedsId: walked.embedsId };
  }
  return { problem: null, embedsId: walked.embedsId };
}

/**
 * An Ajv instance with the options the v1 client gives its own (`createDefaultAjvInstance` in
 * `@modelcontextprotocol/sdk/validation/ajv`): `strict: false` is theirs, and what decides which
 * schemas compile. Two differences, neither changing what compiles: no logger (Ajv's default
 * writes a warning to the console for each unknown `format`), and without `ajv-formats`, whose
 * formats are only applied when validating (none is asynchronous, the one way a format fails a
 * compile).
 */
function clientAjv(): Ajv {
  return new Ajv({
    strict: false,
    validateFormats: true,
    validateSchema: false,
    allErrors: true,
    logger: false,
  });
}

/** The SEP-2243 keyword that asks a 2026-07-28 client to copy an argument into a header. */
const PARAM_HEADER_KEYWORD = "x-mcp-header";

/**
 * `schema` without its `x-mcp-header` declarations (SEP-2243), on properties reached through
 * `properties` from the root, the one place they count; `schema` itself when it has none. A
 * client that sees one sends the argument in an `Mcp-Param-*` header too, and the server it
 * talks to MUST check that header against the body, refusing a mismatch. Over `/mcp` that
 * server is Gatehouse, which checks no such header, so it declares none. Not mutated; recursion
 * only as deep as a servable schema's canonical JSON already went.
 */
export function withoutParamHeaders<T>(schema: T): T {
  if (!isRecord(schema) || !isRecord(schema.properties)) return schema;
  let changed = false;
  const properties: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    let served = withoutParamHeaders(property);
    if (isRecord(served) && PARAM_HEADER_KEYWORD in served) {
      const { [PARAM_HEADER_KEYWORD]: _declared, ...rest } = served;
      served = rest;
    }
    if (served !== property) changed = true;
    properties[name] = served;
  }
  return changed ? ({ ...schema, properties } as T) : schema;
}

/** Keywords whose values are data, not subschemas: an `$id` in them names nothing. */
const DATA_KEYWORDS = new Set(["const", "enum", "default", "examples"]);

/** Keywords whose value maps names (of properties, definitions, ...) to subschemas. */
const SCHEMA_MAP_KEYWORDS = new Set([
  "properties",
  "patternProperties",
  "$defs",
  "definitions",
  "dependentSchemas",
  "dependencies",
]);

/**
 * The values in `schema` (the walk stops past {@link SCHEMA_MAX_VALUES}; data keywords' values
 * count as one each, Ajv only refers to them), and whether an `$id` below the root names a
 * resource (anything but a plain `#fragment`). Without recursion: schemas can be deep.
 */
function walk(schema: ObjectSchema): { values: number; embedsId: boolean } {
  let values = 0;
  let embedsId = false;
  // A map's entries are subschemas whatever their names: a property may be called "enum".
  const stack: { v: unknown; map: boolean; root: boolean }[] = [{ v: schema, map: false, root: true }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    values++;
    if (values > SCHEMA_MAX_VALUES) break;
    const { v, map, root } = top;
    if (Array.isArray(v)) {
      for (const child of v) stack.push({ v: child, map: false, root: false });
    } else if (map && isRecord(v)) {
      for (const child of Object.values(v)) stack.push({ v: child, map: false, root: false });
    } else if (isRecord(v)) {
      if (!root && typeof v.$id === "string" && !v.$id.startsWith("#")) embedsId = true;
      for (const [key, child] of Object.entries(v)) {
        if (DATA_KEYWORDS.has(key)) values++;
        else stack.push({ v: child, map: SCHEMA_MAP_KEYWORDS.has(key), root: false });
      }
    }
  }
  return { values, embedsId };
}
