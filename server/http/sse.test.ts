/**
 * The live-event stream browsers read: the events that only mean "refetch" are thinned per key
 * (the first at once, the last of a burst at the window's end): each server's catalogue events
 * and the resource reads to one a second, the calls to one per half second, so a server whose
 * tools flap or agents making thousands of calls cannot make every open browser refetch on every
 * event. The bus itself is not thinned: a long-poll hears every call. Only the clock
 * (setTimeout/setInterval) is faked; the bus and the stream are real.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { CallStatus, LiveEvent } from "@/lib/api-types";
import { CALL_GATHER_MS, CATALOGUE_GATHER_MS, EventBus, gatherRefetchEvents } from "../events";
import { eventStream } from "./sse";

afterEach(() => {
  vi.useRealTimers();
});

function fakeClock(): void {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
}

const catalogue = (server: string): LiveEvent => ({ type: "catalogue", server });
const call = (id: string, status: CallStatus = "pending"): LiveEvent => ({ type: "call", id, status });

/** Lets the stream hand over what was enqueued (a turn of the event loop, not a wait). */
const drained = () => new Promise((resolve) => setImmediate(resolve));

/** A browser's view of `eventStream(bus)`: the events it was sent, by type, in order. */
function openStream(bus: EventBus) {
  const abort = new AbortController();
  const reader = eventStream(bus, abort.signal).body?.getReader();
  if (!reader) throw new Error("no body");
  let text = "";
  const decoder = new TextDecoder();
  const reading = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      text += decoder.decode(value);
    }
  })();
  return {
    /** The data of every `event: <type>` message so far. */
    sent(type: LiveEvent["type"]): LiveEvent[] {
      return text
        .split("\n\n")
        .filter((message) => message.startsWith(`event: ${type}\n`))
        .map((message) => JSON.parse(message.slice(message.indexOf("data: ") + 6)) as LiveEvent);
    },
    async close() {
      abort.abort();
      await reading;
    },
  };
}

describe("catalogue events are gathered per server", () => {
  it("a flood of one server's catalogue events passes the first at once and then one per window", () => {
    fakeClock();
    const seen: LiveEvent[] = [];
    const gathered = gatherRefetchEvents((e) => seen.push(e));
    for (let i = 0; i < 100; i++) gathered.listener(catalogue("flappy"));
    expect(seen).toEqual([catalogue("flappy")]);
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS - 1);
    expect(seen).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(seen).toHaveLength(2);
    // Nothing came in the second window: nothing more is sent, and the next event passes at once.
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS * 5);
    expect(seen).toHaveLength(2);
    gathered.listener(catalogue("flappy"));
    expect(seen).toHaveLength(3);
    gathered.stop();
  });

  it("events of other servers and of other kinds are not held by a server's window", () => {
    fakeClock();
    const seen: LiveEvent[] = [];
    const gathered = gatherRefetchEvents((e) => seen.push(e));
    gathered.listener(catalogue("a"));
    gathered.listener(catalogue("a"));
    gathered.listener(catalogue("b"));
    gathered.listener(call("c1"));
    gathered.listener({ type: "server", name: "a", state: "ready" });
    expect(seen.map((e) => e.type + (e.type === "catalogue" ? ` ${e.server}` : ""))).toEqual([
      "catalogue a",
      "catalogue b",
      "call",
      "server",
    ]);
    gathered.stop();
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS);
    expect(seen).toHaveLength(4);
  });
});

describe("each kind of event has a window of its own length", () => {
  it("a server's state and grants are never held; calls end their window before the catalogue's", () => {
    fakeClock();
    const seen: string[] = [];
    const gathered = gatherRefetchEvents((e) => seen.push(e.type));
    for (let i = 0; i < 3; i++) {
      gathered.listener(catalogue("a"));
      gathered.listener(call(`c${i}`));
      gathered.listener({ type: "server", name: "a", state: "ready" });
      gathered.listener({ type: "grants" });
    }
    expect(seen).toEqual(["catalogue", "call", "server", "grants", "server", "grants", "server", "grants"]);
    seen.length = 0;
    vi.advanceTimersByTime(CALL_GATHER_MS);
    expect(seen).toEqual(["call"]);
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS - CALL_GATHER_MS);
    expect(seen).toEqual(["call", "catalogue"]);
    gathered.stop();
  });
});

