/**
 * The internal route (`POST /internal/forward`), as another replica reaches it: over HTTP, on
 * the address a replica registered, through its real listener. Only a request signed with the
 * replicas' shared key, new (its nonce unseen) and recent, is read; anything else is refused with
 * the API's error body and never reaches the tool server. A signed request for a server this
 * replica does not hold is refused too, not forwarded again. The demo server's state file counts
 * every `add_note` that really ran.
 *
 * The route exists only where replicas share a store, PostgreSQL (on SQLite the runtime has no
 * internal route: `answerInternal` is null), so the suite runs on PostgreSQL alone.
 */
import { createSecretKey, type KeyObject, randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { type TestRuntime, waitForServersReady } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { outcomeUnknown } from "../mcp/failures";
import { INTERNAL_FORWARD_PATH, ReplicaForwarder } from "./forward";
import { INTERNAL_KEY_PURPOSE, SKEW_MS, signInternal } from "./internal-auth";
import { internalAddress, type ReplicaPair, resultText, startPair } from "./replica-fixtures";

/** Two runtimes on a loaded 2-core machine. */
const SLOW_START = 90_000;

let pair: ReplicaPair | null = null;
let key: KeyObject;

/** The pair started for the file (A holds the demo server; B does not). */
function replicas(): ReplicaPair {
  if (!pair) throw new Error("the replicas did not start");
  return pair;
}

const onPostgres = testDialect === "postgres";

beforeAll(async () => {
  if (!onPostgres) return;
  pair = await startPair();
  // What every replica signs with: derived from the secret key they share.
  key = pair.a.runtime.secrets.derive(INTERNAL_KEY_PURPOSE);
}, SLOW_START);
afterAll(async () => {
  await pair?.stop();
});

/**
 * A forwarded `add_note` call on the demo server, as the asking replica writes it: addressed to
 * `to` (default A, the holder).
 */
const addNote = (text: string, to: TestRuntime = replicas().a): string =>
  JSON.stringify({
    server: "demo",
    method: "tools/call",
    params: { name: "add_note", arguments: { text } },
    replica: to.runtime.replica.id,
  });

/** Posts `body` with `headers` to the internal route of `target`, over its listener. */
async function post(
  target: TestRuntime,
  body: string,
  headers: Record<string, string>,
  method = "POST",
): Promise<Response> {
  const url = `${await internalAddress(target.runtime)}${INTERNAL_FORWARD_PATH}`;
  return fetch(url, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(method === "POST" ? { body } : {}),
  });
}

/** The headers a replica signs `body` with, as if its clock read `at`. */
function signedAt(at: number, body: string): Record<string, string> {
  vi.useFakeTimers({ toFake: ["Date"] });
  try {
    vi.setSystemTime(at);
    return signInternal(key, "POST", INTERNAL_FORWARD_PATH, body);
  } finally {
    vi.useRealTimers();
  }
}

/** `res` is a refusal with `status` and the API's error body of `code`. */
async function expectRefused(res: Response, status: number, code: string): Promise<void> {
  expect(res.status).toBe(status);
  expect(await res.json()).toEqual({ error: { code, message: expect.any(String) } });
}

/** Runs `fn` and asserts that no `add_note` ran on either replica's demo server meanwhile. */
async function nothingRuns(fn: () => Promise<void>): Promise<void> {
  const { a, b } = replicas();
  const before = [a.demoRuns(), b.demoRuns()];
  await fn();
  expect([a.demoRuns(), b.demoRuns()]).toEqual(before);
}

