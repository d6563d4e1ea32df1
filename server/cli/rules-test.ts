import { approvalsNeededText } from "@/lib/decision-text";
import { GatehouseError } from "@/lib/errors";
import { type CallDecision, decideCall } from "../calls/decision";
import { formatIssues, loadConfigFile } from "../config";
import { RuleSet } from "../rules";
import { dbPathFromEnv, openDbReadOnly } from "../store/db";

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
  const loaded = loadConfigFile(configPath);
  if (!loaded.config) {
    process.stderr.write(`${formatIssues(loaded)}\n${configPath}: ${loaded.errors.length} error(s)\n`);
    return 1;
  }
  // Read only: a dry run neither creates, migrates nor writes the store a server owns.
  const db = openDbReadOnly(dbPathFromEnv());
  if (!db.$client.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'grants'").get()) {
    db.$client.close();
    throw new GatehouseError(
      "conflict",
      `the store at ${dbPathFromEnv()} is from an older Gatehouse: start Gatehouse once to update it, then try again`,
    );
  }
  const rules = new RuleSet(loaded.config.rules);
  const { servers } = loaded.config;
  // The same argument bound a running server applies, so the dry run does not allow what it would refuse.
  const argumentBytesFor = (server: string) => servers.find((c) => c.name === server)?.maxArgumentBytes;
  try {
    const requester = agent ? { kind: "agent" as const, name: agent } : { kind: "user" as const, name: "" };
    const { decision, skipped } = await decideCall(
      { db, rules, argumentBytesFor },
      { requester, tool, args: args as Record<string, unknown> },
    );
    const as = agent ? ` as agent ${agent}` : " (no --agent: rules with `agents` do not apply)";
    process.stdout.write(`${tool} ${JSON.stringify(args)}${as}:\n${describeDecision(decision)}\n`);
    for (const s of skipped) process.stdout.write(`passed over: rule "${s.rule}": ${s.why}\n`);
    return 0;
  } finally {
    db.$client.close();
    await rules.close();
  }
}
