/**
 * The Node ↔ web bridge that server/main.ts puts in front of `/api/calls` and `/mcp`, end to
 * end, over the loopback server of bridge-fixtures.ts and real node:http clients: what reaches
 * the web handler and what reaches the client.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  cleanUpBridges,
  deferred,
  encoder,
  keepAliveAgent,
  open,
  readUntil,
  responseOf,
  send,
  serve,
} from "./bridge-fixtures";

cleanUpBridges();

describe("requests reach the web handler", () => {
  it("method, path with query, headers (a repeated one too) and body reach the web handler unchanged", async () => {
    const seen = deferred<{ method: string; url: string; headers: Record<string, string>; body: Buffer }>();
    const bridge = await serve(async (req) => {
      seen.resolve({
        method: req.method,
        url: req.url,
        headers: Object.fromEntries(req.headers),
        body: Buffer.from(await req.arrayBuffer()),
      });
      return new Response(null, { status: 204 });
    });
    // Big enough to arrive in several reads, and not valid UTF-8, so no decoding can hide.
    const body = Buffer.concat([Buffer.from([0x00, 0xff, 0xfe, 0x80]), randomBytes(300 * 1024)]);
    const path = "/api/things/a%20b?x=1&y=two%20words&x=3&empty=";
    const { res } = await send(bridge, {
      method: "PUT",
      path,
      headers: {
        "content-type": "application/octet-stream",
        authorization: "Bearer gh_test",
        "x-multi": ["first", "second"],
        cookie: ["a=1", "b=2"],
      },
      body,
    });
    expect(res.statusCode).toBe(204);

    const got = await seen.promise;
    expect(got.method).toBe("PUT");
    expect(got.url).toBe(`${bridge.origin}${path}`);
    expect(got.headers).toEqual({
      authorization: "Bearer gh_test",
      connection: "close",
      "content-length": String(body.length),
      "content-type": "application/octet-stream",
      // Node joins repeated cookie lines as a browser's single Cookie header would read.
      cookie: "a=1; b=2",
      host: `127.0.0.1:${bridge.port}`,
      "x-multi": "first, second",
    });
    expect(got.body.equals(body)).toBe(true);
  });

  it("a GET has an empty body and no body is given to the Request", async () => {
    const bridge = await serve(async (req) => {
      const hadBody = req.body !== null;
      return Response.json({ method: req.method, hadBody, text: await req.text() });
    });
    // A GET that carries a body anyway: it is neither read nor handed on (a web GET Request
    // with a body cannot even be built), and the connection still serves the next request.
    const agent = keepAliveAgent();
    const first = await send(bridge, {
      agent,
      path: "/first",
      headers: { "content-length": "7" },
      body: "ignored",
    });
    const second = await send(bridge, { agent, path: "/second" });

    for (const { res, text } of [first, second]) {
      expect(res.statusCode).toBe(200);
      expect(JSON.parse(text)).toEqual({ method: "GET", hadBody: false, text: "" });
    }
    expect(bridge.bodies.map((b) => b?.length)).toEqual([0, 0]);
    expect(bridge.requests.map((r) => new URL(r.url).pathname)).toEqual(["/first", "/second"]);
    expect(bridge.requests.map((r) => r.body)).toEqual([null, null]);
  });
});

describe("responses reach the client", () => {
  it("each Set-Cookie of a response goes out as its own header line", async () => {
    const cookies = ["a=1; Path=/; HttpOnly", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT; SameSite=Strict"];
    const bridge = await serve(() => {
      const headers = new Headers({ "content-type": "text/plain" });
      for (const c of cookies) headers.append("set-cookie", c);
      return new Response("ok", { headers });
    });
    const { res, text } = await send(bridge);
    expect(text).toBe("ok");
    expect(res.headers["set-cookie"]).toEqual(cookies);
    const lines: string[] = [];
    for (let i = 0; i < res.rawHeaders.length; i += 2) {
      if (res.rawHeaders[i]?.toLowerCase() === "set-cookie") lines.push(res.rawHeaders[i + 1] ?? "");
    }
    expect(lines).toEqual(cookies);
  });

  it("extra headers are added unless the response sets the same header itself (the response wins)", async () => {
    const extraHeaders = [
      { key: "X-Frame-Options", value: "DENY" },
      { key: "Referrer-Policy", value: "no-referrer" },
    ];
    const bridge = await serve(
      () =>
        new Response("ok", { headers: { "x-frame-options": "SAMEORIGIN", "content-type": "text/plain" } }),
      { extraHeaders },
    );
    const { res } = await send(bridge);
    expect(res.headers["referrer-policy"]).toBe("no-referrer");
    expect(res.headers["x-frame-options"]).toBe("SAMEORIGIN");
    expect(res.headers["content-type"]).toBe("text/plain");
    const frameLines = res.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === "x-frame-options");
    expect(frameLines).toHaveLength(1);
  });

  it("an event-stream body reaches the client chunk by chunk before the stream ends", async () => {
    const release = deferred();
    const bridge = await serve(() => {
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          pulls++;
          if (pulls === 1) {
            controller.enqueue(encoder.encode("data: one\n\n"));
            return;
          }
          // The second event exists only once the client has shown it received the first.
          await release.promise;
          controller.enqueue(encoder.encode("data: two\n\n"));
          controller.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const req = open(bridge, { path: "/events" });
    const response = responseOf(req);
    req.end();
    const res = await response;
    expect(res.headers["content-type"]).toBe("text/event-stream");
    res.setEncoding("utf8");
    const chunks = res[Symbol.asyncIterator]();

    const first = await readUntil(chunks, "\n\n");
    expect(first).toBe("data: one\n\n");
    expect(res.complete).toBe(false);

    release.resolve();
    const rest = await readUntil(chunks, "\n\ndata: two\n\n");
    expect(rest).toBe("data: two\n\n");
    expect((await chunks.next()).done).toBe(true);
    expect(res.complete).toBe(true);
  });
});
