/**
 * Two Gatehouse replicas on one PostgreSQL database, for the placement and internal-route
 * suites: real runtimes (each with its own loopback internal listener, as test/support/runtime.ts
 * starts them), the demo server, and optionally a resource server and a prompt server, all real
 * programs. Replica A starts first and so takes every stdio server's lock; B forwards to it.
 *
 * Each replica's servers are configured with that replica's own files (A's notebook holds a note
 * B's does not; A serves a folder with `from-a.md`, B one with `from-b.md`), so an answer tells
 * which replica's server gave it.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { eq } from "drizzle-orm";
import { first } from "@/server/store/db";
import { replicas, serverHolders } from "@/server/store/schema";
import {
  ADD_NOTE,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";

/** A runtime, named through the test runtime: server/runtime imports this room, so this file may not import it. */
type Runtime = TestRuntime["runtime"];

const FILES = path.join(REPO_ROOT, "test/fixtures/servers/files.mjs");
const PROMPTS = path.join(REPO_ROOT, "test/fixtures/servers/prompts.mjs");
const PROGRESS_TALK = path.join(REPO_ROOT, "test/fixtures/servers/progress-talk.mjs");

/** The note only replica A's notebook holds. */
export const A_NOTE = "kept in replica A's notebook";

/** An agent, as the broker's requester. */
export const AGENT = { kind: "agent", name: "replica-bot" } as const;

export interface ReplicaPair {
  /** The first replica: it holds every stdio server. */
  a: TestRuntime;
  /** The second: every stdio server runs elsewhere (on A). */
  b: TestRuntime;
  /** Stops both (B first); idempotent. */
  stop(): Promise<void>;
}

export interface PairOptions {
  /** Both replicas' lease (`replicaLeaseMs`); default the runtime's. */
  leaseMs?: number;
  /** Also configure the resource server (`files`) and the prompt server (`prompts`). */
  reads?: boolean;
  /** Also configure `talk`, whose tool sends progress notifications (progress-talk.mjs). */
  progress?: boolean;
}

/** A runtime's directory, made here so its files exist before its servers start. */
function replicaDir(name: "a" | "b", notes: string[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), `gatehouse-replica-${name}-`));
  writeFileSync(path.join(dir, "demo-state.json"), JSON.stringify({ notes, addNoteRuns: 0 }));
  mkdirSync(path.join(dir, "served"));
  writeFileSync(path.join(dir, "served", `from-${name}.md`), `served by replica ${name.toUpperCase()}\n`);
  return dir;
}

function servers(dir: string, opts: PairOptions): Record<string, unknown> {
  return {
    ...(opts.reads
      ? {
          files: { command: "node", args: [FILES, path.join(dir, "served")], enabled: true },
          prompts: { command: "node", args: [PROMPTS], enabled: true },
        }
      : {}),
    ...(opts.progress ? { talk: { command: "node", args: [PROGRESS_TALK], enabled: true } } : {}),
  };
}

/**
 * Starts replica A, then replica B on A's database; resolves once B sees every stdio server
 * ready (on A). `demo_add_note` is allowed by a rule, so a call to it runs at once.
 */
export async function startPair(opts: PairOptions = {}): Promise<ReplicaPair> {
  const names = ["demo", ...(opts.reads ? ["files", "prompts"] : []), ...(opts.progress ? ["talk"] : [])];
  const common = {
    config: { rules: [{ name: "notes", tools: [ADD_NOTE], decision: "allow" }] },
    ...(opts.leaseMs ? { replicaLeaseMs: opts.leaseMs } : {}),
  };
  const started: TestRuntime[] = [];
  const stop = async () => {
    for (const rt of started.splice(0).reverse()) await rt.stop();
  };
  try {
    const dirA = replicaDir("a", [A_NOTE]);
    const a = await startTestRuntime({ ...common, dir: dirA, servers: servers(dirA, opts) });
    started.push(a);
    await waitForServersReady(a.runtime, names);
    await enableTool(a.runtime, LIST_NOTES);
    await enableTool(a.runtime, ADD_NOTE);
    const dirB = replicaDir("b", []);
    const b = await startTestRuntime({
      ...common,
      dir: dirB,
      servers: servers(dirB, opts),
      ...(a.databaseUrl ? { databaseUrl: a.databaseUrl } : {}),
    });
    started.push(b);
    await waitForServersReady(b.runtime, names);
    return { a, b, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The replica `server_holders` names for `server`, or null. */
export async function recordedHolder(runtime: Runtime, server: string): Promise<string | null> {
  const row = await first(
    runtime.db
      .select({ replica: serverHolders.replica })
      .from(serverHolders)
      .where(eq(serverHolders.server, server)),
  );
  return row?.replica ?? null;
}

/** Where the other replicas reach `runtime`'s internal route, as its replica row says. */
export async function internalAddress(runtime: Runtime): Promise<string> {
  const row = await first(
    runtime.db
      .select({ address: replicas.address })
      .from(replicas)
      .where(eq(replicas.id, runtime.replica.id)),
  );
  if (!row?.address) throw new Error(`replica ${runtime.replica.id} registered no address`);
  return row.address;
}

/** A loopback port nothing listens on (bound, then closed again). */
export function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The text parts of a tool result, joined. */
export function resultText(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] } | null)?.content ?? [];
  return content
    .filter((c) => c.type === "text")
    .map((c) => c.text ?? "")
    .join("\n");
}
