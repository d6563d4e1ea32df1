import "server-only";
import { GatehouseError } from "@/lib/errors";
import { AgentMcpEndpoint } from "./agent-mcp/endpoint";
import { AgentLimits, MemoryRates, StoreRates, ToolSets } from "./agents";
import { LoginThrottle } from "./auth/access";
import { issueSetupCode } from "./auth/users";
import { CallBroker } from "./calls/broker";
import { catalogueWriter } from "./catalogue-writer";
import { authSecrets, CREDENTIAL_NAME, type GatehouseConfig, substitutedValues } from "./config";
import { EventBus } from "./events";
import { logger, registerSecrets } from "./log";
import { McpManager } from "./mcp/manager";
import { Metrics } from "./metrics";
import { createNotifier, type Notifier, notificationSecrets } from "./notify/notifier";
import { type AddressPolicy, OAuthSignIns } from "./oauth";
import { type BusBridge, bridgeBus } from "./replicas/bus-bridge";
import { ReplicaForwarder } from "./replicas/forward";
import type { StdioHolding } from "./replicas/holding";
import { INTERNAL_KEY_PURPOSE, InternalVerifier } from "./replicas/internal-auth";
import { answerForwarded, type InternalAnswer, type InternalRequest } from "./replicas/internal-route";
import { placeStdioServers } from "./replicas/placement";
import { DEFAULT_LEASE_MS, newReplicaId, ReplicaRegistry, replicaLabel } from "./replicas/registry";
import { publishChangesSince } from "./replicas/resync";
import { RuleSet } from "./rules";
import { loadSecretKey, SecretBox, type SecretKey } from "./secrets";
import { capWarnings } from "./servers/cap";
import { StoredServerHistory } from "./servers/history";
import { applyServerSwitches, followSwitches } from "./servers/switch";
import { closeDb, type Db, observeTransactions, openStore } from "./store/db";
import { lockStore } from "./store/lock";

const log = logger("gatehouse");

/** Everything that lives for the whole process. One instance, kept on `globalThis`. */
export interface Runtime {
  config: GatehouseConfig;
  db: Db;
  bus: EventBus;
  manager: McpManager;
  broker: CallBroker;
  /** The `rules` of the config, evaluated in worker threads with a time bound. */
  rules: RuleSet;
  /** The `toolSets` of the config: which tools each agent token may see and call. */
  toolSets: ToolSets;
  /** Webhooks and email about calls and catalogue changes: the outbox and its dispatcher. */
  notifier: Notifier;
  throttle: LoginThrottle;
  /** This process's counters and histograms (`/metrics` reads them, with gauges of its own). */
  metrics: Metrics;
  /** `/mcp`: Gatehouse as an MCP server for agents, with its in-memory sessions. */
  agentMcp: AgentMcpEndpoint;
  /** `GATEHOUSE_PUBLIC_ORIGIN`, when Gatehouse is reached through a proxy. */
  publicOrigin: string | undefined;
  /** Seals and opens the secrets the store keeps (OAuth tokens), with the key resolved at start. */
  secrets: SecretBox;
  /** OAuth sign-ins to remote servers: Connect, the callback, Disconnect, the tokens supervisors dial with. */
  signIns: OAuthSignIns;
  /** This process among the replicas serving the store (the only one on SQLite). */
  replica: ReplicaRegistry;
  /** The other replicas' events, heard through PostgreSQL; null on SQLite. */
  bridge: BusBridge | null;
  /** Which stdio servers this replica runs (PostgreSQL); null on SQLite, where it runs them all. */
  holding: StdioHolding | null;
  /**
   * The internal route (`POST /internal/forward`): another replica's request for a stdio server
   * this one holds. Null on SQLite: there is no other replica.
   */
  answerInternal: ((req: InternalRequest) => Promise<InternalAnswer>) | null;
  stop(): Promise<void>;
}

