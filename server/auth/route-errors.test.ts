/**
 * How the one route wrapper answers errors: validation and conflicts with their codes, every
 * error code with its status in the {error: {code, message}} shape, an unknown exception as a
 * 500 that leaks nothing, and a request body over the limit refused before anything is stored.
 */
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { type ErrorCode, errorStatus, GatehouseError } from "@/lib/errors";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  ORIGIN,
  request,
} from "@/test/support/runtime";
import { route } from "../http/route";
import { MAX_REQUEST_BODY_BYTES } from "../request";
import { calls } from "../store/schema";
import { expectError, runtimePerTest } from "./auth-fixtures";

const start = runtimePerTest();

describe("API errors", () => {
  it("a body that fails validation is 400 invalid_body naming the field", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const message = await expectError(
      await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "no spaces allowed" } }),
      400,
      "invalid_body",
    );
    expect(message).toContain("body.name");
    await expectError(
      await request("POST", "/api/tokens", { cookie: owner.cookie, body: "{not json" }),
      400,
      "invalid_body",
    );
  });

  it("a conflict is 409 already_exists", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    expect(
      (await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "robot" } })).status,
    ).toBe(201);
    await expectError(
      await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "robot" } }),
      409,
      "already_exists",
    );
  });

  it("every error code is answered with its status in the {error: {code, message}} shape", async () => {
    await start();
    for (const code of Object.keys(errorStatus) as ErrorCode[]) {
      const handler = route({ access: ["public"] }, () => {
        throw new GatehouseError(code, `failed with ${code}`);
      });
      const res = await handler(new Request(`${ORIGIN}/api/x`, { headers: { host: new URL(ORIGIN).host } }), {
        params: Promise.resolve({}),
      });
      expect(res.status, code).toBe(errorStatus[code]);
      expect(await res.json()).toEqual({ error: { code, message: `failed with ${code}` } });
    }
  });

  it("an unknown exception becomes 500 internal error without leaking its message", async () => {
    await start();
    const secret = "SQLITE_CORRUPT at /srv/private/gatehouse.db token=gh_abc123";
    const handler = route({ access: ["public"] }, () => {
      throw new Error(secret);
    });
    const res = await handler(new Request(`${ORIGIN}/api/x`, { headers: { host: new URL(ORIGIN).host } }), {
      params: Promise.resolve({}),
    });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: { code: "internal", message: "internal error" } });
    expect(text).not.toContain("SQLITE");
    expect(text).not.toContain("gh_abc123");
  });
});

describe("request body limit", () => {
  it("a JSON body over 4 MiB is refused with 413 payload_too_large and stores nothing", async () => {
    const rt = await start();
    await enableTool(rt.runtime, ADD_NOTE);
    const agent = await createAgentToken(rt.runtime, "robot");
    const callCount = async () => (await rt.runtime.db.select({ id: calls.id }).from(calls)).length;
    // JSON allows any amount of whitespace, so padding keeps the body a valid call at any size:
    // only its size can be the reason for a refusal.
    const call = JSON.stringify({ tool: ADD_NOTE, arguments: { text: "padded" } });
    const padded = (bytes: number) => call + " ".repeat(bytes - call.length);
    expect(MAX_REQUEST_BODY_BYTES).toBe(4 * 1024 * 1024);

    await expectError(
      await request("POST", "/api/calls", { bearer: agent, body: padded(MAX_REQUEST_BODY_BYTES + 1) }),
      413,
      "payload_too_large",
    );
    expect(await callCount()).toBe(0);

    // The same call at exactly the limit is accepted and stored.
    const accepted = await request("POST", "/api/calls", {
      bearer: agent,
      body: padded(MAX_REQUEST_BODY_BYTES),
    });
    expect(accepted.status).toBe(202);
    expect((await bodyOf<CallView>(accepted)).status).toBe("pending");
    expect(await callCount()).toBe(1);
    expect(rt.demoRuns()).toBe(0);
  });
});
