import "server-only";
import type { KeyObject } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Progress } from "@modelcontextprotocol/client";
import { and, eq, inArray, lt } from "drizzle-orm";
import { GatehouseError, isErrorCode } from "@/lib/errors";
import { type ForwardedMethod, type Forwarder, TakenHere } from "../mcp/remote";
import {
  createGuardedAgent,
  type GuardedAnswer,
  guardedRequest,
  RedirectRefusedError,
  RefusedAddressError,
} from "../net/guarded-fetch";
import type { Db } from "../store/db";
import { first } from "../store/db";
import { dbTimeAgo, replicas, serverHolders } from "../store/schema";
import { SKEW_MS, signInternal } from "./internal-auth";

/** How often a request for a server nobody holds looks again for its holder (ms). */
const HOLDER_LOOK_MS = 250;

/**
 * How long a holder found is used without asking the registry again (ms). A holder that changed
 * meanwhile refuses the request, or cannot be reached, before any tool server is asked; the
 * request is then sent again to the holder the registry names.
 */
export const HOLDER_REMEMBER_MS = 1_000;

/** The internal route: where a replica asks the holder of a stdio server to send a request to it. */
export const INTERNAL_FORWARD_PATH = "/internal/forward";

/** What the holder answers: the tool server's result, or an error as the API shapes it, plus whether the outcome is unknown. */
export type ForwardAnswer =
  | { result: unknown }
  | { error: { code: string; message: string; outcomeUnknown?: boolean } };

/**
 * The content type of a holder's answer that carries the tool server's progress before it: one
 * JSON object per line, the answer last. Asked for with `progress: true` in the request.
 */
export const PROGRESS_STREAM = "application/x-ndjson";

/** How one request is forwarded: its deadline, the caller's signal, and who hears progress. */
export interface ForwardOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Hears the tool server's progress notifications of a `tools/call` as the holder hears them. */
  onProgress?: (progress: Progress) => void;
}

/**
 * `upstream_elsewhere` for a holder that could not be reached or no longer holds the server
 * (stopping, or dead with its lease not yet run out): nothing was sent, and a takeover is near,
 * so the request waits for the next holder as it would with none.
 */
class HolderGone extends GatehouseError {
  /** Said by a property: `instanceof` on GatehouseError's subclasses answers for every GatehouseError. */
  readonly holderGone = true;
  constructor(message: string) {
    super("upstream_elsewhere", message);
  }
}

const isHolderGone = (err: unknown): boolean =>
  typeof err === "object" && err !== null && (err as { holderGone?: unknown }).holderGone === true;

/** A live replica holding a server, and where it is reached. */
interface Holder {
  replica: string;
  address: string;
  label: string;
}

/** Where the holder of a server is, as the registry has it: live replicas only. */
export async function holderOf(
  db: Db,
  server: string,
  leaseMs: number,
): Promise<{ replica: string; address: string | null; label: string } | null> {
  return (
    (await first(
      db
        .select({ replica: replicas.id, address: replicas.address, label: replicas.label })
        .from(serverHolders)
        .innerJoin(replicas, eq(replicas.id, serverHolders.replica))
        .where(and(eq(serverHolders.server, server), lt(dbTimeAgo(leaseMs), replicas.heartbeatAt))),
    )) ?? null
  );
}

/** Of `servers`, those a live replica holds, each with that replica's label. */
export async function holdersOf(db: Db, servers: string[], leaseMs: number): Promise<Map<string, string>> {
  if (servers.length === 0) return new Map();
  const held = await db
    .select({ server: serverHolders.server, label: replicas.label })
    .from(serverHolders)
    .innerJoin(replicas, eq(replicas.id, serverHolders.replica))
    .where(and(inArray(serverHolders.server, servers), lt(dbTimeAgo(leaseMs), replicas.heartbeatAt)));
  return new Map(held.map((h) => [h.server, h.label]));
}

/**
 * Sends requests for stdio servers this replica does not hold to the replica that does, over
 * its internal route ({@link INTERNAL_FORWARD_PATH}), signed with the replicas' shared key
 * (internal-auth.ts). The holder is looked up in the registry, and remembered for
 * {@link HOLDER_REMEMBER_MS} (it changes only when one dies or lets go). Replicas are reached on
 * the addresses they registered, private ones included, through the outbound guard (which checks
 * the address it dials) with redirects refused: a signed body goes to the replica it was signed
 * for or nowhere.
 *
 * Connections to a holder are kept open between requests: a new one per request cost more CPU
 * than the tool call it carried. A holder that stops closes its connections (its kernel does, when
 * it is killed), and a closed connection is not used again. What remains is a request written in
 * the instant a holder dies, or to a holder whose machine vanished: it is answered as sent and
 * broken off (`upstream_error`, outcome unknown), which is what it may be; never as "not sent".
 */
