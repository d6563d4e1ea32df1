/**
 * Statements prepared once per store (prepared.ts) run where they are used: inside a
 * transaction, on its connection, so they commit or roll back with it, whichever handle built
 * them first. On PostgreSQL they are named, so a connection parses each once.
 */
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { openTestDb, testDialect } from "@/test/support/store";
import { newCall } from "../calls/call-row";
import { insertCall } from "../calls/queries";
import { getToolRow } from "../catalogue/catalogue";
import { type Db, rows, transaction } from "./db";
import { calls } from "./schema";

const call = (text: string) => ({
  ...newCall(
    { kind: "agent", name: "bot" },
    { tool: "demo_add_note", server: "demo", remoteName: "add_note", args: { text }, destructive: true },
  ),
  status: "pending" as const,
});

/** A call inserted inside a transaction that then rolls back; the call. */
async function insertRolledBack(db: Db) {
  const rolledBack = call("rolled back");
  await expect(
    transaction(db, async (tx) => {
      await insertCall(tx, rolledBack);
      throw new Error("roll back");
    }),
  ).rejects.toThrow("roll back");
  return rolledBack;
}

describe("statements prepared once per store", () => {
  it("a statement first run on the store runs inside a later transaction, and rolls back with it", async () => {
    const db = await openTestDb();
    const kept = call("kept");
    await insertCall(db, kept);
    await insertRolledBack(db);
    expect((await db.select({ id: calls.id }).from(calls)).map((c) => c.id)).toEqual([kept.id]);
  });
});

describe.runIf(testDialect === "postgres")("on PostgreSQL", () => {
  it("a statement first run inside a transaction runs in a later one, not on the connection the first gave back", async () => {
    const db = await openTestDb();
    await transaction(db, async (tx) => insertCall(tx, call("builds it")));
    // C takes the connection the first transaction gave back (the pool hands out the last one
    // released) and keeps its transaction open meanwhile.
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let began = () => {};
    const begun = new Promise<void>((r) => {
      began = r;
    });
    const c = transaction(
      db,
      async () => {
        began();
        await held;
      },
      { isolation: "read committed" },
    );
    await begun;
    const rolledBack = await insertRolledBack(db);
    release();
    await c;
    expect(await db.select({ id: calls.id }).from(calls).where(eq(calls.id, rolledBack.id))).toEqual([]);
  });

  it("a call-path statement is prepared under its name on the connection that ran it", async () => {
    const db = await openTestDb();
    const names = await transaction(db, async (tx) => {
      await getToolRow(tx, "demo_add_note");
      return await rows<{ name: string }>(tx, sql`SELECT name FROM pg_prepared_statements`);
    });
    expect(names.map((n) => n.name)).toContain("tools.byLocalName");
  });
});
