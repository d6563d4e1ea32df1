/**
 * What an OAuth server's refusals mean for the supervisor: an owner must sign in (`needs_auth`),
 * never a retry loop, and never the permanent "set the credentials in its headers" of a server
 * without OAuth. And how a `WWW-Authenticate` challenge is read.
 */
import { InsufficientScopeError, SdkErrorCode, SdkHttpError } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { classifyFailure } from "./failures";
import { readChallenge, SignInRequiredError } from "./sign-in";

const posted401 = () =>
  new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, "Error POSTing to endpoint: unauthorized", {
    status: 401,
    text: "unauthorized",
  });

describe("a sign-in an owner must give is needs_auth, with the reason", () => {
  it("no usable grant (SignInRequiredError, also wrapped as a cause) is needs_auth in its own words", () => {
    const err = new Error("send failed", { cause: new SignInRequiredError("nobody has signed in") });
    expect(classifyFailure(err, { credentials: false })).toEqual({
      kind: "needs_auth",
      reason: "nobody has signed in",
    });
  });

  it("a 401 from a server that named its resource metadata offers Connect", () => {
    const failure = classifyFailure(posted401(), { credentials: false, challenged: true });
    expect(failure.kind).toBe("needs_auth");
    expect(failure.reason).toMatch(/asks for an OAuth sign-in .* press Connect/);
  });

  it("a 401 after the token was renewed means the grant no longer works: sign in again", () => {
    const err = new SdkHttpError(
      SdkErrorCode.ClientHttpAuthentication,
      "Server returned 401 after re-authentication",
      {
        status: 401,
      },
    );
    const failure = classifyFailure(err, { credentials: false, oauth: true });
    expect(failure.kind).toBe("needs_auth");
    expect(failure.reason).toMatch(/refused Gatehouse's token even after renewing it/);
  });

  it("a 401 without OAuth or a challenge stays permanent and names both fixes", () => {
    const failure = classifyFailure(posted401(), { credentials: false });
    expect(failure.kind).toBe("permanent");
    expect(failure.reason).toMatch(/names no OAuth resource metadata/);
    expect(failure.reason).toMatch(/"auth": \{"type": "oauth"\}/);
  });

  it("insufficient_scope asks for a sign-in with more scope, the server's scope text cleaned and cut", () => {
    const err = new InsufficientScopeError({ requiredScope: `read write\u0007${"x".repeat(400)}` });
    const failure = classifyFailure(err, { credentials: false, oauth: true });
    expect(failure.kind).toBe("needs_auth");
    expect(failure.reason).toMatch(
      /^the server asks for more scope than was granted \(read write x+…\): an owner must sign in again/,
    );
    expect(failure.reason).not.toContain("\u0007");
    expect(failure.reason.length).toBeLessThan(320);
  });
});

describe("insufficient_scope from a server without OAuth", () => {
  it("is a permanent refusal naming its headers: there is no grant to widen, and no Connect to press", () => {
    const failure = classifyFailure(new InsufficientScopeError({ requiredScope: "admin" }), {
      credentials: true,
    });
    expect(failure.kind).toBe("permanent");
    expect(failure.reason).toBe(
      "the server refused access (HTTP 403 insufficient_scope, asking for admin): check the credentials in its headers in gatehouse.json and what they allow",
    );
  });
});

describe("readChallenge reads a Bearer WWW-Authenticate header", () => {
  it("takes resource_metadata, scope and error, quoted or not, first occurrence winning", () => {
    expect(
      readChallenge(
        'Bearer realm="x", error="insufficient_scope", scope="read write", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="evil"',
      ),
    ).toEqual({
      resourceMetadataUrl: "https://a.example/.well-known/oauth-protected-resource/mcp",
      scope: "read write",
      error: "insufficient_scope",
    });
    expect(readChallenge("Bearer error=invalid_token")).toEqual({
      resourceMetadataUrl: null,
      scope: null,
      error: "invalid_token",
    });
  });

  it("is null for no header and for a scheme other than Bearer", () => {
    expect(readChallenge(null)).toBeNull();
    expect(readChallenge('Basic realm="x"')).toBeNull();
  });
});
