import { QueryClient, QueryObserver } from "@tanstack/react-query";
import { describe, expect, it } from "vitest";
import { invalidate } from "./use-live-events";

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
