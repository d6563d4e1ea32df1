import {
  InsufficientScopeError,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  UnauthorizedError,
} from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { outcomeUnknown, SessionLostError } from "./failures";
import { SignInRequiredError } from "./sign-in";

/** An error as the request layer throws it: Gatehouse's code, the transport's or SDK's error as cause. */
function told(code: "upstream_error" | "upstream_timeout" | "server_unavailable", cause?: unknown) {
  return new GatehouseError(code, "server x: …", cause === undefined ? undefined : { cause });
}

function systemError(code: string): Error {
  return Object.assign(new Error(`connect ${code}`), { code });
}

function httpError(status: number): SdkHttpError {
  return new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${status}`, {
    status,
    text: "",
  });
}

describe("whether a failed tools/call may have run on its server", () => {
  const rows: [string, unknown, boolean][] = [
    [
      "the server died under it",
      told("upstream_error", new SdkError(SdkErrorCode.ConnectionClosed, "Connection closed")),
      true,
    ],
    [
      "its deadline passed",
      told("upstream_timeout", new SdkError(SdkErrorCode.RequestTimeout, "timed out")),
      true,
    ],
    [
      "the server forgot the session",
      told("upstream_error", new SessionLostError(["tools/call"], 404)),
      true,
    ],
    [
      "the connection broke (fetch failed)",
      told("upstream_error", new TypeError("fetch failed", { cause: systemError("ECONNRESET") })),
      true,
    ],
    ["the server answered HTTP 502", told("upstream_error", httpError(502)), true],
    ["the server was not ready: nothing sent", told("server_unavailable"), false],
    [
      "the dial was refused: nothing sent",
      told("upstream_error", new TypeError("fetch failed", { cause: systemError("ECONNREFUSED") })),
      false,
    ],
    [
      "the server answered a JSON-RPC error",
      told("upstream_error", new ProtocolError(-32602, "bad params")),
      false,
    ],
    [
      "the server answered a malformed result",
      told("upstream_error", new SdkError(SdkErrorCode.InvalidResult, "bad")),
      false,
    ],
    ["the server answered an empty result", told("upstream_error"), false],
    ["the server refused at the door (HTTP 401)", told("upstream_error", httpError(401)), false],
    [
      "the server refused it with 403 insufficient_scope (a destructive call it refuses is failed, not interrupted)",
      told("upstream_error", new InsufficientScopeError({ requiredScope: "read write" })),
      false,
    ],
    [
      "the server refused Gatehouse's token even after renewal (no usable sign-in)",
      told("upstream_error", new SignInRequiredError("an owner must sign in again")),
      false,
    ],
    [
      "the server's 401 asked for an authorization only an owner can give",
      told("upstream_error", new UnauthorizedError("Unauthorized")),
      false,
    ],
    ["not Gatehouse's error at all", new Error("boom"), false],
  ];
  for (const [what, err, unknown] of rows) {
    it(`${what}: ${unknown ? "outcome unknown" : "known not to have run, or answered"}`, () => {
      expect(outcomeUnknown(err)).toBe(unknown);
    });
  }
});
