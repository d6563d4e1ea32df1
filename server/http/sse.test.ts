/**
 * The live-event stream browsers read: call events pass at once, each server's catalogue events
 * are thinned to one a second (the first at once, the last of a burst at the window's end), so a
 * server whose tools flap cannot make every open browser refetch on every flap. Only the clock
 * (setTimeout/setInterval) is faked; the bus and the stream are real.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import { CATALOGUE_GATHER_MS, EventBus, gatherCatalogueEvents } from "../events";
import { eventStream } from "./sse";

afterEach(() => {
  vi.useRealTimers();
});

function fakeClock(): void {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
}

const catalogue = (server: string): LiveEvent => ({ type: "catalogue", server });

describe("catalogue events are gathered per server", () => {
  it("a flood of one server's catalogue events passes the first at once and then one per window", () => {
    fakeClock();
    const seen: LiveEvent[] = [];
    const gathered = gatherCatalogueEvents((e) => seen.push(e));
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

  it("events of other servers and of other types are never held", () => {
    fakeClock();
    const seen: LiveEvent[] = [];
    const gathered = gatherCatalogueEvents((e) => seen.push(e));
    gathered.listener(catalogue("a"));
    gathered.listener(catalogue("a"));
    gathered.listener(catalogue("b"));
    gathered.listener({ type: "call", id: "c1", status: "pending" });
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

describe("the event stream", () => {
  it("carries a burst of catalogue events as one event at once and one at the window's end; calls all at once", async () => {
    fakeClock();
    const bus = new EventBus();
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
    /** Lets the stream hand over what was enqueued (a turn of the event loop, not a wait). */
    const drained = () => new Promise((resolve) => setImmediate(resolve));
    const count = (type: string) => text.split(`event: ${type}\n`).length - 1;

    for (let i = 0; i < 50; i++) bus.publish(catalogue("flappy"));
    bus.publish({ type: "call", id: "c1", status: "pending" });
    bus.publish({ type: "call", id: "c1", status: "running" });
    await drained();
    expect(count("catalogue")).toBe(1);
    expect(count("call")).toBe(2);
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS);
    await drained();
    expect(count("catalogue")).toBe(2);

    abort.abort();
    await reading;
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

      endUserSessions(rt.runtime.db, { name: "olga", actor: "oscar" });
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

describe("resource reads are gathered too", () => {
  it("a burst of resource reads reaches a browser as the first at once and the last at the window's end", () => {
    fakeClock();
    const seen: LiveEvent[] = [];
    const gathered = gatherCatalogueEvents((e) => seen.push(e));
    for (let i = 0; i < 50; i++) gathered.listener({ type: "resources" });
    gathered.listener(catalogue("files"));
    expect(seen).toEqual([{ type: "resources" }, catalogue("files")]);
    vi.advanceTimersByTime(CATALOGUE_GATHER_MS);
    expect(seen).toEqual([{ type: "resources" }, catalogue("files"), { type: "resources" }]);
    gathered.stop();
  });
});
