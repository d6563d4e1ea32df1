import "server-only";
import dns from "node:dns";
import { isIP } from "node:net";
import type { FetchLike } from "@modelcontextprotocol/client";
import { Agent, buildConnector, fetch as undiciFetch } from "undici";
import { refusedAddressKind } from "./address-policy";

export interface GuardOptions {
  /** Config name of the server, for error messages. */
  server: string;
  allowPrivate: boolean;
  /** Connect timeout in ms. */
  connectTimeoutMs: number;
  /** DNS resolver; tests inject one to simulate answers. Defaults to `dns.lookup`. */
  lookup?: typeof dns.lookup;
  /**
   * Why an address may not be dialled, or null. Defaults to {@link refusedAddressKind}; tests
   * inject a policy that treats one loopback address as public, since they may only send
   * traffic to loopback.
   */
  refuse?: (ip: string) => string | null;
  /** TLS options for https servers (tests pass a self-signed CA). */
  tls?: { ca?: string | Buffer };
}

export class RefusedAddressError extends Error {
  readonly code = "GATEHOUSE_REFUSED_ADDRESS";
}

function refusal(host: string, ip: string, kind: string): RefusedAddressError {
  const shown = host === ip ? ip : `${host} resolves to ${ip}`;
  return new RefusedAddressError(`refused: ${shown}, ${kind}; set allowPrivate to allow`);
}

/**
 * One undici Agent per server, whose connector checks the address actually dialled (after DNS
 * resolution, so a rebinding name cannot slip through) unless the server has `allowPrivate`.
 * Proxy variables are never consulted: this Agent always dials the peer itself.
 */
export function createGuardedAgent(opts: GuardOptions): Agent {
  const lookup = opts.lookup ?? dns.lookup;
  const refuse = opts.refuse ?? refusedAddressKind;
  const guardedLookup = ((
    hostname: string,
    options: dns.LookupOptions,
    callback: (...a: unknown[]) => void,
  ) => {
    lookup(hostname, options, (err: NodeJS.ErrnoException | null, address: unknown, family?: number) => {
      if (err) return callback(err);
      if (!opts.allowPrivate) {
        const addresses = Array.isArray(address)
          ? (address as dns.LookupAddress[]).map((a) => a.address)
          : [address as string];
        for (const ip of addresses) {
          const kind = refuse(ip);
          if (kind) return callback(refusal(hostname, ip, kind));
        }
      }
      callback(null, address, family);
    });
  }) as unknown as typeof dns.lookup;

  const connector = buildConnector({ timeout: opts.connectTimeoutMs, lookup: guardedLookup, ...opts.tls });
  return new Agent({
    connect: (options, callback) => {
      // An IP literal never reaches `lookup`: check it here.
      const host = options.hostname.replace(/^\[|\]$/g, "");
      if (!opts.allowPrivate && isIP(host) !== 0) {
        const kind = refuse(host);
        if (kind) return callback(refusal(host, host, kind), null);
      }
      connector(options, callback);
    },
    keepAliveTimeout: 30_000,
  });
}

export class RedirectRefusedError extends Error {
  readonly code = "GATEHOUSE_REDIRECT_REFUSED";
}

/** Most redirects followed for one request by a server without `allowPrivate`. */
export const MAX_REDIRECTS = 3;

export interface GuardedFetchOptions {
  server: string;
  allowPrivate: boolean;
  /** Names of the configured headers: never sent to another origin after a redirect. */
  credentialHeaders: string[];
  /** Least gap between two requests to this server (default 0: never waits). */
  minIntervalMs?: number;
  /**
   * Follow no redirect at all, whatever `allowPrivate` says (default false). For a destination
   * that is sent a body once, signed for it (webhooks): a redirect would re-send it elsewhere.
   */
  refuseRedirects?: boolean;
}

/**
 * Spaces requests `minIntervalMs` apart, counted from when the previous one actually went out (a
 * timer that fires late must not let the next request through early); callers take turns. Null
 * when there is nothing to space (no await at all).
 */
function pacer(minIntervalMs: number): (() => Promise<void>) | null {
  if (minIntervalMs <= 0) return null;
  let next = 0;
  let turn: Promise<void> = Promise.resolve();
  return () => {
    turn = turn.then(async () => {
      for (let wait = next - Date.now(); wait > 0; wait = next - Date.now()) {
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
      next = Date.now() + minIntervalMs;
    });
    return turn;
  };
}

const ALWAYS_PRIVATE = ["authorization", "cookie", "proxy-authorization", "mcp-session-id"];

function withoutCredentials(headers: RequestInit["headers"], configured: string[]): Headers {
  const out = new Headers(headers);
  for (const name of [...ALWAYS_PRIVATE, ...configured]) out.delete(name);
  return out;
}

/**
 * The fetch an MCP transport uses for one server, through its guarded Agent. Redirects are
 * resolved here, so every hop is dialled (and address-checked) again: a server with
 * `allowPrivate` follows none; others follow at most {@link MAX_REDIRECTS}, never from https to
 * http, and drop the configured headers (and Authorization, cookies, the MCP session) when the
 * origin changes. The SDK never sees a redirect response.
 */
export function guardedFetch(agent: Agent, opts: GuardedFetchOptions): FetchLike {
  const pace = pacer(opts.minIntervalMs ?? 0);
  return (async (input: string | URL, init?: RequestInit) => {
    let url = new URL(String(input));
    let request: RequestInit = { ...init };
    for (let hop = 0; ; hop++) {
      if (pace) await pace();
      const res = await undiciFetch(url, {
        ...(request as Parameters<typeof undiciFetch>[1]),
        dispatcher: agent,
        redirect: "manual",
      });
      const location = res.headers.get("location");
      if (res.status < 300 || res.status >= 400 || location === null) return res as unknown as Response;
      await res.body?.cancel();
      if (opts.refuseRedirects) {
        throw new RedirectRefusedError(
          `refused: ${opts.server} answered with a redirect (${res.status}); it must answer itself`,
        );
      }
      if (opts.allowPrivate) {
        throw new RedirectRefusedError(
          `refused: ${opts.server} answered with a redirect (${res.status}); servers with allowPrivate follow no redirects`,
        );
      }
      if (hop >= MAX_REDIRECTS) {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected more than ${MAX_REDIRECTS} times`);
      }
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected to an invalid URL`);
      }
      if (next.protocol !== "https:" && next.protocol !== "http:") {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected to a ${next.protocol} URL`);
      }
      if (url.protocol === "https:" && next.protocol === "http:") {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected from https to plain http`);
      }
      if (next.username || next.password) {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected to a URL with credentials in it`);
      }
      if (next.origin !== url.origin) {
        request = { ...request, headers: withoutCredentials(request.headers, opts.credentialHeaders) };
      }
      const method = (request.method ?? "GET").toUpperCase();
      if (
        (res.status === 301 || res.status === 302 || res.status === 303) &&
        method !== "GET" &&
        method !== "HEAD"
      ) {
        request = { ...request, method: "GET", body: undefined };
      }
      url = next;
    }
  }) as FetchLike;
}
