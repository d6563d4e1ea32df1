/**
 * What the OAuth sign-in tests share: a real authorization server (`oidc-provider`, in-process:
 * test/fixtures/oauth/authorization-server.mjs) in front of a real MCP server program that
 * checks every bearer token by introspection (test/fixtures/servers/oauth-resource.mjs), a
 * Gatehouse runtime with that server configured, and the owner's steps: Connect through the real
 * route, the sign-in at the authorization server (its dev login form, followed with fetch), the
 * callback through the real handler with the browser's sign-in cookie.
 */
import { createHash } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { eq } from "drizzle-orm";
import type { ServerView, SignInOutcome } from "@/lib/api-types";
import { finishSignIn } from "@/server/http/oauth";
import { OAuthStore } from "@/server/oauth/store";
import type { Runtime } from "@/server/runtime";
import { first } from "@/server/store/db";
import { tools } from "@/server/store/schema";
import {
  type AuthorizationServer,
  type AuthorizationServerOptions,
  startAuthorizationServer,
} from "@/test/fixtures/oauth/authorization-server.mjs";
import { fixtureOverHttp, freePort, type RestartableServer } from "./http-servers";
import {
  createTestUser,
  enableTool,
  ORIGIN,
  REPO_ROOT,
  request,
  sessionCookieFor,
  startTestRuntime,
  type TestRuntime,
  type TestRuntimeOptions,
  waitForEvent,
} from "./runtime";

const RESOURCE_SERVER = path.join(REPO_ROOT, "test", "fixtures", "servers", "oauth-resource.mjs");

/** One line of the resource server's REQUEST_LOG. */
export interface ResourceRequest {
  method: string;
  path: string;
  status: number;
  auth: "none" | "active" | "inactive" | "wrong_audience" | "insufficient_scope";
  tokenHash: string | null;
  rpc: string | null;
}

export interface OAuthWorld {
  as: AuthorizationServer;
  rs: RestartableServer;
  /** The MCP URL, the resource the tokens are for. */
  url: string;
  /** What reached the resource server so far. */
  requests(): ResourceRequest[];
  /** From now on the resource server refuses `token` (401 invalid_token), whatever the authorization server says. */
  deny(token: string): void;
  close(): Promise<void>;
}

/**
 * The authorization server and the resource server on `host` (default 127.0.0.1): the resource
 * server's port is chosen first, since the authorization server must know the resource.
 */
export async function startOAuthWorld(opts: {
  dir: string;
  host?: string;
  as?: Partial<AuthorizationServerOptions>;
  writeScope?: string;
}): Promise<OAuthWorld> {
  const host = opts.host ?? "127.0.0.1";
  const port = await freePort();
  const url = `http://${host}:${port}/mcp`;
  const as = await startAuthorizationServer({ host, resource: url, ...opts.as });
  const log = path.join(opts.dir, `resource-${port}.log`);
  const denyList = path.join(opts.dir, `deny-${port}.txt`);
  const rs = fixtureOverHttp(port, RESOURCE_SERVER, {
    HOST: host,
    AUTHORIZATION_SERVER: as.issuer,
    REQUEST_LOG: log,
    DENY_LIST: denyList,
    ...(opts.writeScope ? { WRITE_SCOPE: opts.writeScope } : {}),
  });
  await rs.start();
  return {
    as,
    rs,
    url,
    requests() {
      let text = "";
      try {
        text = readFileSync(log, "utf8");
      } catch {
        return [];
      }
      return text
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ResourceRequest);
    },
    deny(token) {
      appendFileSync(denyList, `${createHash("sha256").update(token).digest("hex").slice(0, 12)}\n`);
    },
    async close() {
      await rs.kill();
      await as.close();
    },
  };
}

export interface SignInHost {
  rt: TestRuntime;
  runtime: Runtime;
  /** An owner's session cookie (olga). */
  cookie: string;
  /** The browser's sign-in cookie (`gh_oauth=…`) from the last Connect; null before one. */
  binding: string | null;
}

/**
 * A Gatehouse runtime with the demo server and `servers` (each an `mcpServers` entry), and an
 * owner signed in to the console.
 */
export async function startSignInHost(
  servers: Record<string, unknown>,
  opts: Omit<TestRuntimeOptions, "servers"> = {},
): Promise<SignInHost> {
  const rt = await startTestRuntime({ ...opts, servers });
  const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
  return {
    rt,
    runtime: rt.runtime,
    cookie: await sessionCookieFor(rt.runtime, owner.user.id),
    binding: null,
  };
}

