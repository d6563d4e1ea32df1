import "server-only";
import type { z } from "zod";
import type { ErrorBody } from "@/lib/errors";
import { GatehouseError } from "@/lib/errors";
import { hostProblem } from "../agent-mcp/guard";
import { type Access, allows, authenticate, checkOrigin, type Principal } from "../auth/access";
import { isSecure } from "../auth/signin";
import { logger } from "../log";
import { jsonBodyOf, MAX_REQUEST_BODY_BYTES, readJsonBody } from "../request";
import { getRuntime, type Runtime } from "../runtime";
import type { Dialect } from "../store/db";
import { errorCode, isConnectionFault } from "../store/pg-driver";
import { tablesDialect } from "../store/schema";
import { JsonResponse } from "./json-response";
import { edgePeers, HOST_REFUSED_CODE } from "./peers";

const log = logger("http");

type Schema = z.ZodType;

export interface RouteContext<B extends Schema | undefined, Q extends Schema | undefined> {
  req: Request;
  runtime: Runtime;
  /** Null only on `public` routes. */
  principal: Principal | null;
  params: Record<string, string>;
  body: B extends Schema ? z.infer<B> : undefined;
  query: Q extends Schema ? z.infer<Q> : undefined;
}

export interface RouteOptions<B extends Schema | undefined, Q extends Schema | undefined> {
  /** Who may call this route; `public` routes still check Origin on state changes. */
  access: readonly Access[];
  body?: B;
  /** An empty body reads as `{}` (a body whose every key is optional). Default false: it must be JSON. */
  bodyOptional?: boolean;
  query?: Q;
}

/** JSON response helper; `undefined` body means 204. */
export function json(data: unknown, status = 200, headers?: HeadersInit): Response {
  if (data === undefined) return new Response(null, { status: 204, headers });
  return new JsonResponse(JSON.stringify(data), {
    status,
    headers: { "Cache-Control": "no-store", ...headers },
  });
}

/**
 * An error as the API answers it: the store's faults ({@link storeProblem}) as their own codes
 * with a retry hint, a `GatehouseError` with its code and status, anything else a bare 500
 * (logged). `dialect`: the store this process runs on (a test names the other).
 */
export function errorResponse(err: unknown, dialect: Dialect = tablesDialect): Response {
  const store = storeProblem(err, dialect);
  if (store) {
    log.warn(`store ${STORE_WORDS[store.code] ?? store.code}: answered ${store.status}`, {
      // The driver's own words, not a wrapper's (drizzle's names the SQL and its parameters).
      error: errorCode(err) || String(causeChain(err).at(-1)),
    });
    // Nothing of the request was committed: its transaction rolled back as a whole.
    return json({ error: { code: store.code, message: store.message } } satisfies ErrorBody, store.status, {
      "Retry-After": RETRY_AFTER_SECONDS[store.code] ?? "60",
    });
  }
  if (err instanceof GatehouseError) {
    const headers: Record<string, string> = {};
    if (err.code === "unauthenticated") headers["WWW-Authenticate"] = 'Bearer realm="gatehouse"';
    if (err.retryAfterSeconds !== undefined) headers["Retry-After"] = String(err.retryAfterSeconds);
    return json({ error: { code: err.code, message: err.message } } satisfies ErrorBody, err.status, headers);
  }
  // Unknown errors may carry internals (paths, SQL, secrets): log them, answer generically.
  log.error("unhandled error in route", {
    error: err instanceof Error ? (err.stack ?? err.message) : String(err),
  });
  return json({ error: { code: "internal", message: "internal error" } } satisfies ErrorBody, 500);
}

const STORE_WORDS: Partial<Record<string, string>> = {
  store_busy: "busy",
  store_full: "full",
  store_unavailable: "unreachable",
};

/** When to try again: a busy store soon, an unreachable one once it may be back, a full one later. */
const RETRY_AFTER_SECONDS: Partial<Record<string, string>> = {
  store_busy: "1",
  store_unavailable: "5",
  store_full: "60",
};

/** SQLSTATEs of a transaction PostgreSQL rolled back for a concurrent one's sake (serialization failure, deadlock). */
const PG_CONFLICT = new Set(["40001", "40P01"]);

/**
 * The store's faults as the API's own errors: a retry hint, not a 500 with internals. SQLite:
 * "another connection holds the write lock" (after `busy_timeout`) and "the disk is full".
 * PostgreSQL: a transaction rolled back for a concurrent one (serialization failure, deadlock)
 * that failed again on every retry is busy; a connection that cannot be made or was lost is
 * `store_unavailable`. The driver's error may come wrapped (drizzle's `DrizzleQueryError`): its
 * cause chain is read. A `GatehouseError` is never one of them: it says what it is. Null for
 * anything else.
 */
function storeProblem(err: unknown, dialect: Dialect): GatehouseError | null {
  if (err instanceof GatehouseError) return null;
  const code = errorCode(err);
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new GatehouseError(
      "store_busy",
      "the store is busy (another process is writing); try again in a moment",
    );
  }
  if (PG_CONFLICT.has(code)) {
    return new GatehouseError(
      "store_busy",
      "the store is busy (other requests changed the same data at the same time); try again in a moment",
    );
  }
  if (code === "SQLITE_FULL") {
    return new GatehouseError("store_full", "the store's disk is full; nothing of this request was saved");
  }
  // Only PostgreSQL is reached over the network: elsewhere a network fault is not the store's.
  if (dialect === "postgres" && causeChain(err).some(isConnectionFault)) {
    return new GatehouseError(
      "store_unavailable",
      "the store (PostgreSQL) cannot be reached just now; nothing of this request was saved; try again in a moment",
    );
  }
  return null;
}

