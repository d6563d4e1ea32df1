/**
 * `npm run gatehouse -- …` as a user runs it, for tests: a child process in the repository with the
 * given environment and stdin, resolved with its exit code and output.
 */
import { spawn } from "node:child_process";
import { REPO_ROOT } from "./runtime";

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