export interface RuntimeOptions {
  config: GatehouseConfig;
  /** SQLite file, or ":memory:"; the file beside which the key file lives. Unused with `databaseUrl`. */
  dbFile: string;
  /** A PostgreSQL URL (`DATABASE_URL`): the store is that database instead of `dbFile`. */
  databaseUrl?: string;
  publicOrigin?: string;
  /**
   * The key of `secrets`. Default: the key file beside `dbFile` (created when missing; a key in
   * memory for ":memory:"), without looking at the environment; `boot` passes the key it resolved
   * with GATEHOUSE_SECRET_KEY. Required with `databaseUrl`: replicas must share one key.
   */
  secretKey?: SecretKey;
  /**
   * Tests only: the outbound guard's address policy for OAuth requests, under which one loopback
   * address counts as public. Default: the guard's own (loopback, private, link-local refused).
   */
  refuseAddress?: AddressPolicy;
  /** Where the other replicas reach this one's internal route (`GATEHOUSE_INTERNAL_URL`). */
  internalUrl?: string;
  /** How long a replica may miss heartbeats before the others take it for dead. Default 15 s. */
  replicaLeaseMs?: number;
  /** `GATEHOUSE_METRICS=off` gives false: nothing is counted and `/metrics` is 404. Default true. */
  metrics?: boolean;
}

/**
 * Wires store, manager, catalogue and broker together and starts dialing servers (no waiting).
 * On SQLite, first takes the store's one-process lock (`lockStore`: throws `StoreInUseError`,
 * having touched nothing, while another live process holds it); `stop()` releases it, as does a
 * failed start. On PostgreSQL there is no such lock: replicas serve one database side by side,
 * each joining the replica registry and hearing the others' events (`server/replicas/`).
 */
export async function createRuntime(opts: RuntimeOptions): Promise<Runtime> {
  if (opts.databaseUrl && !opts.secretKey) {
    throw new GatehouseError(
      "store_config",
      "a runtime on PostgreSQL needs its secret key given (GATEHOUSE_SECRET_KEY)",
    );
  }
  const lock: HeldLock = opts.databaseUrl ? { release: () => undefined } : lockStore(opts.dbFile);
  try {
    return await wireRuntime(opts, lock);
  } catch (err) {
    await lock.release();
    throw err;
  }
}

/**
 * Whether a value looks like a credential on its own: long and mixing letters with digits, or
 * carrying a URL's user-info. Plain words and flags (`warn`, `true`, `production`) do not: were
 * they redacted, every "warn" and every `{"ok":true}` of Gatehouse's own lines would be too.
 */
function looksLikeCredential(value: string): boolean {
  if (value.length >= 20) return true;
  if (/:\/\/[^/\s]*@/.test(value)) return true;
  return value.length >= 8 && /[0-9]/.test(value) && /[A-Za-z]/.test(value);
}

/**
 * The values redacted from logs and views among `vars` (a server's env, or what `${VAR}`
 * references were replaced with): those under a credential's name (any length), and those that
 * look like one whatever their name.
 */
export function envSecrets(vars: Record<string, string>): string[] {
  return Object.entries(vars)
    .filter(([name, value]) => value.length > 0 && (CREDENTIAL_NAME.test(name) || looksLikeCredential(value)))
    .map(([, value]) => value);
}

/** The store's one-server lock on SQLite (a file); nothing on PostgreSQL. */
type HeldLock = { release(): void | Promise<void> };

async function wireRuntime(opts: RuntimeOptions, lock: HeldLock): Promise<Runtime> {
  const { config } = opts;
  registerSecrets(config.servers.flatMap((s) => [...Object.values(s.headers), ...envSecrets(s.env)]));
  // An OAuth client secret, whatever its variable is called: nothing of it may reach a line.
  registerSecrets(authSecrets(config.servers));
  // `${VAR}` values put into args and URLs: a server may print its argv or an error with its URL.
  registerSecrets(envSecrets(Object.fromEntries(substitutedValues())));
  if (config.metrics) registerSecrets([config.metrics.token]);
  // Before the store opens: a refused key file stops the start with nothing opened.
  const secrets = new SecretBox(opts.secretKey ?? loadSecretKey({ env: {}, dbFile: opts.dbFile }));
  const db = await openStore(
    opts.databaseUrl
      ? { dialect: "postgres", url: opts.databaseUrl }
      : { dialect: "sqlite", file: opts.dbFile },
  );
  try {
    return await wireOnStore(opts, lock, db, secrets);
  } catch (err) {
    await closeDb(db);
    throw err;
  }
}

