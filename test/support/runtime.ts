/**
 * A real Gatehouse runtime for integration tests: a temp dir with its own SQLite file, the
 * bundled demo MCP server as a real child process, and a `request` helper that calls the real
 * route modules under `app/api` with real `Request` objects (no HTTP server, no mocks).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { eq } from "drizzle-orm";
import type { CallStatus, LiveEvent, Role, UserView } from "@/lib/api-types";
import { createSession, SESSION_COOKIE } from "@/server/auth/sessions";
import { createToken } from "@/server/auth/tokens";
import { createUser } from "@/server/auth/users";
import { setToolStatus } from "@/server/catalogue/catalogue";
import { type ApprovalsConfig, formatIssues, type GatehouseConfig, validateConfig } from "@/server/config";
import type { EventBus } from "@/server/events";
import { gatehouseListener, serveInternal } from "@/server/http/front-door";
import { createRuntime, type Runtime, setRuntime } from "@/server/runtime";
import { loadSecretKey } from "@/server/secrets";
import { first } from "@/server/store/db";
import { calls, tools } from "@/server/store/schema";
import { freshDatabaseUrl, testDialect } from "./store";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const DEMO_SERVER = path.join(REPO_ROOT, "demo", "server.mjs");
export const API_DIR = path.join(REPO_ROOT, "app", "api");
/** The origin every test request is addressed to (and the Origin a same-site browser sends). */
export const ORIGIN = "http://127.0.0.1:3000";
/** The demo server's tools as local names. */
export const LIST_NOTES = "demo_list_notes";
export const ADD_NOTE = "demo_add_note";

export interface TestRuntimeOptions {
  /** Extra `mcpServers` entries, validated with the demo server. */
  servers?: Record<string, unknown>;
  /**
   * Approval settings, applied after validation so that a test may use values below the
   * product's bounds (a 1 s expiry instead of the configured minimum of 10 s).
   */
  approvals?: Partial<ApprovalsConfig>;
  /** More top-level keys of gatehouse.json (`rules`, `notifications`, ...), validated like the file's. */
  config?: Record<string, unknown>;
  /** Reuse this directory (its gatehouse.db and demo state) instead of a new temp dir; it is removed on stop. */
  dir?: string;
  /** Postgres project: reuse this database (a restart) instead of a new one. */
  databaseUrl?: string;
  /** How long to wait for the demo server's catalogue before failing (default 20 s). */
  readyTimeoutMs?: number;
  /** The runtime's `publicOrigin` (`GATEHOUSE_PUBLIC_ORIGIN`); default none. */
  publicOrigin?: string;
  /** The OAuth requests' address policy (`RuntimeOptions.refuseAddress`); default the guard's. */
  refuseAddress?: (ip: string) => string | null;
  /** The environment the config's `${VAR}` references are expanded from; default none (`{}`). */
  env?: Record<string, string>;
  /** The replica lease (`RuntimeOptions.replicaLeaseMs`); default the runtime's. */
  replicaLeaseMs?: number;
}

export interface TestRuntime {
  runtime: Runtime;
  dir: string;
  /** The SQLite file (sqlite project). */
  dbFile: string;
  /** The PostgreSQL database (postgres project): pass it as `databaseUrl` to start on it again. */
  databaseUrl?: string;
  /** How many times the demo server's `add_note` really ran (read from its state file). */
  demoRuns(): number;
  /** Stops the runtime and its children; removes the temp dir unless `keepDir`. */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
}

/**
 * Starts a runtime in a temp dir with the demo server, installs it as the process runtime
 * (`setRuntime`, which the route wrapper reads) and resolves once the demo server is ready and
 * its tools have catalogue rows — woken by bus events, never by sleeping.
 */
