import { constants as osConstants } from "node:os";
import "server-only";
import { GatehouseError } from "@/lib/errors";
import { configPathFromEnv, formatIssues, loadConfigFile } from "./config";
import { logger, registerSecrets } from "./log";
import { replicaEnv } from "./replicas/env";
import { announceSetup, createRuntime, getRuntime, type Runtime, setRuntime } from "./runtime";
import {
  describeSecretKey,
  loadSecretKey,
  SECRET_KEY_ENV,
  type SecretKey,
  SecretKeyError,
  secretKeyValues,
} from "./secrets";
import { dbPathFromEnv } from "./store/db";
import { describeLocation, type StoreLocation, storeLocation } from "./store/location";
import { StoreInUseError } from "./store/lock";
import { otlpEndpoint, startTracing, stopTracing } from "./tracing";

const log = logger("boot");

/**
 * Signals within this long of the one that began a stop are that same signal delivered again:
 * Ctrl-C reaches the server from the terminal (its whole process group) and once more forwarded
 * by `npm start`, and a service manager may signal the group as well as the main process.
 */
export const SAME_SIGNAL_MS = 1000;

/** The signals that stop Gatehouse in order: Ctrl-C, a service manager's stop, a closed terminal. */
const STOP_SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/** `http://HOST:PORT` as the console link should show it, or `GATEHOUSE_PUBLIC_ORIGIN`. */
export function baseUrlFromEnv(env: Record<string, string | undefined> = process.env): string {
  if (env.GATEHOUSE_PUBLIC_ORIGIN) return env.GATEHOUSE_PUBLIC_ORIGIN.replace(/\/$/, "");
  const listen = env.HOST ?? "127.0.0.1";
  // A wildcard listen address is no name a browser can be sent to (and no allowed Host): on
  // this machine, loopback reaches it.
  const host = listen === "0.0.0.0" ? "127.0.0.1" : listen === "::" || listen === "[::]" ? "::1" : listen;
  return `http://${host.includes(":") ? `[${host}]` : host}:${env.PORT ?? "3000"}`;
}

/**
 * Starts the process-wide runtime once: validates the config (exiting non-zero on any error),
 * chooses the store (`DATABASE_URL` names PostgreSQL, else the SQLite file `GATEHOUSE_DB`; exiting
 * non-zero on a `DATABASE_URL` that is no PostgreSQL URL), resolves the secret key
 * (GATEHOUSE_SECRET_KEY, else on SQLite the key file beside the store, created on the first start;
 * exiting non-zero, saying what to do, when either is refused), takes the store's lock (exiting
 * non-zero, naming the holder, while another Gatehouse process has it), opens the store (exiting
 * non-zero when PostgreSQL cannot be reached or its schema is newer than this build), applies
 * migrations, starts the MCP manager in the background and, unless `announce` is false
 * (server/main.ts prints it once it listens), prints the setup link while no user exists. A
 * second call returns the running runtime.
 */
export async function boot({ announce = true }: { announce?: boolean } = {}): Promise<Runtime> {
  try {
    return getRuntime();
  } catch {
    // Not started yet.
  }
  const path = configPathFromEnv();
  const result = loadConfigFile(path);
  if (!result.config || result.errors.length > 0) {
    process.stderr.write(`Gatehouse cannot start: ${path} has errors\n${formatIssues(result)}\n`);
    process.exit(1);
  }
  if (result.warnings.length > 0)
    log.warn(`config warnings\n${formatIssues({ config: null, errors: [], warnings: result.warnings })}`);
  registerSecrets(secretKeyValues(process.env));
  try {
    // Before anything else starts, so every request is traced; nothing is loaded when it is unset.
    if (await startTracing(process.env))
      log.info(`traces go to ${new URL(otlpEndpoint(process.env) ?? "").origin} (OTLP/HTTP)`);
  } catch (err) {
    process.stderr.write(`Gatehouse cannot start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  let runtime: Runtime;
  let secretKey: SecretKey;
  let location: StoreLocation;
  try {
    location = storeLocation();
    const replica = replicaEnv();
    // At boot, not at the first sign-in: a refused key stops the start here, before anything
    // listens, and a new key file exists from the first start on, to be backed up with the store.
    secretKey = loadSecretKey({ env: process.env, dbFile: dbPathFromEnv(), dialect: location.dialect });
    runtime = await createRuntime({
      config: result.config,
      dbFile: dbPathFromEnv(),
      ...(location.dialect === "postgres" ? { databaseUrl: location.url } : {}),
      publicOrigin: process.env.GATEHOUSE_PUBLIC_ORIGIN,
      secretKey,
      internalUrl: replica.internalUrl,
      replicaLeaseMs: replica.leaseMs,
      metrics: process.env.GATEHOUSE_METRICS?.trim().toLowerCase() !== "off",
    });
  } catch (err) {
    // Another Gatehouse owns the store, the key is refused, the store is unreachable or newer:
    // said like a config error, and nothing of the store was written.
    const known =
      err instanceof StoreInUseError ||
      err instanceof SecretKeyError ||
      (err instanceof GatehouseError && (err.code === "store_unavailable" || err.code === "store_config"));
    if (!known) throw err;
    process.stderr.write(`Gatehouse cannot start: ${err.message}\n`);
    process.exit(1);
  }
  setRuntime(runtime);
  log.info(`config ${path}; store ${describeLocation(location)}; ${result.config.servers.length} server(s)`);
  log.info(describeSecretKey(secretKey));
  if (secretKey.unusedFile)
    log.warn(`${SECRET_KEY_ENV} is set, so the key file ${secretKey.unusedFile} is not used`);
  if (announce) await announceSetup(runtime, baseUrlFromEnv());

  // Handlers stay installed while the stop runs: a signal with none would kill the process at
  // once, skipping the exit hooks that remove the store's lock file and stop tool servers.
  let stoppingSince: number | null = null;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stoppingSince !== null) {
      if (Date.now() - stoppingSince < SAME_SIGNAL_MS) return;
      // Asked again: stop now. The exit hooks still kill the tool servers and remove the lock.
      log.warn(`${signal} again: exiting without waiting for the stop to finish`);
      process.exit(128 + (osConstants.signals[signal] ?? 0));
    }
    stoppingSince = Date.now();
    log.info(`${signal}: stopping tool servers`);
    void runtime
      .stop()
      .then(() => stopTracing())
      .finally(() => process.exit(0));
  };
  for (const signal of STOP_SIGNALS) process.on(signal, shutdown);
  // A promise nobody awaited that failed is a bug, but one that must not stop every agent's
  // calls (Node exits on it by default): a store that went away for a moment is the usual cause.
  process.on("unhandledRejection", (reason) => {
    log.error("a failure nobody handled (a bug: please report it); Gatehouse goes on", {
      error: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason),
    });
  });
  return runtime;
}
