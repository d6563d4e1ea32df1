/**
 * Each stdio server runs on exactly one replica (PRODUCT.md §14): the one holding its advisory
 * lock, recorded in `server_holders`; the other replicas forward its calls and reads to that
 * holder over the internal route, and a survivor takes the server when the holder stops. Two real
 * runtimes on one PostgreSQL database, real MCP servers (the demo notebook, a resource server, a
 * prompt server), the real internal listeners on loopback.
 *
 * Two runtimes on one store exist only on PostgreSQL (SQLite is one process per file, which runs
 * every server itself): on SQLite there is nothing to place, and the suite does not run.
 */
import { eq, sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { first, rows } from "@/server/store/db";
import { calls, replicas } from "@/server/store/schema";
import { ADD_NOTE, LIST_NOTES, waitForServersReady } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { RemoteSupervisor } from "../mcp/remote";
import { ServerSupervisor } from "../mcp/supervisor";
import { listServerPrompts, listServerResources, readServerResource } from "../servers/inspect";
import { holderOf } from "./forward";
import {
  A_NOTE,
  AGENT,
  closedPort,
  type ReplicaPair,
  recordedHolder,
  resultText,
  startPair,
} from "./replica-fixtures";

/** The advisory lock space of stdio servers (holding.ts): "ghst". */
const STDIO_LOCK_SPACE = 0x6768_7374;
/** Short, so a survivor takes a stopped holder's servers quickly. */
const LEASE_MS = 2_000;
/** Two runtimes and their servers on a loaded 2-core machine. */
const SLOW_TEST = 90_000;

const pairs: ReplicaPair[] = [];
afterEach(async () => {
  for (const pair of pairs.splice(0)) await pair.stop();
});

async function pair(opts: { reads?: boolean } = {}): Promise<ReplicaPair> {
  const started = await startPair({ leaseMs: LEASE_MS, ...opts });
  pairs.push(started);
  return started;
}

/** The `replica` column of call `id`: the replica that committed it running and asked its tool. */
async function callReplica(pair: ReplicaPair, id: string): Promise<string | null> {
  const row = await first(
    pair.a.runtime.db.select({ replica: calls.replica }).from(calls).where(eq(calls.id, id)),
  );
  return row?.replica ?? null;
}

describe.runIf(testDialect === "postgres")("stdio servers placed on one replica", () => {
  it(
    "exactly one of two replicas runs a stdio server: the lock's holder, recorded in server_holders",
    async () => {
      const { a, b } = await pair();
      expect(await recordedHolder(a.runtime, "demo")).toBe(a.runtime.replica.id);
      expect(a.runtime.holding?.holds("demo")).toBe(true);
      expect(b.runtime.holding?.holds("demo")).toBe(false);
      // A supervises a live child; B only stands in for it, and says it runs elsewhere.
      const onA = a.runtime.manager.get("demo");
      const onB = b.runtime.manager.get("demo");
      expect(onA).toBeInstanceOf(ServerSupervisor);
      expect(onA.snapshot().state).toBe("ready");
      expect(onA.snapshot().elsewhere).toBeFalsy();
      expect(onB).toBeInstanceOf(RemoteSupervisor);
      expect(onB.snapshot().elsewhere).toBe(true);
      // B's stand-in still shows the holder's state, from its history and events.
      expect(onB.snapshot().state).toBe("ready");
    },
    SLOW_TEST,
  );

  it(
    "a tool call made on the replica that does not run the server runs on the holder, with the holder's answer",
    async () => {
      const p = await pair();
      const { a, b } = p;
      const viaA = (await a.runtime.broker.request(AGENT, { tool: LIST_NOTES, arguments: {} })).call;
      const viaB = (await b.runtime.broker.request(AGENT, { tool: LIST_NOTES, arguments: {} })).call;
      expect(viaB.status).toBe("succeeded");
      // Only A's notebook holds the note: B's own demo server (never started) would list none.
      expect(resultText(viaB.result)).toContain(A_NOTE);
      expect(viaB.result).toEqual(viaA.result);

      const added = (await b.runtime.broker.request(AGENT, { tool: ADD_NOTE, arguments: { text: "via B" } }))
        .call;
      expect(added.status).toBe("succeeded");
      expect(resultText(added.result)).toBe("Added note 2: via B");
      expect(a.demoRuns()).toBe(1);
      expect(b.demoRuns()).toBe(0);
      // The call row names the replica that asked (B): its death, not A's, leaves the call interrupted.
      expect(await callReplica(p, added.id)).toBe(b.runtime.replica.id);
      expect(await callReplica(p, viaA.id)).toBe(a.runtime.replica.id);
    },
    SLOW_TEST,
  );

  it(
    "a call forwarded to a holder that is (re)starting the server waits for it instead of failing as connecting",
    async () => {
      const { a, b } = await pair();
      const onB = b.runtime.manager.get("demo");
      expect(onB).toBeInstanceOf(RemoteSupervisor);
      // Sent the moment A's server starts connecting, before B can have heard of it (as when the
      // holder died and its successor is starting the server): B forwards at once.
      const forwarded = new Promise<unknown>((resolve, reject) => {
        const stop = a.runtime.bus.subscribe((e) => {
          if (e.type === "server" && e.name === "demo" && e.state === "connecting") {
            stop();
            onB.callTool("list_notes", {}).then(resolve, reject);
          }
        });
      });
      a.runtime.manager.get("demo").reconnectNow();
      expect(resultText(await forwarded)).toContain(A_NOTE);
    },
    SLOW_TEST,
  );

  it(
    "Reconnect pressed on the replica that does not run the server reconnects it on the holder",
    async () => {
      const { a, b } = await pair();
      const reconnected = new Promise<void>((resolve) => {
        const stop = a.runtime.bus.subscribe((e) => {
          if (e.type === "server" && e.name === "demo" && e.state === "connecting") {
            stop();
            resolve();
          }
        });
      });
      b.runtime.manager.get("demo").reconnectNow();
      await reconnected;
      await waitForServersReady(a.runtime, ["demo"]);
    },
    SLOW_TEST,
  );

  it(
    "resources and prompts read on the replica that does not run the server come from the holder's server",
    async () => {
      const { a, b } = await pair({ reads: true });
      const files = b.runtime.manager.get("files");
      expect(files).toBeInstanceOf(RemoteSupervisor);
      const listed = await listServerResources(files);
      expect(listed.supported).toBe(true);
      // B's own configuration serves from-b.md: the listing is A's server's.
      expect(listed.resources.map((r) => r.name)).toEqual(["from-a.md"]);
      expect(listed).toEqual(await listServerResources(a.runtime.manager.get("files")));
      const uri = listed.resources[0]?.uri ?? "";
      const read = await readServerResource(files, uri);
      expect(read.contents[0]?.text).toContain("served by replica A");

      const prompts = b.runtime.manager.get("prompts");
      expect(prompts).toBeInstanceOf(RemoteSupervisor);
      const count = async () =>
        Number(resultText(await a.runtime.manager.callTool("prompts", "list_count", {})));
      const before = await count();
      const listedPrompts = await listServerPrompts(prompts);
      expect(listedPrompts.supported).toBe(true);
      expect(listedPrompts.prompts.map((x) => x.name)).toContain("greet");
      // The prompt server on A answered B's listing.
      expect(await count()).toBe(before + 1);
      const greeting = await prompts.read((client, options) =>
        client.getPrompt({ name: "greet", arguments: { who: "B" } }, options),
      );
      expect(greeting.messages[0]?.content).toEqual({ type: "text", text: "Hello, B!" });
    },
    SLOW_TEST,
  );

  it(
    "when the holder stops, the survivor takes its server within the lease and calls run there",
    async () => {
      const { a, b } = await pair();
      const stopped = Date.now();
      await a.stop();
      await expect
        .poll(() => b.runtime.holding?.holds("demo"), { timeout: LEASE_MS + 5_000, interval: 100 })
        .toBe(true);
      expect(Date.now() - stopped).toBeLessThan(LEASE_MS + 5_000);
      expect(await recordedHolder(b.runtime, "demo")).toBe(b.runtime.replica.id);
      expect(b.runtime.manager.get("demo")).toBeInstanceOf(ServerSupervisor);
      await waitForServersReady(b.runtime, ["demo"]);

      const added = (await b.runtime.broker.request(AGENT, { tool: ADD_NOTE, arguments: { text: "on B" } }))
        .call;
      expect(added.status).toBe("succeeded");
      // B's own notebook now: the server runs on B with B's configuration.
      expect(resultText(added.result)).toBe("Added note 1: on B");
      expect(b.demoRuns()).toBe(1);
    },
    SLOW_TEST,
  );

  it(
    "a holder whose lock connection is cut stops the server, and exactly one replica runs it again within the lease",
    async () => {
      const { a, b } = await pair();
      const cutAt = Date.now();
      const [cut] = await rows<{ pid: number }>(
        a.runtime.db,
        sql`SELECT pg_terminate_backend(pid) AS ok, pid FROM pg_locks
            WHERE locktype = 'advisory' AND objsubid = 2 AND classid = ${STDIO_LOCK_SPACE}
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      expect(cut?.pid).toBeTypeOf("number");
      // Whichever replica looks first takes the lock again (A reconnects, B tries every look).
      const settled = async () => {
        const [lock] = await rows<{ pid: number }>(
          a.runtime.db,
          sql`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2
                AND classid = ${STDIO_LOCK_SPACE} AND granted
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        if (!lock || lock.pid === cut?.pid) return null;
        const id = await recordedHolder(a.runtime, "demo");
        const [holder, other] = id === a.runtime.replica.id ? [a, b] : [b, a];
        const running = holder.runtime.manager.get("demo");
        const ready =
          holder.runtime.holding?.holds("demo") === true &&
          running instanceof ServerSupervisor &&
          running.snapshot().state === "ready" &&
          other.runtime.holding?.holds("demo") === false &&
          other.runtime.manager.get("demo") instanceof RemoteSupervisor;
        return ready ? { holder, other } : null;
      };
      await expect.poll(settled, { timeout: LEASE_MS + 5_000, interval: 100 }).not.toBeNull();
      expect(Date.now() - cutAt).toBeLessThan(LEASE_MS + 5_000);
      const placed = await settled();
      if (!placed) throw new Error("the server was placed, then moved again");
      const call = (
        await placed.other.runtime.broker.request(AGENT, { tool: ADD_NOTE, arguments: { text: "after" } })
      ).call;
      expect(call.status).toBe("succeeded");
      expect(placed.holder.demoRuns()).toBe(1);
      expect(placed.other.demoRuns()).toBe(0);
    },
    SLOW_TEST,
  );

  it(
    "a call for a server whose live holder cannot be reached fails upstream_elsewhere, and nothing reaches the tool server",
    async () => {
      const { a, b } = await pair();
      // A's heartbeat goes on (its row stays live), but nothing answers where it says it listens.
      const port = await closedPort();
      await a.runtime.db
        .update(replicas)
        .set({ address: `http://127.0.0.1:${port}` })
        .where(eq(replicas.id, a.runtime.replica.id));
      expect((await holderOf(b.runtime.db, "demo", LEASE_MS))?.replica).toBe(a.runtime.replica.id);

      const err = await b.runtime.manager.callTool("demo", "add_note", { text: "never" }).catch((e) => e);
      expect(err).toBeInstanceOf(GatehouseError);
      expect((err as GatehouseError).code).toBe("upstream_elsewhere");
      expect((err as GatehouseError).status).toBe(502);

      const call = (await b.runtime.broker.request(AGENT, { tool: ADD_NOTE, arguments: { text: "never" } }))
        .call;
      // Failed, not interrupted: the outcome is known, nothing was sent.
      expect(call.status).toBe("failed");
      expect(call.error?.code).toBe("upstream_elsewhere");
      expect(a.demoRuns()).toBe(0);
      expect(b.demoRuns()).toBe(0);
      // A still runs the server, untouched.
      expect(a.runtime.manager.get("demo").snapshot().state).toBe("ready");
    },
    SLOW_TEST,
  );
});