export class ReplicaForwarder implements Forwarder {
  private readonly request = guardedRequest(
    createGuardedAgent({ server: "replicas", allowPrivate: true, connectTimeoutMs: 5_000 }),
    { server: "replicas", allowPrivate: true, credentialHeaders: [], refuseRedirects: true },
  );
  /** Holders found lately, by server, with when each is to be looked up again (ms). */
  private readonly known = new Map<string, { holder: Holder; until: number }>();
  /**
   * Whether this replica holds `server`'s lock now (its `StdioHolding`); set by the runtime once
   * it places servers. A registry row naming this replica is believed only then: a replica whose
   * lock connection was lost keeps its rows until it takes the server again, or another does.
   */
  holdsHere: (server: string) => boolean = () => false;

  constructor(
    private readonly db: Db,
    private readonly key: KeyObject,
    private readonly self: string,
    private readonly leaseMs: number,
    /** How long a holder found is used without asking the registry again (ms). */
    private readonly rememberMs = HOLDER_REMEMBER_MS,
  ) {}

  /**
   * The live holder of `server`, waited for while there is none (its holder died and a survivor
   * has yet to take it): at most two leases, after which the request is refused
   * `upstream_elsewhere` (nothing was sent). A takeover is then no error for a call that arrives
   * during it. {@link TakenHere} at once when this replica took it (the registry names it, and
   * it holds the lock); a row naming it without the lock is waited past like none.
   */
  private async holderSoon(server: string, until: number, signal?: AbortSignal): Promise<Holder> {
    for (;;) {
      const holder = await holderOf(this.db, server, this.leaseMs);
      if (holder?.replica === this.self) {
        // Taken by this replica meanwhile: no other holder is coming.
        if (this.holdsHere(server)) throw new TakenHere(server);
      } else if (holder?.address) return { ...holder, address: holder.address };
      if (Date.now() >= until) {
        throw new GatehouseError(
          "upstream_elsewhere",
          `server ${server} runs on another Gatehouse replica, and none holds it now; try again in a few seconds`,
        );
      }
      await sleep(HOLDER_LOOK_MS, undefined, signal ? { signal } : {}).catch((err: unknown) => {
        throw signal?.aborted ? signal.reason : err;
      });
    }
  }

  holders(servers: string[]): Promise<Map<string, string>> {
    return holdersOf(this.db, servers, this.leaseMs);
  }

  async send(
    server: string,
    method: ForwardedMethod,
    params: Record<string, unknown>,
    opts: ForwardOptions,
  ): Promise<unknown> {
    const remembered = this.known.get(server);
    if (remembered && remembered.until > Date.now()) {
      try {
        return await this.sendTo(remembered.holder, server, method, params, opts);
      } catch (err) {
        // Refused or not reached: nothing was sent to the tool server, so it goes to the
        // holder the registry names now (perhaps the same one, which then refuses again).
        if (!(err instanceof GatehouseError && err.code === "upstream_elsewhere")) throw err;
        this.known.delete(server);
      }
    }
    // A holder gone (stopping, or dead and not yet found so) is waited past like none at all,
    // within the same two leases: its successor takes the server over meanwhile.
    const until = Date.now() + 2 * this.leaseMs;
    for (;;) {
      const holder = await this.holderSoon(server, until, opts.signal);
      try {
        const result = await this.sendTo(holder, server, method, params, opts);
        this.known.set(server, { holder, until: Date.now() + this.rememberMs });
        return result;
      } catch (err) {
        if (!isHolderGone(err) || Date.now() >= until) throw err;
        await sleep(HOLDER_LOOK_MS, undefined, opts.signal ? { signal: opts.signal } : {}).catch(
          (e: unknown) => {
            throw opts.signal?.aborted ? opts.signal.reason : e;
          },
        );
      }
    }
  }

