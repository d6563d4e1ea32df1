/**
 * Refusals by the outbound HTTP guard never carry the request's credentials (PRODUCT.md §4):
 * neither a refused dial nor a redirect refused at its next dial. The servers, the simulated DNS
 * and the loopback-only safety net are in guard-fixtures.ts.
 */
import { describe, expect, it } from "vitest";
import {
  chain,
  client,
  DNS,
  failure,
  fakeLookup,
  HAS_127_0_0_2,
  listen,
  messages,
  NO_127_0_0_2,
  PUBLIC_127_0_0_2,
  redirecting,
  registerGuardHooks,
} from "./guard-fixtures";

registerGuardHooks();

describe("credentials never appear in refusals", () => {
  const SECRET = "Bearer s3cr3t-xyz-4c1d2e";
  const KEY = "k3y-abc-9f8e7d";
  const headers = { authorization: SECRET, "x-api-key": KEY };

  function assertClean(err: Error) {
    for (const e of chain(err)) {
      for (const text of [e.message, e.stack ?? "", String(e), JSON.stringify(e)]) {
        expect(text).not.toContain("s3cr3t");
        expect(text).not.toContain(KEY);
      }
    }
  }

  it("a refused dial", async () => {
    const fetch = client({
      lookup: fakeLookup({ "api.example.test": "10.0.0.1" }),
      credentialHeaders: ["X-Api-Key"],
    });
    const err = await failure(
      fetch("http://api.example.test:8080/mcp", { method: "POST", headers, body: "{}" }),
    );
    expect(messages(err)).toContain(
      "refused: api.example.test resolves to 10.0.0.1, a private (RFC 1918) address; set allowPrivate to allow",
    );
    assertClean(err);
  });

  it("a redirect refused at its next dial", async (ctx) => {
    if (!HAS_127_0_0_2) ctx.skip(NO_127_0_0_2);
    const privateServer = await listen("127.0.0.1");
    const start = await listen(
      "127.0.0.2",
      redirecting(() => `http://private.test:${privateServer.port}/`, 307),
    );
    const fetch = client({ lookup: DNS, refuse: PUBLIC_127_0_0_2, credentialHeaders: ["X-Api-Key"] });
    const err = await failure(
      fetch(`http://public-a.test:${start.port}/`, { method: "POST", headers, body: "{}" }),
    );
    expect(messages(err)).toContain(
      "refused: private.test resolves to 127.0.0.1, a loopback address; set allowPrivate to allow",
    );
    expect(start.requests[0]?.headers.authorization).toBe(SECRET);
    expect(privateServer.requests).toHaveLength(0);
    assertClean(err);
  });
});
