/**
 * The Node ↔ web bridge that server/main.ts puts in front of `/api/calls` and `/mcp`, end to
 * end, over the loopback server of bridge-fixtures.ts and real node:http clients: bodies over the
 * limit are refused with 413 and their connection closed.
 */
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { MAX_REQUEST_BODY_BYTES } from "../request";
import {
  bodyText,
  cleanUpBridges,
  keepAliveAgent,
  open,
  responseOf,
  serve,
  socketOf,
} from "./bridge-fixtures";
import { BRIDGE_MAX_BODY_BYTES } from "./node-bridge";

cleanUpBridges();

describe("bodies over the limit", () => {
  it("the bridge's backstop sits above the 4 MiB handler limit, so handlers answer first in their own format", () => {
    expect(MAX_REQUEST_BODY_BYTES).toBe(4 * 1024 * 1024);
    expect(BRIDGE_MAX_BODY_BYTES).toBeGreaterThan(MAX_REQUEST_BODY_BYTES);
  });

  it("a declared Content-Length over the limit resolves readBody to null before the body is sent, and 413 goes out with Connection: close", async () => {
    const bridge = await serve(() => new Response("handler ran"));
    const req = open(bridge, {
      method: "POST",
      path: "/api/calls",
      agent: keepAliveAgent(),
      headers: { "content-type": "application/json", "content-length": String(BRIDGE_MAX_BODY_BYTES + 1) },
    });
    const response = responseOf(req);
    const socket = socketOf(req);
    // Only the head goes out; the answer has to come without a byte of the body.
    req.flushHeaders();
    const res = await response;

    expect(res.statusCode).toBe(413);
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(await bodyText(res))).toMatchObject({ error: { code: "payload_too_large" } });
    expect(bridge.bodies).toEqual([null]);
    expect(bridge.requests).toEqual([]);
    // The server closes the connection: the unread body must not be taken for a next request.
    await once(await socket, "close");
  });

  it("a chunked body that passes the limit resolves readBody to null, and 413 goes out with Connection: close", async () => {
    const max = 1024;
    const bridge = await serve(async (req) => new Response(String((await req.arrayBuffer()).byteLength)), {
      max,
    });

    // Exactly the limit, chunked, is read whole.
    const atLimit = open(bridge, { method: "POST", path: "/at-limit" });
    const atLimitResponse = responseOf(atLimit);
    atLimit.write(Buffer.alloc(max / 2, "a"));
    atLimit.end(Buffer.alloc(max / 2, "b"));
    const accepted = await atLimitResponse;
    expect(await bodyText(accepted)).toBe(String(max));
    expect(bridge.bodies[0]?.length).toBe(max);

    // One over, and the request is never finished: readBody gives up as the limit is passed.
    const over = open(bridge, { method: "POST", path: "/over", agent: keepAliveAgent() });
    const overResponse = responseOf(over);
    const socket = socketOf(over);
    over.write(Buffer.alloc(max / 2, "a"));
    over.write(Buffer.alloc(max / 2 + 1, "b"));
    const res = await overResponse;

    expect(res.statusCode).toBe(413);
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(await bodyText(res))).toMatchObject({ error: { code: "payload_too_large" } });
    // Both went chunked, so the limit is the bytes that arrived, not a declared length.
    for (const head of bridge.heads) {
      expect(head["transfer-encoding"]).toBe("chunked");
      expect(head["content-length"]).toBeUndefined();
    }
    expect(bridge.heads).toHaveLength(2);
    expect(bridge.bodies).toHaveLength(2);
    expect(bridge.bodies[1]).toBeNull();
    expect(bridge.requests).toHaveLength(1);
    await once(await socket, "close");
  });
});
