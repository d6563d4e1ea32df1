/**
 * A call asked to wait for a reconnecting server (`McpManager.callTool`'s `reconnect`) on a
 * replica that does not hold the server: the holder's state reaches this replica only as events
 * (through PostgreSQL), and this replica may take the server over while the call waits. Either
 * way the call runs once the server is ready, not when its own timeout ends. Two real runtimes on
 * one database, the demo server; PostgreSQL only (SQLite has one process, which runs every server).
 */
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { serverHolders } from "@/server/store/schema";
import { testDialect } from "@/test/support/store";
import type { ReconnectWait } from "../mcp/manager";
import { RemoteSupervisor } from "../mcp/remote";
import { ServerSupervisor } from "../mcp/supervisor";
import { ReplicaForwarder } from "./forward";
import { INTERNAL_KEY_PURPOSE } from "./internal-auth";
import { A_NOTE, type ReplicaPair, resultText, startPair } from "./replica-fixtures";

/** Short, so the survivor takes a stopped holder's server quickly. */
const LEASE_MS = 2_000;
/** Two runtimes and their servers on a loaded 2-core machine. */
const SLOW_TEST = 90_000;

const pairs: ReplicaPair[] = [];
afterEach(async () => {
  for (const pair of pairs.splice(0)) await pair.stop();
});

async function pair(): Promise<ReplicaPair> {
  const started = await startPair({ leaseMs: LEASE_MS });
  pairs.push(started);
  return started;
}

describe.runIf(testDialect === "postgres")("a call waiting for a server another replica holds", () => {
  it(
    "runs as soon as the holder says the server is ready again, not when its timeout ends",
    async () => {
      const { a, b } = await pair();
      const standIn = b.runtime.manager.get("demo");
      expect(standIn).toBeInstanceOf(RemoteSupervisor);
      // What A's supervisor publishes when it restarts the server, heard by B through NOTIFY.
      a.runtime.bus.publish({ type: "server", name: "demo", state: "connecting" });
      await expect.poll(() => standIn.currentState, { timeout: 10_000 }).toBe("connecting");

      const waits: ReconnectWait[] = [];
      const call = b.runtime.manager.callTool(
        "demo",
        "list_notes",
        {},
        { reconnect: { onWaited: (w) => waits.push(w) } },
      );
      a.runtime.bus.publish({ type: "server", name: "demo", state: "ready" });
      const result = await call;
      // Run by A's server: only A's notebook holds the note.
      expect(resultText(result)).toContain(A_NOTE);
      expect(waits).toEqual([expect.objectContaining({ from: "connecting", to: "ready" })]);
      // Woken by the event: a wait that ended by its timeout lasted the server's whole timeoutMs.
      expect(waits[0]?.ms).toBeLessThan(standIn.config.timeoutMs);
    },
    SLOW_TEST,
  );

  it(
    "runs on this replica's own copy when this replica takes the server over while the call waits",
    async () => {
      const { a, b } = await pair();
      const standIn = b.runtime.manager.get("demo");
      a.runtime.bus.publish({ type: "server", name: "demo", state: "connecting" });
      await expect.poll(() => standIn.currentState, { timeout: 10_000 }).toBe("connecting");

      const waits: ReconnectWait[] = [];
      const call = b.runtime.manager.callTool(
        "demo",
        "list_notes",
        {},
        { reconnect: { onWaited: (w) => waits.push(w) } },
      );
      // The holder stops: B takes its lock within the lease and starts the server itself.
      await a.stop();
      const result = await call;
      expect(b.runtime.manager.get("demo")).toBeInstanceOf(ServerSupervisor);
      // B's own notebook (empty), not A's: the call went to the server B started.
      expect(resultText(result)).toBe("The notebook is empty.");
      expect(waits).toEqual([expect.objectContaining({ from: "connecting", to: "ready" })]);
      expect(waits[0]?.ms).toBeLessThan(standIn.config.timeoutMs);
    },
    SLOW_TEST,
  );

  it(
    "a call its stand-in forwards while this replica takes the server itself runs on the server started here, not refused for want of another holder",
    async () => {
      const { a, b } = await pair();
      // A stops: B takes demo (its lock and the holder's row) and runs it.
      await a.stop();
      const manager = b.runtime.manager;
      await expect.poll(() => manager.get("demo"), { timeout: 20_000 }).toBeInstanceOf(ServerSupervisor);
      // The moment of a takeover: the lock and the row are B's, its stand-in still answers.
      await manager.release("demo");
      const standIn = manager.get("demo");
      expect(standIn).toBeInstanceOf(RemoteSupervisor);
      const call = manager.callTool("demo", "list_notes", {});
      await manager.hold("demo");
      const result = await call;
      // B's own notebook (empty): the call ran on the server started here.
      expect(resultText(result)).toBe("The notebook is empty.");
    },
    SLOW_TEST,
  );

  it(
    "a registry row naming this replica while another holds the lock is waited past, not taken for its own: the call reaches the holder",
    async () => {
      const { a, b } = await pair();
      const named = async (replica: string) => {
        await b.runtime.db.update(serverHolders).set({ replica }).where(eq(serverHolders.server, "demo"));
      };
      // A row left behind by B (its lock connection lost, say) while A holds the lock.
      await named(b.runtime.replica.id);
      const forwarder = new ReplicaForwarder(
        b.runtime.db,
        b.runtime.secrets.derive(INTERNAL_KEY_PURPOSE),
        b.runtime.replica.id,
        LEASE_MS,
      );
      let asked = false;
      forwarder.holdsHere = () => {
        // Seen once the row names B: A's row comes back (as when it registers again).
        if (!asked) void named(a.runtime.replica.id);
        asked = true;
        return false;
      };
      const result = await forwarder.send(
        "demo",
        "tools/call",
        { name: "list_notes", arguments: {} },
        { timeoutMs: 10_000 },
      );
      expect(asked).toBe(true);
      // Run by A's server: only A's notebook holds the note.
      expect(resultText(result)).toContain(A_NOTE);
    },
    SLOW_TEST,
  );
});
