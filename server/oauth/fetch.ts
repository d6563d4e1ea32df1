import "server-only";
import type { FetchLike } from "@modelcontextprotocol/client";
import type { Agent } from "undici";
import type { ServerConfig } from "../config";
import {
  createGuardedAgent,
  discard,
  type GuardedRequest,
  guardedRequest,
  NULL_BODY_STATUSES,
  RefusedAddressError,
  webStreamOf,
} from "../net/guarded-fetch";

/** Tests pass a policy under which one loopback address counts as public (see server/net). */
export type AddressPolicy = (ip: string) => string | null;

/** The most bytes of one answer of the flow (metadata, registration, token, revocation). */
export const MAX_OAUTH_ANSWER_BYTES = 1024 * 1024;

/**
 * An answer of the flow was larger than {@link MAX_OAUTH_ANSWER_BYTES}. A `TypeError`, as a
 * failed fetch is: the SDK's discovery passes those on rather than falling back to other URLs.
 */
export class OAuthAnswerTooLargeError extends TypeError {
  readonly code = "GATEHOUSE_OAUTH_TOO_LARGE";
}

/**
 * The fetch of one server's OAuth requests (metadata, registration, token, refresh, revocation),
 * through guarded Agents of its own. The server's `allowPrivate` covers its configured URL's
 * origin only: every other host of the flow (its authorization server, the endpoints that
 * server's metadata names) is dialled through a second Agent under the normal address policy,
 * unless `auth.allowPrivate` says otherwise; a metadata document that points an endpoint at a
 * loopback, private or metadata address is refused when the request is dialled. A POST (it
 * carries a code, a verifier, a refresh token or a client secret) follows no redirect; a GET
 * follows the guard's redirects. Every answer is read through a cap of
 * {@link MAX_OAUTH_ANSWER_BYTES}, counted as it streams, and every request ends at the server's
 * `timeoutMs`.
 */
export class OAuthFetch {
  private own: Agent | null = null;
  private other: Agent | null = null;

  constructor(
    private readonly config: ServerConfig,
    private readonly refuse?: AddressPolicy,
  ) {}

  private agent(allowPrivate: boolean): Agent {
    const c = this.config;
    return createGuardedAgent({
      server: c.name,
      allowPrivate,
      connectTimeoutMs: c.timeoutMs,
      ...(this.refuse ? { refuse: this.refuse } : {}),
    });
  }

  get fetch(): FetchLike {
    const c = this.config;
    const ownOrigin = c.url ? new URL(c.url).origin : null;
    const otherPrivate = c.auth?.allowPrivate ?? false;
    this.own ??= this.agent(c.allowPrivate);
    this.other ??= this.agent(otherPrivate);
    const senders = (agent: Agent, allowPrivate: boolean) => {
      const base = { server: c.name, allowPrivate, credentialHeaders: [] };
      return {
        get: guardedRequest(agent, base),
        post: guardedRequest(agent, { ...base, refuseRedirects: true }),
      };
    };
    const own = senders(this.own, c.allowPrivate);
    const other = senders(this.other, otherPrivate);
    return async (input, init) => {
      const url = new URL(String(input));
      const signal = init?.signal
        ? AbortSignal.any([init.signal, AbortSignal.timeout(c.timeoutMs)])
        : AbortSignal.timeout(c.timeoutMs);
      const method = (init?.method ?? "GET").toUpperCase();
      const isOwn = url.origin === ownOrigin;
      const pick = isOwn ? own : other;
      const send: GuardedRequest = method === "GET" || method === "HEAD" ? pick.get : pick.post;
      let answer: Awaited<ReturnType<GuardedRequest>>;
      try {
        answer = await send(url, { ...init, signal });
      } catch (err) {
        throw isOwn || otherPrivate ? err : withAuthHint(err);
      }
      const what = answerName(url, method, init?.body);
      const empty = NULL_BODY_STATUSES.has(answer.status) || method === "HEAD";
      const declared = Number(answer.headers.get("content-length") ?? "");
      if (!empty && Number.isFinite(declared) && declared > MAX_OAUTH_ANSWER_BYTES) {
        discard(answer.body);
        throw tooLarge(what);
      }
      if (empty) answer.body.resume();
      let read = 0;
      const body = empty
        ? null
        : webStreamOf(answer.body, {
            check: (chunk) => {
              read += chunk.length;
              return read > MAX_OAUTH_ANSWER_BYTES ? tooLarge(what) : null;
            },
          });
      // The global Response: the SDK tells an error response from error text with
      // `instanceof Response`, and undici's own class would fail it.
      return new Response(body, {
        status: answer.status,
        statusText: answer.statusText,
        headers: answer.headers,
      });
    };
  }

  async close(): Promise<void> {
    const agents = [this.own, this.other];
    this.own = null;
    this.other = null;
    await Promise.all(agents.map((a) => a?.close().catch(() => undefined)));
  }
}

function tooLarge(what: string): OAuthAnswerTooLargeError {
  return new OAuthAnswerTooLargeError(
    `${what} is larger than 1 MiB (${MAX_OAUTH_ANSWER_BYTES} bytes); Gatehouse stopped reading it`,
  );
}

/** Which answer of the flow a request gets, in the owner's words (for the too-large error). */
function answerName(url: URL, method: string, body: unknown): string {
  const where = `${url.origin}${url.pathname}`;
  if (url.pathname.includes("/.well-known/oauth-protected-resource"))
    return `the resource metadata at ${where}`;
  if (method === "GET") return `the authorization server metadata at ${where}`;
  const form =
    body instanceof URLSearchParams ? body : typeof body === "string" ? new URLSearchParams(body) : null;
  if (form?.has("grant_type")) return `the token answer of ${where}`;
  if (form?.has("token")) return `the revocation answer of ${where}`;
  return `the registration answer of ${where}`;
}

/**
 * The guard's refusal of a host other than the server's own, with the key that allows it: the
 * server's `allowPrivate` does not reach there.
 */
function withAuthHint(err: unknown): unknown {
  for (let e: unknown = err, i = 0; e instanceof Error && i < 8; e = e.cause, i++) {
    if (e instanceof RefusedAddressError) {
      const message = e.message.replace(
        /; set allowPrivate to allow$/,
        "; set auth.allowPrivate to allow (the server's allowPrivate covers its own URL only)",
      );
      return new TypeError("fetch failed", { cause: new RefusedAddressError(message) });
    }
  }
  return err;
}
