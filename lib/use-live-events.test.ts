import { QueryClient, QueryObserver } from "@tanstack/react-query";
import { afterEach, describe, expect, it, vi } from "vitest";
import { invalidate, liveEventInvalidation, pacedInvalidation } from "./use-live-events";

describe("live events refresh what is cached", () => {
  it("an event during a query's first fetch is not lost: the answer fetched before it is replaced", async () => {
    const client = new QueryClient();
    const answers: ((value: string) => void)[] = [];
    let onSecondFetch: () => void = () => {};
    const secondFetch = new Promise<void>((resolve) => {
      onSecondFetch = resolve;
    });
    const observer = new QueryObserver<string>(client, {
      queryKey: ["calls", "pending"],
      queryFn: () =>
        new Promise<string>((resolve) => {
          answers.push(resolve);
          if (answers.length === 2) onSecondFetch();
        }),
    });
    const seen: (string | undefined)[] = [];
    let onSettled: (data: string) => void = () => {};
    const settled = new Promise<string>((resolve) => {
      onSettled = resolve;
    });
    const unsubscribe = observer.subscribe((result) => {
      seen.push(result.data);
      if (result.data !== undefined) onSettled(result.data);
    });
    expect(answers).toHaveLength(1);

    // The server answered the first fetch before a new call existed; its event arrives meanwhile.
    invalidate(client, [["calls"]]);
    await secondFetch;
    answers[0]?.("before the event");
    answers[1]?.("after the event");
    expect(await settled).toBe("after the event");
    expect(seen).not.toContain("before the event");
    unsubscribe();
    client.clear();
  });
});

describe("catalogue and call events refetch at a bounded pace", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A client with one cached, observed query under `key`, counting its fetches. */
  function observed(key: string[]) {
    const client = new QueryClient();
    let fetches = 0;
    const observer = new QueryObserver<number>(client, {
      queryKey: key,
      queryFn: () => {
        fetches++;
        return fetches;
      },
    });
    const unsubscribe = observer.subscribe(() => {});
    return {
      client,
      fetches: () => fetches,
      done() {
        unsubscribe();
        client.clear();
      },
    };
  }

  /** Lets react-query run what an invalidation started (a turn of the event loop, not a wait). */
  const settled = () => new Promise((resolve) => setImmediate(resolve));

  it("a flood of catalogue events refetches at once, then once per second, not once per event", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const q = observed(["changes", "feed"]);
    await settled();
    const initial = q.fetches();
    const paced = pacedInvalidation(q.client, 1_000);

    for (let i = 0; i < 100; i++) paced.ask([["changes"]]);
    await settled();
    expect(q.fetches()).toBe(initial + 1);
    vi.advanceTimersByTime(1_000);
    await settled();
    expect(q.fetches()).toBe(initial + 2);
    // A quiet window: nothing more, and the next event is refetched at once.
    vi.advanceTimersByTime(5_000);
    await settled();
    expect(q.fetches()).toBe(initial + 2);
    paced.ask([["changes"]]);
    await settled();
    expect(q.fetches()).toBe(initial + 3);
    paced.stop();
    q.done();
  });

  it("a burst of call events refetches the calls at once, then at most once per half second", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const q = observed(["calls", "pending"]);
    await settled();
    const initial = q.fetches();
    const live = liveEventInvalidation(q.client);

    // The first of a burst shows at once: a reviewer sees a new pending call without waiting.
    live.apply("call");
    await settled();
    expect(q.fetches()).toBe(initial + 1);
    for (let i = 0; i < 200; i++) live.apply("call");
    await settled();
    expect(q.fetches()).toBe(initial + 1);
    vi.advanceTimersByTime(499);
    await settled();
    expect(q.fetches()).toBe(initial + 1);
    // The window's end brings the burst's last: two fetches in the first half second, no more.
    vi.advanceTimersByTime(1);
    await settled();
    expect(q.fetches()).toBe(initial + 2);
    // Events keep coming: one more per window.
    for (let i = 0; i < 200; i++) live.apply("call");
    vi.advanceTimersByTime(500);
    await settled();
    expect(q.fetches()).toBe(initial + 3);
    // A quiet window, then a call: refetched at once again.
    vi.advanceTimersByTime(2_000);
    await settled();
    expect(q.fetches()).toBe(initial + 3);
    live.apply("call");
    await settled();
    expect(q.fetches()).toBe(initial + 4);
    live.stop();
    q.done();
  });
});
