import "server-only";
import { createHash } from "node:crypto";
import { Ajv, type ValidateFunction } from "ajv";
import { GatehouseError } from "@/lib/errors";
import { canonicalJson } from "../catalogue/definition";

const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false });
/** Compiled validators by definition hash: a schema is compiled once per definition. */
const cache = new Map<string, ValidateFunction>();
const CACHE_MAX = 2000;

function validatorFor(definitionHash: string, schema: unknown): ValidateFunction {
  let v = cache.get(definitionHash);
  if (v) return v;
  const { $schema: _ignored, ...rest } = (schema ?? {}) as Record<string, unknown>;
  try {
    v = ajv.compile(rest);
  } catch (err) {
    throw new GatehouseError("tool_unusable", "the tool's input schema cannot be compiled", { cause: err });
  }
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(definitionHash, v);
  return v;
}

/** Throws `invalid_arguments` naming the first bad field when `args` do not match `schema`. */
export function checkArguments(definitionHash: string, schema: unknown, args: Record<string, unknown>): void {
  const validate = validatorFor(definitionHash, schema);
  if (validate(args)) return;
  const e = validate.errors?.[0];
  const where = e?.instancePath ? `arguments${e.instancePath.replaceAll("/", ".")}` : "arguments";
  const extra =
    e?.keyword === "required" && e.params && "missingProperty" in e.params
      ? ` (missing ${String(e.params.missingProperty)})`
      : "";
  throw new GatehouseError(
    "invalid_arguments",
    `${where} ${e?.message ?? "do not match the input schema"}${extra}`,
  );
}

/** Digest of a call's exact arguments, independent of key order. */
export function argumentsDigest(args: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(args)).digest("hex");
}
