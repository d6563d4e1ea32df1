/**
 * How the outbound HTTP guard sends what it lets through (PRODUCT.md §4): pacing with
 * minIntervalMs, kept-alive connections reused, and proxy environment variables ignored. The
 * servers and the loopback-only safety net are in guard-fixtures.ts.
 */
import { getEventListeners } from "node:events";
import type { ServerResponse } from "node:http";
import { EnvHttpProxyAgent, fetch as undiciFetch } from "undici";
import { describe, expect, it, vi } from "vitest";
import { client, failure, listen, registerGuardHooks, type Seen } from "./guard-fixtures";

registerGuardHooks();

describe("pacing and connection reuse", () => {
  const gaps = (seen: Seen[]) => seen.slice(1).map((r, i) => r.at - (seen[i]?.at ?? 0));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  /**
   * The pacer spaces sends; the server sees arrivals, and each arrival also carries its request's
   * latency, which on a loaded machine varies by several milliseconds between two requests. Unpaced
   * requests arrive under 10 ms apart, so half the interval tells paced from unpaced without
   * depending on that jitter.
   */
  const PACED = 50;

  it.each([
    ["by default", undefined],
    ["with minIntervalMs 0", 0],
  ])(
    "%s, 20 sequential requests are not spaced and reuse kept-alive connections",
    async (_name, minIntervalMs) => {
      const server = await listen("127.0.0.1");
      const fetch = client({ allowPrivate: true, minIntervalMs });
      for (let i = 0; i < 20; i++) {
        expect(await (await fetch(`http://127.0.0.1:${server.port}/${i}`)).text()).toBe("ok");
      }
      expect(server.requests).toHaveLength(20);
      // Pacing of even 10 ms would put every gap at 10 ms or more; the median resists one slow tick.
      expect(median(gaps(server.requests))).toBeLessThan(10);
      // Kept alive and reused. Not exactly 1: undici's fetch resolves the body a tick before its
      // client is free again, so a request sent at once opens a second connection and back-to-back
      // requests alternate between the two (plain undici does the same). Without keep-alive: 20.
      expect(server.connections).toBeLessThanOrEqual(2);
    },
  );

  it("with minIntervalMs 100, consecutive requests are spaced, not sent back to back", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, minIntervalMs: 100 });
    for (let i = 0; i < 5; i++) await (await fetch(`http://127.0.0.1:${server.port}/${i}`)).text();
    // The first request pays for the TCP connect, so it is left out: the others share one warm
    // connection.
    const spaced = gaps(server.requests.slice(1));
    expect(spaced).toHaveLength(3);
    for (const gap of spaced) expect(gap).toBeGreaterThanOrEqual(PACED);
    // Spaced requests find the connection free again: exactly one, kept alive.
    expect(server.connections).toBe(1);
  });

  it("with minIntervalMs 100, concurrent requests take turns", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, minIntervalMs: 100 });
    await (await fetch(`http://127.0.0.1:${server.port}/warm`)).text();
    await Promise.all(
      [0, 1, 2].map(async (i) => (await fetch(`http://127.0.0.1:${server.port}/${i}`)).text()),
    );
    const spaced = gaps(server.requests);
    expect(spaced).toHaveLength(3);
    for (const gap of spaced) expect(gap).toBeGreaterThanOrEqual(PACED);
  });

  it("with minIntervalMs 100, a stalled event loop does not let the next request through early", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, minIntervalMs: 100 });
    const url = `http://127.0.0.1:${server.port}/`;
    await (await fetch(`${url}a`)).text();
    // B waits for its turn; a long synchronous task (a big JSON parse, a GC pause) makes its timer
    // fire ~150 ms late. C must still wait a full interval after B actually went out.
    const b = fetch(`${url}b`);
    setTimeout(() => {
      const until = performance.now() + 150;
      while (performance.now() < until) {
        // stalled
      }
    }, 10);
    await (await b).text();
    await (await fetch(`${url}c`)).text();
    expect(server.requests.map((r) => r.url)).toEqual(["/a", "/b", "/c"]);
    const [, bToC] = gaps(server.requests);
    // Counted from B's scheduled time instead, C would go out at once (B's timer fired 150 ms late).
    expect(bToC).toBeGreaterThanOrEqual(PACED);
  });
});

