/**
 * `npm run gatehouse -- …` as a user runs it, for tests: a child process in the repository with the
 * given environment and stdin, resolved with its exit code and output.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { type Db, openDb, openStore } from "@/server/store/db";
import { REPO_ROOT } from "./runtime";
import { freshDatabaseUrl, testDialect } from "./store";

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: Record<string, string> = {}, stdin = ""): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--conditions=react-server", "--import", "tsx", "server/cli/main.ts", ...args],
      { cwd: REPO_ROOT, env: { ...process.env, ...env } },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

/**
 * A store the CLI and the test share, on the test's store: in the `sqlite` project the file
 * `db.sqlite` in `dir` (DATABASE_URL emptied, so the CLI takes GATEHOUSE_DB), in the `postgres`
 * project a fresh database (DATABASE_URL). `db` is the test's own handle on it, migrated; the
 * test closes it (`closeDb`). `env` points the CLI at the same store.
 */
export async function cliStore(dir: string): Promise<{ db: Db; env: Record<string, string> }> {
  if (testDialect === "postgres") {
    const url = await freshDatabaseUrl();
    return { db: await openStore({ dialect: "postgres", url }), env: { DATABASE_URL: url } };
  }
  const file = path.join(dir, "db.sqlite");
  return { db: openDb(file), env: { GATEHOUSE_DB: file, DATABASE_URL: "" } };
}
