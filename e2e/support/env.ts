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
  /**
   * The SMTP server global-setup runs (notifications.email points at it) writes each message it
   * receives here as `<n>.eml`, raw RFC 822, n counting from 1 in arrival order; a file appears
   * whole (written aside, then renamed).
   */
  mailDir: string;
  /**
   * The webhook receiver (the "e2e-hook" webhook) writes each POST it answers here as `<n>.json`,
   * a {@link ReceivedHook}, the same way.
   */
  hooksDir: string;
  /** The OAuth authorization server and the MCP resource server behind it (the `hosted` server). */
  oauth: OAuthFixtures;
}

/**
 * What global-setup runs for `hosted`: test/fixtures/oauth/authorization-server.mjs and
 * test/fixtures/servers/oauth-resource.mjs, each a child process of the runner on a free loopback
 * port, stopped by global-teardown after Gatehouse.
 */
export interface OAuthFixtures {
  /** `http://127.0.0.1:<port>`, no trailing slash: the origin of its login page too. */
  issuer: string;
  /** The MCP URL of the resource server, `hosted`'s `url` and the tokens' `resource`. */
  resourceUrl: string;
  /** The authorization server's log entries, one JSON line each (its REQUEST_LOG). */
  authorizationLog: string;
  /** The resource server's requests, one JSON line each (its REQUEST_LOG). */
  resourceLog: string;
  /** Both children, to stop. */
  pids: number[];
}

/** One request the e2e webhook receiver answered (always 200). */
export interface ReceivedHook {
  method: string;
  /** Path and query as requested. */
  url: string;
  /** Lower-case names, as Node reads them. */
  headers: Record<string, string | string[] | undefined>;
  /** The raw body, as signed. */
  body: string;
  /** ISO time the whole body had arrived. */
  receivedAt: string;
}

export function readState(): E2EState {
  return JSON.parse(readFileSync(STATE_FILE, "utf8")) as E2EState;
}

/**
 * Where global-setup leaves, on the runner's `globalThis`, the function that stops its SMTP server
 * and webhook receiver (global-teardown calls it after Gatehouse is stopped).
 */
export const RECEIVERS = Symbol.for("gatehouse.e2e.receivers");

/** People the journey creates and later specs reuse. */
export const people = {
  owner: { name: "olive", password: "olive-owner-pass-1" },
  reviewer: { name: "rita", password: "rita-reviewer-pass-1" },
  agentToken: "build-bot",
} as const;

/** A credential in the e2e config (a header and an env value): it must never be shown anywhere. */
export const E2E_SECRET = "e2e-secret-7f3a9c1d5b";
