import "server-only";
import { createHash } from "node:crypto";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";

/** The parts of a tool that an enabled tool is pinned to. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: unknown;
  outputSchema: unknown;
  annotations: Record<string, unknown> | null;
}

export function definitionOf(tool: Tool): ToolDefinition {
  return {
    name: tool.name,
    description: typeof tool.description === "string" ? tool.description : "",
    inputSchema: tool.inputSchema ?? null,
    outputSchema: tool.outputSchema ?? null,
    annotations: (tool.annotations as Record<string, unknown> | undefined) ?? null,
  };
}

/** JSON with object keys sorted at every level, so equal definitions hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function definitionHash(def: ToolDefinition): string {
  return createHash("sha256").update(canonicalJson(def)).digest("hex");
}

// C0/C1 controls except tab and newline, plus bidirectional overrides/isolates and zero-width
// joiners that can make text read differently from what it is.
const UNSAFE_CHARS =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
  /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u200B-\u200F\u202A-\u202E\u2066-\u2069\uFEFF]/g;

/** A description safe to show: unsafe characters removed, capped at `maxChars` (with "…"). */
export function cleanDescription(text: string, maxChars: number): string {
  const clean = text.replace(UNSAFE_CHARS, "");
  return clean.length > maxChars ? `${clean.slice(0, maxChars - 1)}…` : clean;
}

export const LOCAL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Why `<server>_<tool>` cannot be used as a local name, or null when it can. */
export function localNameProblem(server: string, tool: string): string | null {
  if (tool === "") return "the tool has an empty name";
  const localName = `${server}_${tool}`;
  if (localName.length > 64) return `the local name is ${localName.length} characters long (at most 64)`;
  if (!LOCAL_NAME.test(localName)) return "the tool name has characters outside A-Z, a-z, 0-9, '_' and '-'";
  return null;
}

/** Destructive unless the server says `readOnlyHint: true`. */
export function isReadOnly(def: ToolDefinition): boolean {
  return def.annotations?.readOnlyHint === true;
}
