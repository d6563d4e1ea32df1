import "server-only";
import dns from "node:dns";
import { isIP } from "node:net";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
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
          const kind = refusedAddressKind(ip);
          if (kind) return callback(refusal(hostname, ip, kind));
        }
      }
      callback(null, address, family);
    });
  }) as unknown as typeof dns.lookup;

  const connector = buildConnector({ timeout: opts.connectTimeoutMs, lookup: guardedLookup });
  return new Agent({
    connect: (options, callback) => {
      // An IP literal never reaches `lookup`: check it here.
      const host = options.hostname.replace(/^\[|\]$/g, "");
      if (!opts.allowPrivate && isIP(host) !== 0) {
        const kind = refusedAddressKind(host);
        if (kind) return callback(refusal(host, host, kind), null);
      }
      connector(options, callback);
    },
    keepAliveTimeout: 30_000,
  });
}

/**
 * The fetch an MCP transport uses for one server. A server with `allowPrivate` follows no
 * redirect at all; others are left to the SDK's same-origin policy, each hop dialled again
 * through the guarded Agent.
 */
export function guardedFetch(agent: Agent, opts: { allowPrivate: boolean; server: string }): FetchLike {
  return (async (url: string | URL, init?: RequestInit) => {
    const res = await undiciFetch(url, {
      ...(init as Parameters<typeof undiciFetch>[1]),
      dispatcher: agent,
      redirect: "manual",
    });
    if (opts.allowPrivate && res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      throw new Error(
        `server ${opts.server} answered with a redirect, which servers with allowPrivate may not follow`,
      );
    }
    return res as unknown as Response;
  }) as FetchLike;
}