describe("the event stream", () => {
  it("carries a burst of catalogue events as one event at once and one at the window's end", async () => {
    fakeClock();
    const bus = new EventBus();
    const stream = openStream(bus);
    for (let i = 0; i < 50; i++) bus.publish(catalogue("flappy"));
    bus.publish({ type: "server", name: "flappy", state: "ready" });
    await drained();
    expect(stream.sent("catalogue")).toHaveLength(1);
    expect(stream.sent("server")).toHaveLength(1);
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS);
    await drained();
    expect(stream.sent("catalogue")).toHaveLength(2);
    await stream.close();
  });

  it("carries a burst of call events as the first at once and the last at the window's end", async () => {
    fakeClock();
    const bus = new EventBus();
    const stream = openStream(bus);
    for (let i = 1; i <= 200; i++) bus.publish(call(`c${i}`));
    await drained();
    expect(stream.sent("call")).toEqual([call("c1")]);
    vi.advanceTimersByTime(CALL_GATHER_MS - 1);
    await drained();
    expect(stream.sent("call")).toHaveLength(1);
    vi.advanceTimersByTime(1);
    await drained();
    // At most two for the whole first window, the second saying where the burst ended.
    expect(stream.sent("call")).toEqual([call("c1"), call("c200")]);
    // The burst is over: nothing more, however long the stream stays open.
    vi.advanceTimersByTime(CALL_GATHER_MS * 10);
    await drained();
    expect(stream.sent("call")).toHaveLength(2);
    await stream.close();
  });

  it("carries a lone call event at once, and one after a quiet spell at once too", async () => {
    fakeClock();
    const bus = new EventBus();
    const stream = openStream(bus);
    bus.publish(call("c1"));
    await drained();
    expect(stream.sent("call")).toEqual([call("c1")]);
    vi.advanceTimersByTime(CALL_GATHER_MS * 3);
    bus.publish(call("c2"));
    await drained();
    expect(stream.sent("call")).toEqual([call("c1"), call("c2")]);
    await stream.close();
  });

  it("thins calls for browsers only: a long-poll on the same bus hears every call finish", async () => {
    fakeClock();
    const bus = new EventBus();
    const stream = openStream(bus);
    // What a long-poll waits for (CallBroker.wait): its own call's final status.
    const finished = new Set<string>();
    const unsubscribe = bus.subscribe((e) => {
      if (e.type === "call" && e.status === "succeeded") finished.add(e.id);
    });
    const ids = Array.from({ length: 200 }, (_, i) => `c${i}`);
    for (const id of ids) {
      bus.publish(call(id, "running"));
      bus.publish(call(id, "succeeded"));
    }
    await drained();
    expect([...finished]).toEqual(ids);
    expect(stream.sent("call")).toHaveLength(1);
    vi.advanceTimersByTime(CALL_GATHER_MS);
    await drained();
    expect(stream.sent("call")).toEqual([call("c0", "running"), call("c199", "succeeded")]);
    unsubscribe();
    await stream.close();
  });
});

describe("a stream whose reader may no longer read", () => {
  it("ending a person's sessions closes their open event stream before the next event", async () => {
    const { createTestUser, request, startTestRuntime } = await import("@/test/support/runtime");
    const { endUserSessions } = await import("../auth/user-admin");
    const rt = await startTestRuntime();
    try {
      const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
      const res = await request("GET", "/api/events", { cookie: olga.cookie });
      expect(res.status).toBe(200);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      expect(decoder.decode((await reader.read()).value)).toContain(": connected");

      await endUserSessions(rt.runtime.db, { name: "olga", actor: "oscar" });
      // The stream asks again at most once a second: let that second pass.
      const realNow = Date.now.bind(Date);
      vi.spyOn(Date, "now").mockImplementation(() => realNow() + 2000);
      rt.runtime.bus.publish({ type: "call", id: "c-after", status: "pending" });
      const next = await reader.read();
      expect(next.done).toBe(true);
    } finally {
      vi.restoreAllMocks();
      await rt.stop();
    }
  });
});

describe("the reader's check reads the store, so it is awaited", () => {
  it("events wait for a slow check in their order, and a check that fails ends the stream", async () => {
    const bus = new EventBus();
    const abort = new AbortController();
    let answers: Array<(ok: boolean) => void> = [];
    let failNext = false;
    const stillAllowed = () => {
      if (failNext) return Promise.reject(new Error("the store cannot be reached"));
      return new Promise<boolean>((resolve) => answers.push(resolve));
    };
    const reader = eventStream(bus, abort.signal, stillAllowed).body?.getReader();
    if (!reader) throw new Error("no body");
    const decoder = new TextDecoder();
    expect(decoder.decode((await reader.read()).value)).toContain(": connected");
    // Past the second in which the last answer holds: the next event is checked first.
    const realNow = Date.now.bind(Date);
    let skew = 2000;
    vi.spyOn(Date, "now").mockImplementation(() => realNow() + skew);
    try {
      bus.publish({ type: "server", name: "a", state: "ready" });
      bus.publish({ type: "grants" });
      await drained();
      expect(answers).toHaveLength(1);
      answers[0]?.(true);
      answers = [];
      expect(decoder.decode((await reader.read()).value)).toContain("event: server");
      expect(decoder.decode((await reader.read()).value)).toContain("event: grants");
      skew += 2000;
      failNext = true;
      bus.publish({ type: "grants" });
      expect((await reader.read()).done).toBe(true);
    } finally {
      vi.restoreAllMocks();
    }
  });
});

describe("resource reads are gathered too", () => {
  it("a burst of resource reads reaches a browser as the first at once and the last at the window's end", () => {
    fakeClock();
    const seen: LiveEvent[] = [];
    const gathered = gatherRefetchEvents((e) => seen.push(e));
    for (let i = 0; i < 50; i++) gathered.listener({ type: "resources" });
    gathered.listener(catalogue("files"));
    expect(seen).toEqual([{ type: "resources" }, catalogue("files")]);
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS);
    expect(seen).toEqual([{ type: "resources" }, catalogue("files"), { type: "resources" }]);
    gathered.stop();
  });
});