describe("requests sharing one signal (an MCP connection's)", () => {
  /** A server that holds every request until `count` have arrived, then answers them all. */
  async function holding(count: number) {
    const held: ServerResponse[] = [];
    let all: () => void = () => {};
    const arrived = new Promise<void>((resolve) => {
      all = resolve;
    });
    const server = await listen("127.0.0.1", (_req, res) => {
      held.push(res);
      if (held.length === count) all();
    });
    return {
      url: `http://127.0.0.1:${server.port}/`,
      arrived,
      release: () => {
        for (const r of held) r.end("ok");
      },
    };
  }

  it("forty requests in flight put one abort listener on the shared signal, not one each", async () => {
    const server = await holding(40);
    const fetch = client({ allowPrivate: true });
    const shared = new AbortController();
    const answers = Array.from({ length: 40 }, () => fetch(server.url, { signal: shared.signal }));
    await server.arrived;
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(1);
    server.release();
    for (const answer of answers) expect(await (await answer).text()).toBe("ok");
    expect(getEventListeners(shared.signal, "abort").length).toBeLessThanOrEqual(1);
    // Sequential requests, each read to its end, leave nothing behind either.
    for (let i = 0; i < 20; i++) {
      const one = await holding(1);
      const answer = fetch(one.url, { signal: shared.signal });
      await one.arrived;
      one.release();
      await (await answer).text();
    }
    expect(getEventListeners(shared.signal, "abort").length).toBeLessThanOrEqual(1);
  });

  it("aborting the shared signal aborts every request in flight, with its reason", async () => {
    const server = await holding(5);
    const fetch = client({ allowPrivate: true });
    const shared = new AbortController();
    const answers = Array.from({ length: 5 }, () => fetch(server.url, { signal: shared.signal }));
    await server.arrived;
    const reason = new Error("connection closed");
    shared.abort(reason);
    for (const answer of answers) expect(await failure(answer)).toBe(reason);
  });

  it("a body still streaming when the shared signal aborts fails with the reason", async () => {
    const server = await listen("127.0.0.1", (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(": open\n\n");
    });
    const fetch = client({ allowPrivate: true });
    const shared = new AbortController();
    const res = await fetch(`http://127.0.0.1:${server.port}/`, { signal: shared.signal });
    const reader = res.body?.getReader();
    expect(new TextDecoder().decode((await reader?.read())?.value)).toBe(": open\n\n");
    const reason = new Error("connection closed");
    shared.abort(reason);
    expect(await failure(reader?.read() ?? Promise.resolve())).toBe(reason);
  });
});

describe("a body cancelled unread", () => {
  it("at once or while data is still arriving, raises nothing, and the server is asked again", async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on("uncaughtException", onUncaught);
    try {
      let sent: () => void = () => {};
      const allSent = new Promise<void>((resolve) => {
        sent = resolve;
      });
      const server = await listen("127.0.0.1", (req, res) => {
        if (req.url === "/next") {
          res.end("next");
          return;
        }
        if (req.url === "/short") {
          res.writeHead(500);
          res.write("part one, ");
          res.end("part two");
          return;
        }
        // Many chunks in quick succession: some are on their way when the client cancels.
        let n = 0;
        const more = () => {
          if (n++ === 200) {
            res.end();
            sent();
            return;
          }
          res.write("x".repeat(1024), () => setImmediate(more));
        };
        more();
      });
      const fetch = client({ allowPrivate: true });
      const res = await fetch(`http://127.0.0.1:${server.port}/`);
      const reader = res.body?.getReader();
      await reader?.read();
      await reader?.cancel();
      await Promise.race([allSent, new Promise((resolve) => setTimeout(resolve, 500))]);
      // As a webhook sender drops a receiver's answer: cancelled before a byte is read.
      for (let i = 0; i < 50; i++) {
        const answer = await fetch(`http://127.0.0.1:${server.port}/short`);
        await answer.body?.cancel();
      }
      await new Promise((resolve) => setImmediate(resolve));
      expect(uncaught).toEqual([]);
      expect(await (await fetch(`http://127.0.0.1:${server.port}/next`)).text()).toBe("next");
    } finally {
      process.off("uncaughtException", onUncaught);
    }
  });
});

describe("proxy environment variables are ignored", () => {
  it("a request reaches the real server and the proxy sees nothing", async () => {
    const proxy = await listen("127.0.0.1", (_req, res) => {
      res.end("from the proxy");
    });
    const server = await listen("127.0.0.1");
    const proxyUrl = `http://127.0.0.1:${proxy.port}`;
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) vi.stubEnv(name, proxyUrl);
    for (const name of ["NO_PROXY", "no_proxy"]) vi.stubEnv(name, "");
    const url = `http://127.0.0.1:${server.port}/`;

    // Control: an env-reading dispatcher does go through this proxy in this environment
    // (forwarding rather than tunnelling, so the stand-in proxy can answer it itself).
    const envAgent = new EnvHttpProxyAgent({ proxyTunnel: false });
    try {
      expect(await (await undiciFetch(url, { dispatcher: envAgent })).text()).toBe("from the proxy");
    } finally {
      await envAgent.destroy();
    }
    expect(proxy.requests).toHaveLength(1);

    const res = await client({ allowPrivate: true })(url);
    expect(await res.text()).toBe("ok");
    expect(server.requests).toHaveLength(1);
    expect(proxy.requests).toHaveLength(1);
    expect(proxy.connections).toBe(1);
  });
});
