import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** Where global-setup leaves what the specs need to know about the running Gatehouse. */
export const STATE_FILE = path.join(
  os.tmpdir(),
  `gatehouse-e2e-state-${(process.env.NEXT_DIST_DIR ?? ".next").replace(/[^A-Za-z0-9_-]/g, "_")}.json`,
);

export interface E2EState {
  baseURL: string;
  setupLink: string;
  dir: string;
  pid: number;
  demoStateFile: string;
  logFile: string;
}

export function readState(): E2EState {
  return JSON.parse(readFileSync(STATE_FILE, "utf8")) as E2EState;
}

/** People the journey creates and later specs reuse. */
export const people = {
  owner: { name: "olive", password: "olive-owner-pass-1" },
  reviewer: { name: "rita", password: "rita-reviewer-pass-1" },
  agentToken: "build-bot",
} as const;

/** A credential in the e2e config (a header and an env value): it must never be shown anywhere. */
export const E2E_SECRET = "e2e-secret-7f3a9c1d5b";
