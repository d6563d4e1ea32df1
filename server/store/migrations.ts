import { readFileSync } from "node:fs";
import path from "node:path";
import { GatehouseError } from "@/lib/errors";

/** A migration as drizzle records it: when it was generated (its journal's `when`), and its tag. */
export interface AppliedMigration {
  when: number;
  tag?: string;
}

/** The migrations this build carries, from `<folder>/meta/_journal.json`, oldest first. */
export function localMigrations(folder: string): AppliedMigration[] {
  const journal = JSON.parse(
    readFileSync(path.join(/*turbopackIgnore: true*/ folder, "meta", "_journal.json"), "utf8"),
  ) as {
    entries: Array<{ when: number; tag: string }>;
  };
  return journal.entries.map((e) => ({ when: e.when, tag: e.tag }));
}

/**
 * Refuses a store migrated by a newer Gatehouse: one holding a migration generated after this
 * build's newest. drizzle's migrator would start anyway (it only applies what is newer than the
 * store) and this build would then read and write tables whose shape it does not know.
 */
export function assertNotNewer(applied: AppliedMigration[], local: AppliedMigration[]): void {
  const newestLocal = local.at(-1);
  const newestApplied = applied.reduce((max, m) => Math.max(max, m.when), 0);
  if (!newestLocal || newestApplied <= newestLocal.when) return;
  throw new GatehouseError(
    "store_config",
    `the store's schema is newer than this Gatehouse's: it was migrated by a newer version (its newest migration is from ${new Date(newestApplied).toISOString()}; this build's newest, ${newestLocal.tag}, is from ${new Date(newestLocal.when).toISOString()}). Run the newer Gatehouse, or upgrade this one`,
  );
}