/** The owner's Connect through the real route; keeps the sign-in cookie it sets, as a browser would. */
export async function pressConnect(
  host: SignInHost,
  server: string,
  opts: { origin?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const cookie = host.binding ? `${host.cookie}; ${host.binding}` : host.cookie;
  const res = await request("POST", `/api/servers/${server}/oauth`, { cookie, ...opts });
  const set = res.headers.get("set-cookie");
  if (set) host.binding = set.split(";")[0] ?? null;
  return res;
}

/** Connect, answered 200: the authorization URL the browser is sent to. */
export async function connect(
  host: SignInHost,
  server: string,
  opts: { origin?: string } = {},
): Promise<URL> {
  const res = await pressConnect(host, server, opts);
  const body = (await res.json()) as { authorizationUrl?: string; error?: unknown };
  if (res.status !== 200 || !body.authorizationUrl) {
    throw new Error(`Connect answered ${res.status}: ${JSON.stringify(body)}`);
  }
  return new URL(body.authorizationUrl);
}

/**
 * The browser arriving at `/oauth/callback` (the authorization server's redirect `location`),
 * with `binding` as its sign-in cookie (default: the one Connect set; null: none). Resolves with
 * the outcome the page moves on to.
 */
export async function arrive(
  host: SignInHost,
  location: string,
  binding: string | null = host.binding,
): Promise<{ outcome: SignInOutcome | null; server: string | null; res: Response }> {
  const url = new URL(location);
  const target = new URL(`${url.pathname}${url.search}`, ORIGIN);
  const headers = new Headers({ host: target.host });
  if (binding) headers.set("cookie", binding);
  const res = await finishSignIn(new Request(target, { headers }));
  const html = await res.clone().text();
  const refresh = /content="0;url=([^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, "&") ?? "";
  const next = new URL(refresh, ORIGIN);
  return {
    outcome: next.searchParams.get("outcome") as SignInOutcome | null,
    server: next.searchParams.get("signin"),
    res,
  };
}

/** Connect, sign in at the authorization server as `login`, come back: the whole owner's step. */
export async function signIn(
  host: SignInHost,
  world: OAuthWorld,
  server: string,
  login = "alice",
): Promise<SignInOutcome | null> {
  const authorizationUrl = await connect(host, server);
  const location = await world.as.signInHeadless(authorizationUrl, { login });
  return (await arrive(host, location)).outcome;
}

/**
 * Calls `tool` of the server `remote` as the owner olga through the broker (enabling it first),
 * as an agent's call would be run: the answer the agent gets.
 */
export async function callRemote(
  host: SignInHost,
  tool = "remote_whoami",
  args: Record<string, unknown> = {},
) {
  const local = tool;
  const row = await first(host.runtime.db.select().from(tools).where(eq(tools.localName, local)));
  if (row?.status !== "enabled") await enableTool(host.runtime, local);
  return host.runtime.broker.request({ kind: "user", name: "olga" }, { tool: local, arguments: args });
}

/** The server's view as the Servers page gets it. */
export async function viewOf(host: SignInHost, server: string): Promise<ServerView> {
  const res = await request("GET", "/api/servers", { cookie: host.cookie });
  const { servers } = (await res.json()) as { servers: ServerView[] };
  const view = servers.find((s) => s.name === server);
  if (!view) throw new Error(`no server ${server} in the view`);
  return view;
}

/** Resolves once `server` is in `state` (checked now and on each server event). */
export async function waitForState(
  host: SignInHost,
  server: string,
  state: ServerView["state"],
): Promise<void> {
  const there = () => host.runtime.manager.get(server).snapshot().state === state;
  await waitForEvent(host.runtime.bus, (e) => e.type === "server" && there(), {
    already: there,
    timeoutMs: 20_000,
    what: () =>
      `${server} to be ${state} (now ${JSON.stringify(host.runtime.manager.get(server).snapshot())})`,
  });
}

/** The tokens the store holds for `server`, opened with the runtime's key (to grep for, and to revoke). */
export async function storedTokens(
  runtime: Runtime,
  server: string,
): Promise<{ access: string; refresh: string | null } | null> {
  const tokens = (await new OAuthStore(runtime.db, runtime.secrets).grant(server))?.secrets.tokens;
  return tokens ? { access: tokens.access_token, refresh: tokens.refresh_token ?? null } : null;
}
