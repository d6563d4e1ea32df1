import "server-only";
import { hostname } from "node:os";
import { GatehouseError } from "@/lib/errors";
import { DEFAULT_LEASE_MS } from "./registry";

/** What a replica takes from its environment. */
export interface ReplicaEnv {
  /** Where the other replicas reach this one (its internal route): an http(s) origin. */
  internalUrl: string;
  leaseMs: number;
}

/**
 * `GATEHOUSE_INTERNAL_URL` (default: `http://<HOST>:<PORT>`, the machine's host name when HOST is
 * a wildcard address) and `GATEHOUSE_REPLICA_LEASE_SECONDS` (1 to 300, default 15). Throws
 * `store_config`, naming the variable, on a value that is neither.
 */
export function replicaEnv(env: Record<string, string | undefined> = process.env): ReplicaEnv {
  const lease = env.GATEHOUSE_REPLICA_LEASE_SECONDS?.trim();
  let leaseMs = DEFAULT_LEASE_MS;
  if (lease) {
    const seconds = Number(lease);
    if (!Number.isFinite(seconds) || seconds < 1 || seconds > 300)
      throw new GatehouseError(
        "store_config",
        "GATEHOUSE_REPLICA_LEASE_SECONDS must be a number of seconds from 1 to 300",
      );
    leaseMs = Math.round(seconds * 1000);
  }
  const given = env.GATEHOUSE_INTERNAL_URL?.trim();
  if (given) {
    let url: URL;
    try {
      url = new URL(given);
    } catch {
      throw new GatehouseError(
        "store_config",
        "GATEHOUSE_INTERNAL_URL must be an http(s) URL, such as http://10.0.0.5:3000",
      );
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.username || url.password)
      throw new GatehouseError(
        "store_config",
        "GATEHOUSE_INTERNAL_URL must be an http(s) URL without credentials, such as http://10.0.0.5:3000",
      );
    return { internalUrl: url.origin, leaseMs };
  }
  const listen = env.HOST ?? "127.0.0.1";
  const host = listen === "0.0.0.0" || listen === "::" || listen === "[::]" ? hostname() : listen;
  return { internalUrl: `http://${host.includes(":") ? `[${host}]` : host}:${env.PORT ?? "3000"}`, leaseMs };
}
