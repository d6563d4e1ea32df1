/**
 * Gatehouse's client ID metadata document: served only when its public origin is https (a
 * client id that is a URL must be one), describing the client it registers as; and the public
 * origin is where the authorization server sends the browser back.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { clientMetadataDocument } from "@/server/http/oauth";
import {
  connect,
  type OAuthWorld,
  pressConnect,
  type SignInHost,
  startOAuthWorld,
  startSignInHost,
} from "@/test/support/oauth";
import { startTestRuntime, type TestRuntime } from "@/test/support/runtime";

let rt: TestRuntime | null = null;
let host: SignInHost | null = null;
let world: OAuthWorld | null = null;

afterEach(async () => {
  await rt?.stop();
  await host?.rt.stop();
  await world?.close();
  rt = host = world = null;
});

describe("the client ID metadata document", () => {
  it("is served for an https public origin, naming itself as client id and the callback there", async () => {
    rt = await startTestRuntime({ publicOrigin: "https://gatehouse.example.com" });
    const res = clientMetadataDocument();
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      client_id: "https://gatehouse.example.com/oauth/client-metadata.json",
      client_name: "Gatehouse",
      redirect_uris: ["https://gatehouse.example.com/oauth/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
  });

  it("is not served without a public origin, nor for a plain-http one", async () => {
    rt = await startTestRuntime();
    expect(clientMetadataDocument().status).toBe(404);
    await rt.stop();
    rt = await startTestRuntime({ publicOrigin: "http://gatehouse.internal:3000" });
    expect(clientMetadataDocument().status).toBe(404);
  });

  it("with a public origin, Connect is pressed there and the callback is on it; an authorization server without metadata-document support gets a registration for it", async () => {
    world = await startOAuthWorld({ dir: mkdtempSync(path.join(tmpdir(), "gh-cimd-")) });
    host = await startSignInHost(
      {
        remote: {
          url: world.url,
          enabled: true,
          allowPrivate: true,
          auth: { type: "oauth", allowPrivate: true },
        },
      },
      { publicOrigin: "https://gatehouse.example.com" },
    );
    // Pressed on another origin Gatehouse answers, the sign-in could never come back to its cookie.
    const elsewhere = await pressConnect(host, "remote");
    expect(elsewhere.status).toBe(400);
    expect(((await elsewhere.json()) as { error: { message: string } }).error.message).toMatch(
      /^open Gatehouse at https:\/\/gatehouse\.example\.com to sign in/,
    );
    expect(world.as.log).toEqual([]);
    const url = await connect(host, "remote", { origin: "https://gatehouse.example.com" });
    expect(url.searchParams.get("redirect_uri")).toBe("https://gatehouse.example.com/oauth/callback");
    expect(world.as.log.filter((e) => e.kind === "registration")).toEqual([
      expect.objectContaining({ ok: true, redirectUris: ["https://gatehouse.example.com/oauth/callback"] }),
    ]);
  });
});
