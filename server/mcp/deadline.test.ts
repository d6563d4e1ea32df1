/**
 * The deadline of a tool call (server/mcp/requests.ts): it aborts the call in time, follows the
 * caller's signal, and once the call is over holds on to nothing, so a busy server does not keep
 * its finished calls in memory until their deadlines would have passed.
 */
import { getEventListeners } from "node:events";
import v8 from "node:v8";
import vm from "node:vm";
import { describe, expect, it } from "vitest";
import { deadlineFor } from "./requests";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

describe("a call's deadline", () => {
  it("aborts with a TimeoutError when the time is up", async () => {
    const deadline = deadlineFor(20);
    const reason = await new Promise((resolve) =>
      deadline.signal.addEventListener("abort", () => resolve(deadline.signal.reason)),
    );
    expect((reason as DOMException).name).toBe("TimeoutError");
  });

  it("aborts with the caller's reason when the caller's signal does, and lets go of it when done", () => {
    const caller = new AbortController();
    const first = deadlineFor(60_000, caller.signal);
    const second = deadlineFor(60_000, caller.signal);
    second.done();
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    const why = new Error("the agent went away");
    caller.abort(why);
    expect(first.signal.reason).toBe(why);
    expect(second.signal.aborted).toBe(false);
    first.done();
  });

  it("once done, keeps nothing a listener on it holds alive, though its time is not up", async () => {
    // In a function of their own, so that nothing of them stays reachable from this frame.
    const finishedCall = (): WeakRef<object> => {
      const deadline = deadlineFor(60_000);
      // What the SDK's listener holds: the request and its answer.
      const held = { answer: "x".repeat(1000) };
      deadline.signal.addEventListener("abort", () => held.answer.length);
      deadline.done();
      return new WeakRef(held);
    };
    const refs = Array.from({ length: 20 }, finishedCall);
    // Finalization runs after a turn of the event loop.
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(refs.filter((r) => r.deref() !== undefined)).toHaveLength(0);
  });
});
