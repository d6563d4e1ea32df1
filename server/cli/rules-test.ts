import { eq } from "drizzle-orm";
import { approvalsNeededText } from "@/lib/decision-text";
import { GatehouseError } from "@/lib/errors";
import { ToolSets } from "../agents";
import { type CallDecision, decideCall } from "../calls/decision";
import { RuleSet } from "../rules";
import { closeDb, type Db, first, openDbReadOnly, openStore, sqliteOf } from "../store/db";
import { storeLocation } from "../store/location";
import { agentTokens } from "../store/schema";
import { configOrIssues } from "./args";

/** What `rules test` prints: the decision in one line, then why, then the allow rules passed over. */
export function describeDecision(d: CallDecision): string {
  switch (d.outcome) {
    case "stop":
      return `stops: ${d.code}: ${d.message}${d.why === d.message ? "" : `\nwhy: ${d.why}`}`;
    case "wait": {
      const who = approvalsNeededText(d.approvalsNeeded);
      return `waits for ${who}: ${d.reason}\nwhy: ${d.why}${d.grantable ? "" : "\n(such a call cannot be granted)"}`;
    }
    case "run": {
      const by = d.by === "grant" ? "under a grant" : d.by === "rule" ? `by rule "${d.rule}"` : "read-only";
      return `runs at once (${by})\nwhy: ${d.why}`;
    }
  }
}

/**
 * `rules test TOOL 'ARGS-JSON' [--agent NAME]`: the decision the running server would make for
 * such a call now — against the config's rules, the store's catalogue and its live grants — calling
 * nothing and writing nothing. Returns the exit code: 0 once a decision is printed, 1 for a bad
 * config, 2 for bad input.
 */
export async function rulesTest(
  configPath: string,
  tool: string | undefined,
  argsJson: string | undefined,
  agent: string | undefined,
): Promise<number> {
  if (!tool)
    throw new GatehouseError(
      "bad_request",
      "rules test needs TOOL (a local tool name) and ARGS (a JSON object)",
    );
  let args: unknown;
  try {
    args = JSON.parse(argsJson ?? "{}");
  } catch (err) {
    throw new GatehouseError("bad_request", `ARGS is not JSON: ${(err as Error).message}`);
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new GatehouseError("bad_request", `ARGS must be a JSON object like '{"path": "/srv/notes/a.md"}'`);
  }
  const config = configOrIssues(configPath);
  if (!config) return 1;
  const db = await openForReading();
  const rules = new RuleSet(config.rules);
  const { servers } = config;
  // The same argument bound a running server applies, so the dry run does not allow what it would refuse.
  const argumentBytesFor = (server: string) => servers.find((c) => c.name === server)?.maxArgumentBytes;
  try {
    // The agent's tool set as its token has it now: a tool outside it stops first, as it would.
    const toolSet = agent
      ? ((
          await first(
            db.select({ s: agentTokens.toolSet }).from(agentTokens).where(eq(agentTokens.name, agent)),
          )
        )?.s ?? null)
      : null;
    const requester = agent
      ? { kind: "agent" as const, name: agent, toolSet }
      : { kind: "user" as const, name: "" };
    const { decision, skipped } = await decideCall(
      { db, rules, argumentBytesFor, toolSets: new ToolSets(config.toolSets) },
      { requester, tool, args: args as Record<string, unknown> },
    );
    const inSet = toolSet === null ? "" : ` (tool set "${toolSet}")`;
    const as = agent ? ` as agent ${agent}${inSet}` : " (no --agent: rules with `agents` do not apply)";
    process.stdout.write(`${tool} ${JSON.stringify(args)}${as}:\n${describeDecision(decision)}\n`);
    for (const s of skipped) process.stdout.write(`passed over: rule "${s.rule}": ${s.why}\n`);
    return 0;
  } finally {
    await closeDb(db);
    await rules.close();
  }
}

/**
 * The store the server uses, to read. SQLite: opened read-only, so a dry run neither creates,
 * migrates nor writes the file a server owns (`conflict` when it predates grants). PostgreSQL:
 * opened as the server opens it (migrations, if any, under their lock); the dry run only reads.
 */
async function openForReading(): Promise<Db> {
  const location = storeLocation();
  if (location.dialect === "postgres") return openStore(location);
  const db = openDbReadOnly(location.file);
  const sqlite = sqliteOf(db);
  const current =
    sqlite?.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'grants'").get() &&
    sqlite.prepare("SELECT 1 FROM pragma_table_info('agent_tokens') WHERE name = 'tool_set'").get();
  if (!current) {
    await closeDb(db);
    throw new GatehouseError(
      "conflict",
      `the store at ${location.file} is from an older Gatehouse: start Gatehouse once to update it, then try again`,
    );
  }
  return db;
}
