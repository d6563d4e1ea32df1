import "server-only";
import { CreateTokenBody, UpdateTokenBody } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { createToken, listTokens, setTokenToolSet } from "../auth/tokens";
import { configPathFromEnv } from "../config";
import type { Db } from "../store/db";
import { configOrIssues, optionValue } from "./args";

/**
 * `token create NAME [--tool-set SET]`, `token set NAME --tool-set SET | --no-tool-set` and
 * `token list`. A set is checked against the configuration's `toolSets` (GATEHOUSE_CONFIG, as the
 * server reads it). A move made here is judged on the token's next request; sessions open on a
 * running server are not told (an owner's move on Settings tells them).
 */

type WithStore = <T>(fn: (db: Db) => Promise<T>) => Promise<T>;

/** The configuration's set names, or null after printing why the file cannot be used. */
function knownSets(): string[] | null {
  return configOrIssues(configPathFromEnv())?.toolSets.map((s) => s.name) ?? null;
}

export async function tokenCreate(rest: string[], usage: string, withStore: WithStore): Promise<number> {
  const name = rest[0];
  if (!name || name.startsWith("--"))
    throw new GatehouseError("bad_request", `token create needs NAME\n${usage}`);
  const toolSet = optionValue(rest, "--tool-set");
  if (rest.includes("--tool-set") && toolSet === undefined)
    throw new GatehouseError("bad_request", `--tool-set needs a SET\n${usage}`);
  const parsed = CreateTokenBody.safeParse({ name, toolSet });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new GatehouseError(
      "bad_request",
      `${issue?.path.join(".") || "name"}: ${issue?.message ?? "invalid"}`,
    );
  }
  const sets = toolSet === undefined ? [] : knownSets();
  if (sets === null) return 1;
  const { secret } = await withStore((db) =>
    createToken(db, { name, actor: "cli", toolSet: toolSet ?? null, knownSets: sets }),
  );
  const inSet = toolSet === undefined ? "" : ` in tool set ${toolSet}`;
  process.stdout.write(`created agent token ${name}${inSet}; it is shown once, keep it now:\n${secret}\n`);
  return 0;
}

export async function tokenSet(rest: string[], usage: string, withStore: WithStore): Promise<number> {
  const name = rest[0];
  const toolSet = optionValue(rest, "--tool-set");
  const none = rest.includes("--no-tool-set");
  if (!name || name.startsWith("--") || (toolSet === undefined) === !none) {
    throw new GatehouseError(
      "bad_request",
      `token set needs NAME and either --tool-set SET or --no-tool-set\n${usage}`,
    );
  }
  const parsed = UpdateTokenBody.safeParse({ toolSet: toolSet ?? null });
  if (!parsed.success)
    throw new GatehouseError("bad_request", `--tool-set: ${parsed.error.issues[0]?.message}`);
  const sets = none ? [] : knownSets();
  if (sets === null) return 1;
  const token = await withStore((db) =>
    setTokenToolSet(db, { name, toolSet: parsed.data.toolSet, actor: "cli", knownSets: sets }),
  );
  process.stdout.write(
    `agent token ${token.name}: ${token.toolSet === null ? "no tool set (every enabled tool)" : `tool set ${token.toolSet}`}\n`,
  );
  return 0;
}

export async function tokenList(withStore: WithStore): Promise<number> {
  const tokens = await withStore((db) => listTokens(db));
  if (tokens.length === 0) {
    process.stdout.write("no agent tokens\n");
    return 0;
  }
  const width = Math.max(...tokens.map((t) => t.name.length), 4);
  process.stdout.write(`${"NAME".padEnd(width)}  ${"TOOL SET".padEnd(16)}  STATUS\n`);
  for (const t of tokens) {
    const status = t.revokedAt ? `revoked ${t.revokedAt}` : `active since ${t.createdAt}`;
    process.stdout.write(`${t.name.padEnd(width)}  ${(t.toolSet ?? "-").padEnd(16)}  ${status}\n`);
  }
  return 0;
}