export async function startTestRuntime(opts: TestRuntimeOptions = {}): Promise<TestRuntime> {
  const dir = opts.dir ?? mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
  const stateFile = path.join(dir, "demo-state.json");
  const dbFile = path.join(dir, "gatehouse.db");
  const raw = {
    mcpServers: {
      demo: { command: "node", args: [DEMO_SERVER], env: { DEMO_STATE_FILE: stateFile }, enabled: true },
      ...opts.servers,
    },
    ...opts.config,
  };
  const result = validateConfig(raw, { env: opts.env ?? {}, baseDir: REPO_ROOT });
  if (!result.config) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`test config is invalid:\n${formatIssues(result)}`);
  }
  const config: GatehouseConfig = {
    ...result.config,
    approvals: { ...result.config.approvals, ...opts.approvals },
  };
  const databaseUrl =
    testDialect === "postgres" ? (opts.databaseUrl ?? (await freshDatabaseUrl())) : undefined;
  // On PostgreSQL each runtime is a replica: its internal route listens on a port of its own, so
  // another runtime on the same database can forward calls for the stdio servers it holds.
  const internal = databaseUrl ? await internalRouteServer() : null;
  const runtime = await createRuntime({
    config,
    dbFile,
    ...(databaseUrl ? { databaseUrl, secretKey: testSecretKey } : {}),
    ...(internal ? { internalUrl: internal.url } : {}),
    ...(opts.replicaLeaseMs ? { replicaLeaseMs: opts.replicaLeaseMs } : {}),
    ...(opts.publicOrigin ? { publicOrigin: opts.publicOrigin } : {}),
    ...(opts.refuseAddress ? { refuseAddress: opts.refuseAddress } : {}),
  });
  setRuntime(runtime);
  internal?.serve(runtime);

  let stopped = false;
  const stop = async (stopOpts: { keepDir?: boolean } = {}) => {
    if (stopped) return;
    stopped = true;
    try {
      await runtime.stop();
    } finally {
      await internal?.close();
      setRuntime(undefined);
      if (!stopOpts.keepDir) rmSync(dir, { recursive: true, force: true });
    }
  };

  const demoReady = async () => {
    const rows = await runtime.db
      .select({ name: tools.localName })
      .from(tools)
      .where(eq(tools.server, "demo"));
    const names = new Set(rows.map((r) => r.name));
    return (
      names.has(LIST_NOTES) && names.has(ADD_NOTE) && runtime.manager.get("demo").snapshot().state === "ready"
    );
  };
  try {
    await waitForEvent(runtime.bus, (e) => (e.type === "catalogue" || e.type === "server") && demoReady(), {
      already: demoReady,
      timeoutMs: opts.readyTimeoutMs ?? 20_000,
      what: () =>
        `the demo server's catalogue (status ${JSON.stringify(runtime.manager.get("demo").snapshot())})`,
    });
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    runtime,
    dir,
    dbFile,
    ...(databaseUrl ? { databaseUrl } : {}),
    demoRuns() {
      if (!existsSync(stateFile)) return 0;
      const state = JSON.parse(readFileSync(stateFile, "utf8")) as { addNoteRuns?: number };
      return state.addNoteRuns ?? 0;
    },
    stop,
  };
}

/**
 * A loopback HTTP server answering the internal route of the runtime given to `serve` (503
 * before), as the production listener does: listening first, since a replica registers its
 * address when it starts.
 */
