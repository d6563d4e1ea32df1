/**
 * The Node ↔ web bridge that server/main.ts puts in front of `/api/calls` and `/mcp`, end to
 * end, over the loopback server of bridge-fixtures.ts and real node:http clients: a client that
 * goes away mid-answer, or before it.
 */
import { describe, expect, it } from "vitest";
import {
  cleanUpBridges,
  deferred,
  encoder,
  open,
  readUntil,
  responseOf,
  send,
  serve,
} from "./bridge-fixtures";

cleanUpBridges();

describe("a client that goes away", () => {
  it("the web request's signal aborts when the client goes away before the response is finished", async () => {
    const entered = deferred();
    const abortedSeen = deferred<boolean>();
    const bridge = await serve(async (req) => {
      if (new URL(req.url).pathname === "/quick") return new Response("done");
      entered.resolve();
      await new Promise<void>((resolve) =>
        req.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      abortedSeen.resolve(req.signal.aborted);
      return new Response(null, { status: 204 });
    });

    // A finished response does not count as the client going away.
    expect((await send(bridge, { path: "/quick" })).text).toBe("done");
    await bridge.closed[0];
    expect(bridge.requests[0]?.signal.aborted).toBe(false);

    const req = open(bridge, { path: "/held", method: "POST" });
    req.end("{}");
    await entered.promise;
    req.destroy();
    expect(await abortedSeen.promise).toBe(true);
    await bridge.answered[1];
  });

  it("when the client goes away during a streamed response the body's stream is cancelled", async () => {
    const cancelled = deferred<unknown>();
    const bridge = await serve(() => {
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          pulls++;
          if (pulls === 1) {
            controller.enqueue(encoder.encode("data: one\n\n"));
            return;
          }
          // Nothing more until the stream is cancelled: an event stream with nothing to say.
          return cancelled.promise.then(() => undefined);
        },
        cancel(reason) {
          cancelled.resolve(reason);
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const req = open(bridge, { path: "/events" });
    const response = responseOf(req);
    req.end();
    const res = await response;
    res.setEncoding("utf8");
    expect(await readUntil(res[Symbol.asyncIterator](), "\n\n")).toBe("data: one\n\n");

    res.socket.destroy();
    await cancelled.promise;
    // And the server is done with the request: sendResponse returned instead of waiting on.
    await bridge.answered[0];
  });
});

describe("a client that left before the answer", () => {
  it("sendResponse returns at once and releases the body's producer when the client left while the handler worked", async () => {
    const entered = deferred();
    const cancelled = deferred<unknown>();
    const bridge = await serve(async (req) => {
      entered.resolve();
      await new Promise<void>((resolve) =>
        req.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      // A held call answers after its client gave up: with a body nobody will read.
      const body = new ReadableStream<Uint8Array>({
        pull: (controller) => controller.enqueue(encoder.encode("x".repeat(64 * 1024))),
        cancel: (reason) => cancelled.resolve(reason),
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const req = open(bridge, { path: "/held", method: "POST" });
    req.on("error", () => {});
    req.end("{}");
    await entered.promise;
    req.destroy();
    await cancelled.promise;
    await bridge.answered[0];
  });
});
