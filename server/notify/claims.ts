import "server-only";
import { and, eq, inArray, isNotNull, isNull, lte, notInArray, or } from "drizzle-orm";
import type { Db } from "../store/db";
import { notificationDeliveries, replicas } from "../store/schema";
import { type DeliveryRow, nowIso } from "./outbox";

/**
 * Claims on the outbox's rows: a dispatcher takes a due row for one try under a lease
 * (`claimedUntil`, and `claimedBy` on replicas), and claims are given back when a try is cut
 * short or its claimant is gone. See dispatcher.ts for who claims when.
 */

/**
 * Takes a due row for one try, in ONE conditional update: `claimedUntil` is set to `until`, the
 * end of the try's lease, only while the row is still queued, due, and unclaimed (or its claim
 * has run out). Returns whether this caller took it. Of several dispatchers (processes on one
 * PostgreSQL store) that read the same due row, one takes it: the UPDATE locks the row and, under
 * READ COMMITTED, re-checks its WHERE against the newest committed version, which another's
 * claim has changed; on SQLite one statement runs at a time. A lease rather than a status: a
 * process that dies mid-try leaves the row queued, due again at `until` (or at the next start,
 * {@link releaseClaims}), so it is sent again (the receiver may see it twice, never zero times).
 */
export async function claimDelivery(
  db: Db,
  row: Pick<DeliveryRow, "id" | "nextAttemptAt">,
  until: string,
  by: string | null = null,
): Promise<boolean> {
  const now = nowIso();
  const taken = await db
    .update(notificationDeliveries)
    .set({ claimedUntil: until, claimedBy: by })
    .where(
      and(
        eq(notificationDeliveries.id, row.id),
        eq(notificationDeliveries.status, "queued"),
        lte(notificationDeliveries.nextAttemptAt, now),
        or(isNull(notificationDeliveries.claimedUntil), lte(notificationDeliveries.claimedUntil, now)),
      ),
    )
    .returning({ id: notificationDeliveries.id });
  return taken.length > 0;
}

/** Gives a claimed row back untried (a stop cut the try short): due again at once. */
export async function releaseDelivery(db: Db, id: number, claimedUntil: string): Promise<void> {
  await db
    .update(notificationDeliveries)
    .set({ claimedUntil: null })
    .where(
      and(
        eq(notificationDeliveries.id, id),
        eq(notificationDeliveries.status, "queued"),
        eq(notificationDeliveries.claimedUntil, claimedUntil),
      ),
    );
}

/**
 * Ends every claim: at start, while this process is the only one serving the store (its lock),
 * a claim is one a process that died mid-try left, and its row is due again at once.
 */
export async function releaseClaims(db: Db): Promise<void> {
  await db
    .update(notificationDeliveries)
    .set({ claimedUntil: null })
    .where(isNotNull(notificationDeliveries.claimedUntil));
}

/**
 * Gives back the claims of replicas that are gone: `dead` (their lease ran out) or named by no
 * replica row. A try they had under way may have reached its destination; the row goes out again
 * (at least once, with the same `deliveryId`), as after a crash of a process serving alone.
 * Returns how many rows were given back.
 */
export async function releaseClaimsOf(db: Db, dead: string[]): Promise<number> {
  const d = notificationDeliveries;
  const released = await db
    .update(d)
    .set({ claimedUntil: null, claimedBy: null })
    .where(
      and(
        eq(d.status, "queued"),
        isNotNull(d.claimedBy),
        or(
          dead.length > 0 ? inArray(d.claimedBy, dead) : undefined,
          notInArray(d.claimedBy, db.select({ id: replicas.id }).from(replicas)),
        ),
      ),
    )
    .returning({ id: d.id });
  return released.length;
}