async function wireOnStore(
  opts: RuntimeOptions,
  lock: HeldLock,
  db: Db,
  secrets: SecretBox,
): Promise<Runtime> {
  const { config } = opts;
  // Before anything reads `enabled`: the servers owners switched on from the Servers page.
  for (const warning of await applyServerSwitches(db, config.servers)) log.warn(warning);
  for (const warning of await capWarnings(db, config.servers)) log.warn(warning);
  const bus = new EventBus();
  const shared = opts.databaseUrl !== undefined;
  const replicaId = newReplicaId();
  const metrics = new Metrics(
    config.servers.map((s) => s.name),
    shared ? replicaLabel() : null,
    opts.metrics !== false,
  );
  bus.observeCalls((fact) => {
    // After the commit: a failure to count must not fail a move that is stored.
    try {
      metrics.recordCall(fact);
    } catch (err) {
      log.warn("a call was not counted in the metrics", { error: String(err) });
    }
  });
  observeTransactions(db, (outcome, seconds) => metrics.recordTransaction(outcome, seconds));
  registerSecrets(notificationSecrets(config.notifications));
  const notifier = createNotifier({
    db,
    bus,
    log: logger("notify"),
    config: config.notifications,
    publicOrigin: opts.publicOrigin ?? null,
    ...(shared ? { replica: replicaId } : {}),
  });
  const signIns = await OAuthSignIns.open({
    db,
    secrets,
    servers: config.servers,
    publicOrigin: opts.publicOrigin,
    log: logger("oauth"),
    // A grant stored or forgotten: dial the server with it (or into needs_auth); the state
    // changes that follow tell every browser.
    onGrantChanged: (server) => manager.get(server).reconnectNow(),
    // Every replica reads it again (the bus reaches the others through PostgreSQL).
    onGrantWritten: (server) => bus.publish({ type: "oauth", server }),
    ...(opts.refuseAddress ? { refuse: opts.refuseAddress } : {}),
  });
  // A grant another replica wrote: read again, and dialled with when the sign-in changed (this
  // replica's own writes read the same and change nothing).
  bus.subscribe((e) => {
    if (e.type !== "oauth") return;
    signIns.reread(e.server).then(
      (changed) => changed && manager.get(e.server).reconnectNow(),
      (err: unknown) =>
        log.warn(`the sign-in of ${e.server} could not be read again`, { error: String(err) }),
    );
  });
  const history = new StoredServerHistory(db, logger("mcp"));
  const leaseMs = opts.replicaLeaseMs ?? DEFAULT_LEASE_MS;
  // Replicas sign what they ask each other with a key derived from the secret key they share.
  const internalKey = shared ? secrets.derive(INTERNAL_KEY_PURPOSE) : null;
  const forwarder = internalKey ? new ReplicaForwarder(db, internalKey, replicaId, leaseMs) : null;
  const manager = new McpManager(config, {
    ...(forwarder ? { placement: { forwarder } } : {}),
    log: logger("mcp"),
    signIn: signIns,
    history,
    onState: (s) => bus.publish({ type: "server", name: s.name, state: s.state }),
    // Awaited by the listing: a server is `ready` once its tools are in the catalogue.
    onTools: catalogueWriter({ db, config, bus, notifier, metrics, log }),
    onUpstream: (server, method, outcome, seconds) =>
      metrics.recordUpstream(metrics.bounds.server(server), method, outcome, seconds),
  });
  const rules = new RuleSet(config.rules);
  const toolSets = new ToolSets(config.toolSets);
  // callsPerMinute: in memory on SQLite (one process), in the store with replicas (see rates.ts).
  const limits = new AgentLimits({
    db,
    log: logger("agents"),
    sets: config.toolSets,
    defaults: config.agentLimits,
    rates: shared ? new StoreRates(db) : new MemoryRates(),
  });
  const argumentBytes = new Map(config.servers.map((s) => [s.name, s.maxArgumentBytes]));
  const broker = new CallBroker({
    replica: replicaId,
    db,
    bus,
    log: logger("calls"),
    approvals: config.approvals,
    rules,
    toolSets,
    limits,
    argumentBytesFor: (server) => argumentBytes.get(server),
    callTool: (server, tool, args, opts) => manager.callTool(server, tool, args, opts),
    notify: (txDb, event, call) => notifier.notify(txDb, event, call),
  });

  // Before the broker starts: its first look at running calls must see this replica's row.
  const replica = await ReplicaRegistry.join(db, {
    id: replicaId,
    address: opts.internalUrl ?? null,
    alone: !shared,
    log: logger("replicas"),
    leaseMs,
    onDead: async (ids) => {
      await broker.interruptLeftBy(ids);
      await notifier.replicasDied(ids);
    },
  });
  let bridge: BusBridge | null = null;
  try {
    bridge = shared
      ? await bridgeBus({
          db,
          bus,
          replica: replicaId,
          log: logger("replicas"),
          resync: async (since, publish) => {
            await publishChangesSince(db, publish, since);
            // Server states and sign-ins told meanwhile: read again from the store.
            await manager.reloadElsewhere();
            for (const s of config.servers) {
              if (s.transport !== "stdio" && (await signIns.reread(s.name)))
                manager.get(s.name).reconnectNow();
            }
          },
        })
      : null;
  } catch (err) {
    await replica.stop().catch(() => undefined);
    throw err;
  }

  const runtime: Runtime = {
    config,
    db,
    bus,
    manager,
    broker,
    rules,
    toolSets,
    notifier,
    throttle: new LoginThrottle(db, { onRefused: (reason) => metrics.recordSignInFailure(reason) }),
    metrics,
    agentMcp: new AgentMcpEndpoint({
      db,
      bus,
      broker,
      manager,
      config,
      toolSets,
      log: logger("agent-mcp"),
      publicOrigin: opts.publicOrigin,
    }),
    publicOrigin: opts.publicOrigin,
    secrets,
    signIns,
    replica,
    bridge,
    holding: null,
    answerInternal: internalKey
      ? (() => {
          const verifier = new InternalVerifier(internalKey);
          return (req: InternalRequest) =>
            answerForwarded(req, { verifier, manager, log: logger("replicas"), replica: replicaId });
        })()
      : null,
    async stop() {
      // Sessions first: their held calls stop waiting (and stay pending in the store).
      await runtime.agentMcp.close();
      await broker.stop();
      await limits.flush();
      await rules.close();
      // No server is taken from here on: none starts behind the manager's stop.
      await runtime.holding?.stopTaking();
      await manager.stop();
      // After its servers stopped here: another replica may start them once the locks go.
      await runtime.holding?.close();
      await history.close();
      await signIns.close();
      // Before the store closes: tries in flight are aborted and their rows stay queued.
      await notifier.stop();
      await broker.flushWrites();
      await bridge?.close();
      await replica
        .stop()
        .catch((err: unknown) => log.warn("replica row not removed", { error: String(err) }));
      await closeDb(db);
      await lock.release();
    },
  };
  try {
    await broker.start();
    // After the broker: calls it found interrupted at start are queued by now and go out with the rest.
    notifier.start();
    notifier.onSettled((d) => metrics.recordDelivery(d.channel, d.status === "queued" ? "retry" : d.status));
    await manager.start();
    if (shared && opts.databaseUrl) {
      runtime.holding = await placeStdioServers({
        db,
        url: opts.databaseUrl,
        bus,
        manager,
        replica: replicaId,
        leaseMs,
        log: logger("replicas"),
        follow: () => followSwitches(manager, db),
      });
      const holding = runtime.holding;
      if (forwarder) forwarder.holdsHere = (server) => holding.holds(server);
    }
  } catch (err) {
    // Nothing started may outlive a failed start, nor keep reading a store about to close.
    await runtime.stop().catch(() => undefined);
    throw err;
  }
  return runtime;
}

const KEY = Symbol.for("gatehouse.runtime");
type Holder = { [KEY]?: Runtime };

/** Next.js evaluates server modules more than once; the runtime lives on `globalThis`. */
export function setRuntime(runtime: Runtime | undefined): void {
  (globalThis as Holder)[KEY] = runtime;
}

export function getRuntime(): Runtime {
  const r = (globalThis as Holder)[KEY];
  if (!r) throw new GatehouseError("internal", "Gatehouse is not started");
  return r;
}

/** Prints the one-time setup link while no user exists. */
export async function announceSetup(runtime: Runtime, baseUrl: string): Promise<string | null> {
  const code = await issueSetupCode(runtime.db);
  if (!code) return null;
  const link = `${baseUrl}/setup?code=${code}`;
  process.stdout.write(
    `\n  No users yet. Create the first owner here (this link works once):\n\n    ${link}\n\n`,
  );
  return link;
}
