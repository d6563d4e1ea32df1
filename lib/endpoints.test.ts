import { afterEach, describe, expect, it, vi } from "vitest";
import { callStatuses, finalCallStatuses, isFinalCallStatus } from "./api-types";
import { endpoints } from "./endpoints";
import { GatehouseError } from "./errors";

/** Answers every fetch with `response` and keeps what was asked. */
function recordFetches(response: () => Response) {
  const seen: { url: string; method: string; body: unknown }[] = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    seen.push({
      url,
      method: init.method ?? "GET",
      body: typeof init.body === "string" ? JSON.parse(init.body) : undefined,
    });
    return response();
  });
  return seen;
}

const ok = () => new Response("{}", { status: 200, headers: { "Content-Type": "application/json" } });

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("the browser's endpoints", () => {
  it("a name from data stays one path segment", async () => {
    const seen = recordFetches(ok);
    await endpoints.catalogue.update("a/b c", { status: "enabled" });
    await endpoints.tokens.revoke("ci?x");
    await endpoints.servers.readResource("srv", "file:///a b?c");
    expect(seen).toEqual([
      { url: "/api/catalogue/a%2Fb%20c", method: "PATCH", body: { status: "enabled" } },
      { url: "/api/tokens/ci%3Fx", method: "DELETE", body: undefined },
      {
        url: "/api/servers/srv/resources/read?uri=file%3A%2F%2F%2Fa%20b%3Fc",
        method: "GET",
        body: undefined,
      },
    ]);
  });

  it("list filters leave empty and absent values out of the query string", async () => {
    const seen = recordFetches(ok);
    await endpoints.calls.list({ status: "pending", limit: 500 });
    await endpoints.calls.list({ server: "", tool: "x", limit: 50, before: undefined });
    await endpoints.changes.page({ limit: 1 });
    expect(seen.map((s) => s.url)).toEqual([
      "/api/calls?status=pending&limit=500",
      "/api/calls?tool=x&limit=50",
      "/api/changes?limit=1",
    ]);
  });

  it("a refusal arrives as the server's GatehouseError", async () => {
    recordFetches(
      () =>
        new Response(JSON.stringify({ error: { code: "already_decided", message: "too late" } }), {
          status: 409,
          headers: { "Content-Type": "application/json" },
        }),
    );
    const error = await endpoints.calls.approve("c1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error).toMatchObject({ code: "already_decided", message: "too late" });
  });
});

describe("grants, rules and roles", () => {
  it("an approval sends its grant, a plain one an empty body; grants and rules have their paths", async () => {
    const seen = recordFetches(ok);
    await endpoints.calls.approve("c 1");
    await endpoints.calls.approve("c2", { grant: { scope: "arguments", minutes: 60, uses: 3 } });
    await endpoints.grants.list();
    await endpoints.grants.revoke("g/1");
    await endpoints.rules.list();
    await endpoints.users.update("rita", { roles: ["owner", "reviewer"] });
    expect(seen).toEqual([
      { url: "/api/calls/c%201/approve", method: "POST", body: {} },
      {
        url: "/api/calls/c2/approve",
        method: "POST",
        body: { grant: { scope: "arguments", minutes: 60, uses: 3 } },
      },
      { url: "/api/grants", method: "GET", body: undefined },
      { url: "/api/grants/g%2F1", method: "DELETE", body: undefined },
      { url: "/api/rules", method: "GET", body: undefined },
      { url: "/api/users/rita", method: "PATCH", body: { roles: ["owner", "reviewer"] } },
    ]);
  });
});

describe("call statuses", () => {
  it("every status but pending and running is final", () => {
    expect([...finalCallStatuses].sort()).toEqual(
      callStatuses.filter((s) => s !== "pending" && s !== "running").sort(),
    );
    expect(isFinalCallStatus("withdrawn")).toBe(true);
    expect(isFinalCallStatus("pending")).toBe(false);
    expect(isFinalCallStatus("nonsense")).toBe(false);
  });
});
