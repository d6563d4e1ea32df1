import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError, SseError } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { RefusedAddressError } from "../net/guarded-fetch";
import { classifyFailure, type FailureKind, SessionLostError, unreached } from "./failures";

/** undici's shape for a network failure: "fetch failed" with the reason in `cause`. */
function fetchFailed(cause: Error): TypeError {
  return new TypeError("fetch failed", { cause });
}

/** The SDK's error for a POST answered with an HTTP error status. */
const posted = (status: number, body: string) =>
  new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${body}`, {
    status,
    text: body,
  });

describe("classifyFailure: the one place that decides whether a failure is worth retrying", () => {
  const rows: [string, unknown, FailureKind, string | RegExp][] = [
    [
      "the guard's refused address",
      fetchFailed(new RefusedAddressError("refused: 10.0.0.5, a private address; set allowPrivate to allow")),
      "permanent",
      "refused: 10.0.0.5, a private address; set allowPrivate to allow",
    ],
    ["HTTP 401", posted(401, '{"error":"nope"}'), "permanent", /requires authorization \(HTTP 401\)/],
    [
      "HTTP 401 on the legacy SSE transport",
      // The event is what eventsource reported; the status is all that is read.
      new SseError(401, "Non-200 status code (401)", undefined as never),
      "permanent",
      /HTTP 401/,
    ],
    ["HTTP 403", posted(403, "forbidden"), "permanent", /refused access \(HTTP 403\)/],
    [
      "an initialize result with a version the SDK does not speak",
      new Error("Server's protocol version is not supported: 2099-01-01"),
      "permanent",
      /answered with MCP protocol version 2099-01-01, which Gatehouse does not speak/,
    ],
    [
      "an unreadable version is not echoed",
      new Error("Server's protocol version is not supported: <script>alert(1)</script>"),
      "permanent",
      /version \(unreadable\)/,
    ],
    [
      "-32022 over stdio, with the versions it speaks",
      new ProtocolError(-32022, "Unsupported protocol version: 2025-11-25", {
        supported: ["2099-01-01", "<b>x</b>"],
      }),
      "permanent",
      /does not support the MCP protocol versions Gatehouse speaks \(.*\) \(it speaks 2099-01-01\)$/,
    ],
    [
      "-32022 naming 2026-07-28: the 2025 handshake refused by a server Gatehouse can speak to",
      new ProtocolError(-32022, "Unsupported protocol version: 2025-11-25", { supported: ["2026-07-28"] }),
      "transient",
      /speaks only 2026-07-28 .* dials it again with server\/discover$/,
    ],
    [
      "-32022 in a 400 over HTTP",
      posted(
        400,
        '{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-11-25"}}',
      ),
      "permanent",
      /does not support the MCP protocol versions Gatehouse speaks/,
    ],
    [
      "a lost session",
      new SessionLostError(["tools/list"], 404),
      "session_lost",
      /no longer knows Gatehouse's session/,
    ],
    [
      "a refused connection",
      fetchFailed(new Error("connect ECONNREFUSED 127.0.0.1:9")),
      "transient",
      /ECONNREFUSED/,
    ],
    ["HTTP 503", posted(503, "try later"), "transient", "the server answered HTTP 503: try later"],
    ["another 400", posted(400, '{"error":{"message":"bad"}}'), "transient", /^the server answered HTTP 400/],
    ["a timeout", new SdkError(SdkErrorCode.RequestTimeout, "Request timed out"), "transient", /timed out/],
    [
      "a process exit",
      new Error("server process exited (code 7)"),
      "transient",
      "server process exited (code 7)",
    ],
  ];

  it.each(rows)("%s", (_what, err, kind, reason) => {
    const failure = classifyFailure(err, { credentials: false });
    expect(failure.kind).toBe(kind);
    if (typeof reason === "string") expect(failure.reason).toBe(reason);
    else expect(failure.reason).toMatch(reason);
  });

  it("a 401 for a server with configured headers says they were not accepted", () => {
    expect(classifyFailure(posted(401, ""), { credentials: true }).reason).toBe(
      "the server did not accept the credentials in its headers (HTTP 401): check them in gatehouse.json",
    );
  });

  it("a server's error text in a reason is one line of at most 200 characters", () => {
    const { reason } = classifyFailure(posted(502, `${"x".repeat(5000)}\n\nmore`), { credentials: false });
    expect(reason).not.toContain("\n");
    expect(reason.length).toBeLessThanOrEqual("the server answered HTTP 502: ".length + 201);
  });
});

describe("SessionLostError.retrySafe: only requests that read are sent again", () => {
  it.each([
    [["tools/list"], true],
    [["resources/read"], true],
    [["prompts/get"], true],
    [["tools/call"], false],
    [["tools/list", "tools/call"], false],
    [[], false],
  ] as const)("%j → %s", (methods, safe) => {
    expect(new SessionLostError(methods, 404).retrySafe).toBe(safe);
  });
});

describe("unreached", () => {
  it("is true for transport failures and false for the server's own JSON-RPC errors", () => {
    expect(unreached(fetchFailed(new Error("connect ECONNREFUSED")))).toBe(true);
    expect(unreached(posted(500, "oops"))).toBe(true);
    expect(unreached(new SdkError(SdkErrorCode.ConnectionClosed, "Connection closed"))).toBe(true);
    expect(unreached(new ProtocolError(-32602, "bad arguments"))).toBe(false);
    expect(unreached(new DOMException("aborted", "AbortError"))).toBe(false);
  });
});

describe("a 400 answer names a lost session only in the transport's own words", () => {
  it("the SDK's and server-everything's refusals are a lost session; a tool's error about a session is not", async () => {
    const { namesLostSession } = await import("./http-transport");
    const rpc = (message: string) =>
      JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null });
    expect(namesLostSession(rpc("Bad Request: No valid session ID provided"))).toBe(true);
    expect(namesLostSession(rpc("Session not found"))).toBe(true);
    expect(namesLostSession(rpc("Bad Request: Server not initialized"))).toBe(true);
    expect(namesLostSession(rpc("the browser session expired; sign in to the site again"))).toBe(false);
    expect(namesLostSession(rpc("session_id is required"))).toBe(false);
  });
});

describe("a refused address is for good only when the URL names the address itself", () => {
  it("an IP literal is failed at once; a host name that resolved to a refused address is retried", async () => {
    const { failureContext } = await import("./failures");
    const refused = new RefusedAddressError(
      "refused: db.internal resolves to 10.0.0.5, a private address; set allowPrivate to allow",
    );
    const literal = failureContext({ headers: {}, url: "http://10.0.0.5/mcp" });
    const named = failureContext({ headers: {}, url: "http://db.internal/mcp" });
    expect(classifyFailure(refused, literal).kind).toBe("permanent");
    expect(classifyFailure(refused, named).kind).toBe("transient");
    expect(classifyFailure(refused, failureContext({ headers: {}, url: "http://[::1]:3000/mcp" })).kind).toBe(
      "permanent",
    );
  });
});