async function internalRouteServer(): Promise<{
  url: string;
  serve(runtime: Runtime): void;
  close(): Promise<void>;
}> {
  let answer: Runtime["answerInternal"] = null;
  const server = http.createServer((req, res) => {
    if (!answer) {
      res.writeHead(503).end();
      return;
    }
    void serveInternal(req, res, answer).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    serve(runtime) {
      answer = runtime.answerInternal;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The key runtimes on PostgreSQL seal secrets with in tests (there is no key file beside a database). */
const testSecretKey = loadSecretKey({ env: { GATEHOUSE_SECRET_KEY: "a".repeat(64) }, dbFile: ":memory:" });

/**
 * Resolves once every server in `names` is `ready` (checked now and on each server event);
 * rejects after `timeoutMs` naming the first that is not, with its status.
 */
export async function waitForServersReady(
  runtime: Runtime,
  names: readonly string[],
  timeoutMs = 20_000,
): Promise<void> {
  const ready = () => names.every((n) => runtime.manager.get(n).snapshot().state === "ready");
  await waitForEvent(runtime.bus, (e) => e.type === "server" && ready(), {
    already: ready,
    timeoutMs,
    what: () => {
      const waiting = names.find((n) => runtime.manager.get(n).snapshot().state !== "ready") ?? "";
      return `server ${waiting} to be ready (${waiting && JSON.stringify(runtime.manager.get(waiting).snapshot())})`;
    },
  });
}

/**
 * Resolves with the first bus event matching `match`, or with null when `already()` is true
 * right after subscribing (the thing happened before we listened). Either may be async (a look
 * into the store). Rejects after `timeoutMs` (a safety net for a broken build, not a wait).
 */
export function waitForEvent(
  bus: EventBus,
  match: (e: LiveEvent) => boolean | Promise<boolean>,
  opts: {
    already?: () => boolean | Promise<boolean>;
    timeoutMs?: number;
    what?: () => string | Promise<string>;
  } = {},
): Promise<LiveEvent | null> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (fn: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe();
      fn();
    };
    const timer = setTimeout(() => {
      void Promise.resolve(opts.what?.() ?? "an event").then(
        (what) => finish(() => reject(new Error(`timed out waiting for ${what}`))),
        (err: unknown) => finish(() => reject(err)),
      );
    }, opts.timeoutMs ?? 10_000);
    const unsubscribe = bus.subscribe((e) => {
      void Promise.resolve(match(e)).then(
        (yes) => yes && finish(() => resolve(e)),
        (err: unknown) => finish(() => reject(err)),
      );
    });
    if (opts.already) {
      void Promise.resolve(opts.already()).then(
        (yes) => yes && finish(() => resolve(null)),
        (err: unknown) => finish(() => reject(err)),
      );
    }
  });
}

/** The stored status of a call, read straight from the db. */
export async function callStatus(runtime: Runtime, id: string): Promise<CallStatus | undefined> {
  const row = await first(runtime.db.select({ status: calls.status }).from(calls).where(eq(calls.id, id)));
  return row?.status as CallStatus | undefined;
}

/** Resolves once call `id` has `status` (woken by the bus). */
export async function waitForCallStatus(
  runtime: Runtime,
  id: string,
  status: CallStatus,
  timeoutMs = 10_000,
): Promise<void> {
  await waitForEvent(runtime.bus, (e) => e.type === "call" && e.id === id && e.status === status, {
    already: async () => (await callStatus(runtime, id)) === status,
    timeoutMs,
    what: async () => `call ${id} to become ${status} (it is ${await callStatus(runtime, id)})`,
  });
}

export interface TestUser {
  user: UserView;
  password: string;
  /** A `Cookie` header value carrying a fresh session. */
  cookie: string;
}

/** Creates a user (as the CLI would) and signs them in. */
export async function createTestUser(
  runtime: Runtime,
  name: string,
  roles: Role[],
  password = `${name}-password-123`,
): Promise<TestUser> {
  const user = await createUser(runtime.db, { name, password, roles, actor: "test" });
  return { user, password, cookie: await sessionCookieFor(runtime, user.id) };
}

/** A `Cookie` header for a new session of `userId`. */
export async function sessionCookieFor(runtime: Runtime, userId: number): Promise<string> {
  return `${SESSION_COOKIE}=${(await createSession(runtime.db, userId)).id}`;
}

/** Creates an agent token (as an owner would), in tool set `opts.toolSet` if given; returns its secret. */
export async function createAgentToken(
  runtime: Runtime,
  name: string,
  opts: { toolSet?: string } = {},
): Promise<string> {
  const knownSets = runtime.toolSets.names();
  return (await createToken(runtime.db, { name, actor: "test", knownSets, ...opts })).secret;
}

/** Enables a catalogue tool (as an owner would). */
export async function enableTool(runtime: Runtime, localName: string): Promise<void> {
  await setToolStatus(runtime.db, { localName, status: "enabled", actor: "test" });
}

// ---------------------------------------------------------------------------------------------
// Calling route modules

export interface RouteFile {
  /** Path relative to app/api, e.g. "calls/[id]/approve/route.ts". */
  file: string;
  /** The URL path it serves, e.g. "/api/calls/[id]/approve". */
  pattern: string;
  segments: string[];
}

/** Every `route.ts` under app/api, found on disk (so a new route is never missed). */
export function routeFiles(): RouteFile[] {
  return (readdirSync(API_DIR, { recursive: true, encoding: "utf8" }) as string[])
    .map((f) => f.split(path.sep).join("/"))
    .filter((f) => f === "route.ts" || f.endsWith("/route.ts"))
    .sort()
    .map((file) => {
      const dir = file.slice(0, -"route.ts".length).replace(/\/$/, "");
      const segments = ["api", ...(dir ? dir.split("/") : [])];
      return { file, pattern: `/${segments.join("/")}`, segments };
    });
}

export type RouteHandler = (
  req: Request,
  ctx: { params: Promise<Record<string, string>> },
) => Promise<Response>;

/** The exported members of a route module. */
export async function loadRoute(file: string): Promise<Record<string, unknown>> {
  return (await import(path.join(API_DIR, file))) as Record<string, unknown>;
}

function matchRoute(pathname: string): { route: RouteFile; params: Record<string, string> } {
  const parts = pathname.split("/").filter(Boolean);
  let best: { route: RouteFile; params: Record<string, string>; statics: number } | null = null;
  for (const route of routeFiles()) {
    if (route.segments.length !== parts.length) continue;
    const params: Record<string, string> = {};
    let statics = 0;
    const ok = route.segments.every((seg, i) => {
      const part = parts[i] ?? "";
      const dynamic = /^\[(\w+)\]$/.exec(seg);
      if (dynamic?.[1]) {
        params[dynamic[1]] = decodeURIComponent(part);
        return true;
      }
      statics++;
      return seg === part;
    });
    // Static segments win over dynamic ones, as in Next.js.
    if (ok && (!best || statics > best.statics)) best = { route, params, statics };
  }
  if (!best) throw new Error(`no route file under app/api serves ${pathname}`);
  return best;
}

export interface RequestOptions {
  cookie?: string;
  /** An agent token secret, sent as `Authorization: Bearer ...`. */
  bearer?: string;
  /**
   * The Origin header. Left out, it is what the caller would send: a same-origin browser
   * (cookie or anonymous) sends {@link ORIGIN}, an agent with a bearer token sends none.
   * `null` sends no Origin at all.
   */
  origin?: string | null;
  /** JSON-encoded unless a string. */
  body?: unknown;
  /** Any other headers (e.g. `x-forwarded-proto`). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * Builds a real `Request` for `ORIGIN + path` and invokes the exported `method` handler of the
 * route file that serves it, as Next.js would (params as a promise).
 */
export async function request(method: string, urlPath: string, opts: RequestOptions = {}): Promise<Response> {
  const url = new URL(urlPath, ORIGIN);
  const { route, params } = matchRoute(url.pathname);
  const mod = await loadRoute(route.file);
  const handler = mod[method];
  if (typeof handler !== "function") throw new Error(`${route.file} exports no ${method}`);
  const headers = new Headers({ host: url.host, ...opts.headers });
  if (opts.cookie !== undefined) headers.set("cookie", opts.cookie);
  if (opts.bearer !== undefined) headers.set("authorization", `Bearer ${opts.bearer}`);
  const origin = opts.origin === undefined ? (opts.bearer === undefined ? ORIGIN : null) : opts.origin;
  if (origin !== null) headers.set("origin", origin);
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    headers.set("content-type", "application/json");
  }
  const req = new Request(url, { method, headers, body, signal: opts.signal });
  return (handler as RouteHandler)(req, { params: Promise.resolve(params) });
}

/** The parsed JSON body of a response. */
export async function bodyOf<T = Record<string, unknown>>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

/**
 * The production listener (`gatehouseListener`, as server/main.ts serves it, Next replaced by a
 * plain 404) for `rt` on loopback port `port` (default any free one), its own port as the listen
 * host; resolves once it listens.
 */
export async function productionListener(
  rt: TestRuntime,
  port = 0,
): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address() as AddressInfo;
  server.on(
    "request",
    gatehouseListener(rt.runtime, (_req, res) => res.writeHead(404).end(), `127.0.0.1:${bound}`, {}),
  );
  return {
    origin: `http://127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