describe.runIf(onPostgres)("the internal route", () => {
  it("runs a request signed with the replicas' key on the server this replica holds", async () => {
    const { a } = replicas();
    const before = a.demoRuns();
    const body = addNote("signed");
    const res = await post(a, body, signInternal(key, "POST", INTERNAL_FORWARD_PATH, body));
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { result: unknown };
    expect(resultText(answer.result)).toMatch(/^Added note \d+: signed$/);
    expect(a.demoRuns()).toBe(before + 1);
  });

  it("refuses an unsigned request 401, and the tool never runs", async () => {
    const { a } = replicas();
    await nothingRuns(async () => {
      await expectRefused(await post(a, addNote("unsigned"), {}), 401, "unauthenticated");
    });
  });

  it("refuses a request signed with another key 401, and the tool never runs", async () => {
    const { a } = replicas();
    const other = createSecretKey(randomBytes(32));
    const body = addNote("another key");
    await nothingRuns(async () => {
      const res = await post(a, body, signInternal(other, "POST", INTERNAL_FORWARD_PATH, body));
      await expectRefused(res, 401, "unauthenticated");
    });
  });

  it("refuses a replayed request 401: the tool runs once, for the original", async () => {
    const { a } = replicas();
    const body = addNote("sent twice");
    const headers = signInternal(key, "POST", INTERNAL_FORWARD_PATH, body);
    const before = a.demoRuns();
    expect((await post(a, body, headers)).status).toBe(200);
    expect(a.demoRuns()).toBe(before + 1);
    await nothingRuns(async () => {
      await expectRefused(await post(a, body, headers), 401, "unauthenticated");
    });
  });

  it("refuses a request signed outside the time window, old or ahead, 401, and the tool never runs", async () => {
    const { a } = replicas();
    const body = addNote("out of time");
    await nothingRuns(async () => {
      const old = await post(a, body, signedAt(Date.now() - 2 * SKEW_MS, body));
      await expectRefused(old, 401, "unauthenticated");
      const ahead = await post(a, body, signedAt(Date.now() + 2 * SKEW_MS, body));
      await expectRefused(ahead, 401, "unauthenticated");
    });
  });

  it("refuses a request whose body is not the one signed 401, and the tool never runs", async () => {
    const { a } = replicas();
    const headers = signInternal(key, "POST", INTERNAL_FORWARD_PATH, addNote("as signed"));
    await nothingRuns(async () => {
      await expectRefused(await post(a, addNote("tampered"), headers), 401, "unauthenticated");
    });
  });

  it("refuses 400 a signed request for a method it does not forward", async () => {
    const { a } = replicas();
    const body = JSON.stringify({ server: "demo", method: "tools/list", params: {} });
    await expectRefused(
      await post(a, body, signInternal(key, "POST", INTERNAL_FORWARD_PATH, body)),
      400,
      "bad_request",
    );
  });

  it("refuses anything but POST 405", async () => {
    const { a } = replicas();
    await expectRefused(await post(a, "", {}, "GET"), 405, "bad_request");
  });

  it("refuses 409 a signed request for a server this replica does not hold, forwarding it nowhere", async () => {
    const { b } = replicas();
    expect(b.runtime.holding?.holds("demo")).toBe(false);
    const body = addNote("not held here", b);
    await nothingRuns(async () => {
      const res = await post(b, body, signInternal(key, "POST", INTERNAL_FORWARD_PATH, body));
      await expectRefused(res, 409, "upstream_elsewhere");
    });
  });

  it("refuses 409 a signed request addressed to another replica, even for a server it holds", async () => {
    const { a, b } = replicas();
    // Signed by a replica, for B: caught on the network and sent to A instead.
    const body = addNote("meant for B", b);
    await nothingRuns(async () => {
      const res = await post(a, body, signInternal(key, "POST", INTERNAL_FORWARD_PATH, body));
      await expectRefused(res, 409, "upstream_elsewhere");
    });
  });

  it("a holder refusing the asking replica's signature fails the call upstream_elsewhere, outcome known, never as the agent's 401", async () => {
    const { b } = replicas();
    // B signing with a key A does not share (a replica started with another GATEHOUSE_SECRET_KEY).
    const forwarder = new ReplicaForwarder(
      b.runtime.db,
      createSecretKey(randomBytes(32)),
      b.runtime.replica.id,
      15_000,
    );
    await nothingRuns(async () => {
      const err = await forwarder
        .send("demo", "tools/call", { name: "add_note", arguments: { text: "x" } }, { timeoutMs: 10_000 })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(GatehouseError);
      expect((err as GatehouseError).code).toBe("upstream_elsewhere");
      expect((err as GatehouseError).message).toMatch(/signature/);
      expect(outcomeUnknown(err)).toBe(false);
    });
  });
});

describe.runIf(onPostgres)("a request caught on its way to the holder", () => {
  const moved: ReplicaPair[] = [];
  afterEach(async () => {
    for (const p of moved.splice(0)) await p.stop();
  });

  it(
    "cannot be replayed to the replica that holds the server after the holder stops",
    async () => {
      const p = await startPair({ leaseMs: 2_000 });
      moved.push(p);
      const { a, b } = p;
      const body = addNote("caught", a);
      const headers = signInternal(key, "POST", INTERNAL_FORWARD_PATH, body);
      expect((await post(a, body, headers)).status).toBe(200);
      expect(a.demoRuns()).toBe(1);
      await a.stop();
      await expect.poll(() => b.runtime.holding?.holds("demo"), { timeout: 7_000, interval: 100 }).toBe(true);
      await waitForServersReady(b.runtime, ["demo"]);
      // B never saw its nonce, and its time is still within the window: only the address refuses it.
      await expectRefused(await post(b, body, headers), 409, "upstream_elsewhere");
      expect(b.demoRuns()).toBe(0);
    },
    SLOW_START,
  );

  it(
    "a holder remembered after it stopped: the request goes to the holder the registry names now, and runs once",
    async () => {
      const p = await startPair({ leaseMs: 2_000 });
      moved.push(p);
      const { a, b } = p;
      // A replica that holds nothing and remembers a holder for a minute (the default is a second).
      const forwarder = new ReplicaForwarder(b.runtime.db, key, "observer", 2_000, 60_000);
      const send = (text: string) =>
        forwarder.send(
          "demo",
          "tools/call",
          { name: "add_note", arguments: { text } },
          { timeoutMs: 20_000 },
        );
      await send("to A");
      expect(a.demoRuns()).toBe(1);
      await a.stop();
      await expect.poll(() => b.runtime.holding?.holds("demo"), { timeout: 7_000, interval: 100 }).toBe(true);
      await waitForServersReady(b.runtime, ["demo"]);
      // A is still remembered: it cannot be reached, nothing was sent, so B is asked instead.
      await send("to B");
      expect(b.demoRuns()).toBe(1);
    },
    SLOW_START,
  );
});