/** `err` and its causes, outermost first (a few at most): a wrapper's message hides its cause's. */
function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && chain.length < 5; e = (e as { cause?: unknown }).cause)
    chain.push(e);
  return chain;
}

function zodMessage(prefix: string, error: z.ZodError): string {
  const issue = error.issues[0];
  const where = issue && issue.path.length > 0 ? `${prefix}.${issue.path.join(".")}` : prefix;
  return `${where}: ${issue?.message ?? "invalid"}`;
}

/** The refusal of a body over {@link MAX_REQUEST_BODY_BYTES}, on the JSON API and the hot path alike. */
export function payloadTooLarge(): GatehouseError {
  return new GatehouseError(
    "payload_too_large",
    `request bodies are limited to ${MAX_REQUEST_BODY_BYTES} bytes`,
  );
}

/**
 * The second argument of a route handler: what Next passes (`params`), and what the edge
 * already knows about the request.
 */
export interface HandlerContext {
  params: Promise<Record<string, string | string[] | undefined>>;
  /**
   * Who these same headers authenticate, when the hot path (server/main.ts) has looked already
   * (`null`: nobody); absent on Next's own path, where the handler authenticates itself.
   */
  principal?: Principal | null;
  /**
   * The request's body, when the hot path has read it already and built `req` without it (only
   * for handlers made by {@link route}, which say so with `bodyFromContext`); absent on Next's
   * own path, where the body is read from `req`.
   */
  body?: Buffer;
}

/**
 * A handler made by {@link route}: it reads its body from {@link HandlerContext.body} when one
 * is handed over, so the hot path need not put the body into the web `Request` at all.
 */
export type RouteHandlerFn = ((req: Request, ctx: HandlerContext) => Promise<Response>) & {
  readonly bodyFromContext: true;
};

/**
 * The one wrapper every API route goes through: checks `Host` against the allow-list `/mcp`
 * uses (before anything else: the production server's front door has done so already, but
 * under `next dev` this is the only check), authenticates (bearer token or session cookie
 * under the name the request's scheme uses, unless the edge hands over the principal it
 * found), checks the role and the Origin of state-changing requests, validates query and body
 * with zod, and turns errors into `{error: {code, message}}` with the code's status.
 */
export function route<B extends Schema | undefined = undefined, Q extends Schema | undefined = undefined>(
  opts: RouteOptions<B, Q>,
  handler: (ctx: RouteContext<B, Q>) => Promise<unknown> | unknown,
): RouteHandlerFn {
  const handle = async (req: Request, handlerCtx: HandlerContext): Promise<Response> => {
    try {
      const runtime = getRuntime();
      const badHost = hostProblem(req.headers.get("host"), edgePeers(runtime));
      if (badHost) throw new GatehouseError(HOST_REFUSED_CODE, badHost);
      const known = handlerCtx?.principal;
      let principal =
        known === undefined ? await authenticate(runtime.db, req.headers, isSecure(req)) : known;
      const isPublic = opts.access.includes("public");
      if (!isPublic) {
        if (!principal) {
          throw new GatehouseError(
            "unauthenticated",
            req.headers.has("authorization") ? "the bearer token is not valid" : "Sign in first.",
          );
        }
        if (!allows(principal, opts.access)) {
          throw new GatehouseError("forbidden", `this needs the ${opts.access.join(" or ")} role`);
        }
      }
      checkOrigin(req.method, req.headers, req.url, principal?.via === "bearer", runtime.publicOrigin);

      const rawParams = (await handlerCtx?.params) ?? {};
      const params: Record<string, string> = {};
      for (const [k, v] of Object.entries(rawParams)) if (typeof v === "string") params[k] = v;

      let query: unknown;
      if (opts.query) {
        const parsed = opts.query.safeParse(Object.fromEntries(new URL(req.url).searchParams));
        if (!parsed.success) throw new GatehouseError("bad_request", zodMessage("query", parsed.error));
        query = parsed.data;
      }
      let body: unknown;
      if (opts.body) {
        const empty = opts.bodyOptional ? { emptyAs: {} } : {};
        const handed = handlerCtx?.body;
        const raw = handed ? jsonBodyOf(handed, undefined, empty) : await readJsonBody(req, undefined, empty);
        if (!raw.ok) {
          if (raw.problem === "too_large") throw payloadTooLarge();
          throw new GatehouseError("invalid_body", "the request body must be JSON");
        }
        const parsed = opts.body.safeParse(raw.value);
        if (!parsed.success) throw new GatehouseError("invalid_body", zodMessage("body", parsed.error));
        body = parsed.data;
      }
      // A person's session is judged again once the body is in: reading it may take minutes, and
      // a session ended meanwhile (removed, reset, signed out everywhere, a role taken) must not
      // act. An agent's token is judged again where it matters, as its call is stored.
      if (principal?.kind === "user" && opts.body && !isPublic) {
        const now = await authenticate(runtime.db, req.headers, isSecure(req));
        if (now?.kind !== "user" || now.user.id !== principal.user.id) {
          throw new GatehouseError("unauthenticated", "Sign in first.");
        }
        if (!allows(now, opts.access)) {
          throw new GatehouseError("forbidden", `this needs the ${opts.access.join(" or ")} role`);
        }
        principal = now;
      }
      const out = await handler({ req, runtime, principal, params, body, query } as RouteContext<B, Q>);
      return out instanceof Response ? out : json(out);
    } catch (err) {
      return errorResponse(err);
    }
  };
  return Object.assign(handle, { bodyFromContext: true as const });
}

/** The principal of a non-public route (the wrapper guarantees it). */
export function who(ctx: { principal: Principal | null }): Principal {
  if (!ctx.principal) throw new GatehouseError("unauthenticated", "Sign in first.");
  return ctx.principal;
}
