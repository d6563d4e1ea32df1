import "server-only";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { and, eq, inArray, lt, ne } from "drizzle-orm";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { dbTimeAgo, replicas } from "../store/schema";

/** How long a replica may go without a heartbeat before the others take it for dead (ms). */
export const DEFAULT_LEASE_MS = 15_000;

/** One replica as the others see it. */
export interface ReplicaInfo {
  id: string;
  /** Where its internal route answers, or null when it gave none. */
  address: string | null;
  /** Host name and process id. */
  label: string;
  startedAt: string;
  heartbeatAt: string;
}

/** How a replica is named to people (the Servers page, logs, the metrics' `replica` label): its host and process. */
export function replicaLabel(): string {
  return `${hostname()} pid ${process.pid}`;
}

/** A new replica's id: random, so a restarted process is a new replica. */
export function newReplicaId(): string {
  return randomBytes(8).toString("hex");
}

export interface ReplicaOptions {
  /** This replica's id ({@link newReplicaId}), as the calls it runs record it. */
  id: string;
  /** Where the other replicas reach this one's internal route (`GATEHOUSE_INTERNAL_URL`), or null. */
  address: string | null;
  /** The lease (see {@link DEFAULT_LEASE_MS}); heartbeats go out five times a lease. */
  leaseMs?: number;
  /**
   * Whether no other Gatehouse can be running on this store (SQLite, under its file lock): every
   * other row is then a process that stopped, dead at once, whatever its last heartbeat.
   */
  alone: boolean;
  log: Logger;
  /**
   * Ends what the replicas `ids` left behind (their running calls), before their rows are
   * deleted. Runs again for the same ids when it fails or this process dies midway, and may run
   * on two survivors at once: it must be idempotent.
   */
  onDead(ids: string[]): Promise<void>;
}

/**
 * This process's row among the replicas serving the store: written when it joins, refreshed by
 * a heartbeat (the database's clock), deleted when it stops. Each heartbeat also looks for
 * replicas whose heartbeat is older than the lease: those died (or lost the database for a whole
 * lease, which is the same to the others), and a survivor ends what they left running
 * ({@link ReplicaOptions.onDead}), then deletes their rows. A replica taken for dead that comes
 * back writes its row again at its next heartbeat; its running calls were interrupted meanwhile,
 * and their outcomes, arriving late, find them no longer running and change nothing.
 */
export class ReplicaRegistry {
  readonly id: string;
  readonly leaseMs: number;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private failing = false;
  /** Whether this replica's row was written once. */
  private joined = false;

  private constructor(
    private readonly db: Db,
    private readonly opts: ReplicaOptions,
  ) {
    this.id = opts.id;
    this.leaseMs = opts.leaseMs ?? DEFAULT_LEASE_MS;
  }

  /**
   * Writes this replica's row, ends what dead replicas left (every other one, when `alone`), and
   * starts the heartbeat. Rejects when the store cannot be written.
   */
  static async join(db: Db, opts: ReplicaOptions): Promise<ReplicaRegistry> {
    const registry = new ReplicaRegistry(db, opts);
    await registry.beat();
    await registry.reap(true);
    const every = Math.max(50, Math.floor(registry.leaseMs / 5));
    registry.timer = setInterval(() => {
      // A tick still running (a slow store) is not overtaken by the next.
      if (registry.ticking) return;
      registry.ticking = registry.tick().finally(() => {
        registry.ticking = null;
      });
    }, every);
    registry.timer.unref();
    return registry;
  }

  /** The replicas whose heartbeat is within the lease, this one included. */
  async live(): Promise<ReplicaInfo[]> {
    return this.db
      .select()
      .from(replicas)
      .where(lt(dbTimeAgo(this.leaseMs), replicas.heartbeatAt));
  }

  private async tick(): Promise<void> {
    try {
      await this.beat();
      await this.reap(false);
      if (this.failing) this.opts.log.info("replica heartbeat works again");
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.opts.log.warn("replica heartbeat failed", { error: String(err) });
      this.failing = true;
    }
  }

  /**
   * Refreshes this replica's heartbeat, or writes its row: at the join, or again when a survivor
   * took this replica for dead (its heartbeat stopped longer than the lease: a stalled process, a
   * slow store) and deleted it, which is said, since its running calls were interrupted then.
   */
  private async beat(): Promise<void> {
    const refreshed = await this.db
      .update(replicas)
      .set({ heartbeatAt: dbTimeAgo(0) })
      .where(eq(replicas.id, this.id))
      .returning({ id: replicas.id });
    if (refreshed.length > 0) return;
    if (this.joined) {
      this.opts.log.warn(
        "this replica was taken for dead (no heartbeat within the lease): calls it was running were interrupted; it serves on",
      );
    }
    this.joined = true;
    const row = {
      id: this.id,
      address: this.opts.address,
      label: replicaLabel(),
    };
    await this.db
      .insert(replicas)
      .values(row)
      .onConflictDoUpdate({ target: replicas.id, set: { heartbeatAt: dbTimeAgo(0) } });
  }

  /**
   * Ends what dead replicas left, then deletes their rows (only those still stale). `first`: the
   * join's look, which also ends what processes left that have no row (stopped before rows
   * existed, or whose row a survivor deleted before it could end their calls), and which, when
   * this process is {@link ReplicaOptions.alone}, takes every other row for dead.
   */
  private async reap(first: boolean): Promise<void> {
    const everyOther = first && this.opts.alone;
    const stale = dbTimeAgo(this.leaseMs);
    const dead = await this.db
      .select({ id: replicas.id, label: replicas.label })
      .from(replicas)
      .where(and(ne(replicas.id, this.id), everyOther ? undefined : lt(replicas.heartbeatAt, stale)));
    if (dead.length === 0 && !first) return;
    const ids = dead.map((d) => d.id);
    await this.opts.onDead(ids);
    if (ids.length === 0) return;
    await this.db
      .delete(replicas)
      .where(and(inArray(replicas.id, ids), everyOther ? undefined : lt(replicas.heartbeatAt, stale)));
    for (const d of dead)
      if (!everyOther) this.opts.log.warn(`replica ${d.label} (${d.id}) stopped heartbeating`);
  }

  /** Stops the heartbeat and deletes this replica's row (what it ran has ended by now). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    await this.db.delete(replicas).where(eq(replicas.id, this.id));
  }
}