  /** Sends one request to `holder`; `upstream_elsewhere` only when the tool server was not asked. */
  private async sendTo(
    holder: Holder,
    server: string,
    method: ForwardedMethod,
    params: Record<string, unknown>,
    opts: ForwardOptions,
  ): Promise<unknown> {
    // Addressed to the holder: the nonce guards against a replay to it, the address against one to any other.
    const body = JSON.stringify({
      server,
      method,
      params,
      replica: holder.replica,
      ...(opts.onProgress ? { progress: true } : {}),
    });
    const signal = AbortSignal.any([
      AbortSignal.timeout(opts.timeoutMs),
      ...(opts.signal ? [opts.signal] : []),
    ]);
    let res: GuardedAnswer;
    try {
      res = await this.request(`${holder.address}${INTERNAL_FORWARD_PATH}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...signInternal(this.key, "POST", INTERNAL_FORWARD_PATH, body),
        },
        body,
        signal,
      });
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (neverConnected(err)) {
        // Not reached: the tool server was never asked.
        throw new HolderGone(
          `server ${server} runs on replica ${holder.label}, which could not be reached; try again in a few seconds`,
        );
      }
      // Sent, then lost (a reset, the timeout): the holder may have run it.
      throw new GatehouseError(
        "upstream_error",
        `replica ${holder.label} stopped answering about ${server}`,
        {
          cause: new Error("the request to the holder broke off", { cause: err }),
        },
      );
    }
    if (res.status >= 400 && res.status < 500) {
      // The holder's route refused the request before any tool server was asked (internal-route.ts
      // answers 200 for everything it sent on): not the caller's fault, and nothing ran.
      throw await refusedByHolder(res, server, holder.label);
    }
    let answer: ForwardAnswer;
    try {
      answer = (
        opts.onProgress && res.headers.get("content-type")?.startsWith(PROGRESS_STREAM)
          ? await lastAfterProgress(res, opts.onProgress)
          : JSON.parse(await textOf(res))
      ) as ForwardAnswer;
    } catch (err) {
      // The caller gave up while the answer (or its progress) was arriving: as any cancellation.
      if (opts.signal?.aborted) throw opts.signal.reason;
      // The holder took the request and broke off: whether the tool ran is unknown.
      throw new GatehouseError(
        "upstream_error",
        `replica ${holder.label} stopped answering about ${server}`,
        {
          cause: new Error("the holder's answer broke off", { cause: err }),
        },
      );
    }
    if ("result" in answer) return answer.result;
    const { code, message, outcomeUnknown } = answer.error ?? {};
    const known = typeof code === "string" && isErrorCode(code) ? code : "upstream_error";
    throw new GatehouseError(
      known,
      typeof message === "string" ? message : `replica ${holder.label} refused`,
      {
        // `outcomeUnknown` (mcp/failures.ts) reads an upstream error with a cause as "unknown".
        ...(outcomeUnknown ? { cause: new Error("outcome unknown at the holder") } : {}),
      },
    );
  }
}

/**
 * The error for a request the holder's internal route refused (a 4xx): `upstream_elsewhere`, as
 * for a holder not reached, whatever code the holder gave: its `unauthenticated` or
 * `bad_request` is about this replica, and must not reach the caller as the caller's own.
 */
async function refusedByHolder(res: GuardedAnswer, server: string, label: string): Promise<GatehouseError> {
  if (res.status === 401) {
    res.body.resume();
    return new GatehouseError(
      "upstream_elsewhere",
      `server ${server} runs on replica ${label}, which refused this replica's signature: every replica needs the same GATEHOUSE_SECRET_KEY, and clocks within ${SKEW_MS / 1000} s of each other`,
    );
  }
  const said = (await textOf(res)
    .then((text) => JSON.parse(text) as unknown)
    .catch(() => null)) as { error?: { message?: unknown } } | null;
  const why = typeof said?.error?.message === "string" ? said.error.message : `HTTP ${res.status}`;
  const message = `server ${server} runs on replica ${label}, which refused the request (${why}); try again in a few seconds`;
  // 409: not held there (any more), or addressed to another replica: the next holder is waited for.
  return res.status === 409 ? new HolderGone(message) : new GatehouseError("upstream_elsewhere", message);
}

/**
 * Reads a holder's answer sent as {@link PROGRESS_STREAM}: lines `{"progress": {...}}` are the
 * tool server's progress notifications, passed to `onProgress` as they come (when they have the
 * fields progress has); the line with `result` or `error` is the answer, returned parsed.
 */
export async function lastAfterProgress(
  res: GuardedAnswer,
  onProgress: (p: Progress) => void,
): Promise<unknown> {
  let pending = "";
  let answer: unknown;
  // One decoder for the whole body: a character split between two chunks stays whole.
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    pending += decoder.decode(chunk as Buffer, { stream: true });
    for (let end = pending.indexOf("\n"); end !== -1; end = pending.indexOf("\n")) {
      const line = JSON.parse(pending.slice(0, end)) as Record<string, unknown>;
      pending = pending.slice(end + 1);
      if ("result" in line || "error" in line) answer = line;
      else if (isProgress(line.progress)) {
        try {
          onProgress(line.progress);
        } catch {
          // A listener's failure is its own: the answer is still read, and the call not cut off.
        }
      }
    }
  }
  if (answer === undefined) throw new Error("the holder's answer ended without its last line");
  return answer;
}

function isProgress(p: unknown): p is Progress {
  if (typeof p !== "object" || p === null) return false;
  const { progress, total, message } = p as Record<string, unknown>;
  return (
    typeof progress === "number" &&
    (total === undefined || typeof total === "number") &&
    (message === undefined || typeof message === "string")
  );
}

/** The whole body of an answer, as text. */
async function textOf(res: GuardedAnswer): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res.body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Connection errors that mean the request never left this replica. */
const NOT_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "UND_ERR_CONNECT_TIMEOUT"]);

/**
 * Errors that mean it only when raised by `connect`: on a kept connection, an unanswered write
 * ends with them too, and that request may have reached the holder.
 */
const NOT_CONNECTED_AT_CONNECT = new Set(["EHOSTUNREACH", "ENETUNREACH"]);

/** Whether `err` (from fetch) says no connection to the holder was made, so nothing was sent. */
function neverConnected(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NOT_CONNECTED.has(code)) return true;
    if (
      typeof code === "string" &&
      NOT_CONNECTED_AT_CONNECT.has(code) &&
      (e as { syscall?: unknown }).syscall === "connect"
    )
      return true;
    // Refused by the guard before dialling, or a redirect (no holder answers one): not sent to the holder.
    if (e instanceof RefusedAddressError || e instanceof RedirectRefusedError) return true;
  }
  return false;
}
