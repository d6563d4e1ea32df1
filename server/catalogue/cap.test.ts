/**
 * `maxTools` slots and what a call of a tool without a slot is told, against a real SQLite store:
 * only rows the server still lists (and `allowTools` lets through) hold a slot; a tool left out by
 * `allowTools` is refused as excluded, and one over the cap as over the cap, with where to raise it.
 */
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { decideCall } from "../calls/decision";
import type { ServerConfig } from "../config";
import type { Db } from "../store/db";
import { listEnabledTools, setToolStatus, syncServerTools } from "./catalogue";

/** 25 tools, as `@playwright/mcp` lists them. */
const PLAYWRIGHT = Array.from({ length: 25 }, (_, i) => `browser_${String.fromCharCode(97 + i)}`);
const listing = (names: readonly string[]) => names.map((n) => tool(n));

async function enableAll(d: Db, names: readonly string[]) {
  for (const n of names) await setToolStatus(d, { localName: `pw_${n}`, status: "enabled", actor: "owner" });
}

async function stopOf(d: Db, name: string) {
  const { decision } = await decideCall(
    { db: d },
    { requester: { kind: "agent", name: "bot" }, tool: name, args: {} },
  );
  return decision.outcome === "stop" ? { code: decision.code, message: decision.message } : decision.outcome;
}

describe("maxTools slots", () => {
  it("rows allowTools now excludes hold no slot: 12 allowed names of 25 all get a row at the default cap", async () => {
    const d = await memoryDb();
    const first = await syncServerTools(d, serverConfig("pw"), listing(PLAYWRIGHT), OPTS);
    expect(first.added).toHaveLength(12);
    expect(first.overCap).toHaveLength(13);
    await enableAll(d, PLAYWRIGHT.slice(0, 12));
    // Four of the rows that have one, eight that are over the cap.
    const allowed = [...PLAYWRIGHT.slice(0, 4), ...PLAYWRIGHT.slice(17, 25)];
    const summary = await syncServerTools(
      d,
      serverConfig("pw", { allowTools: allowed }),
      listing(PLAYWRIGHT),
      OPTS,
    );
    expect(summary.gone).toHaveLength(8);
    expect(summary.overCap).toEqual([]);
    expect(summary.added.sort()).toEqual(PLAYWRIGHT.slice(17, 25).map((n) => `pw_${n}`));
    await enableAll(d, PLAYWRIGHT.slice(17, 25));
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(allowed.map((n) => `pw_${n}`));
  });

  it("a gone row holds no slot against a tool the server lists", async () => {
    const d = await memoryDb();
    const srv = serverConfig("pw", { maxTools: 1 });
    await syncServerTools(d, srv, [tool("m")], OPTS);
    const summary = await syncServerTools(d, srv, [tool("a")], OPTS);
    expect(summary.gone).toEqual(["pw_m"]);
    expect(summary.added).toEqual(["pw_a"]);
    expect(summary.overCap).toEqual([]);
  });

  it("a listed row keeps its place when it comes back, even beyond the cap: stable trimming protects listed rows", async () => {
    const d = await memoryDb();
    const srv = serverConfig("pw", { maxTools: 1 });
    await syncServerTools(d, srv, [tool("m")], OPTS);
    await syncServerTools(d, srv, [tool("a")], OPTS);
    const back = await syncServerTools(d, srv, [tool("a"), tool("m"), tool("b")], OPTS);
    expect(back.returned).toEqual(["pw_m"]);
    expect(back.overCap).toEqual(["b"]);
  });
});

describe("what a call of a tool without a slot is told", () => {
  it("a tool excluded by allowTools is refused as excluded, with the allowTools path, not as gone", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("pw"), listing(PLAYWRIGHT.slice(0, 3)), OPTS);
    await enableAll(d, PLAYWRIGHT.slice(0, 3));
    const allow = serverConfig("pw", { allowTools: [PLAYWRIGHT[0]] });
    await syncServerTools(d, allow, listing(PLAYWRIGHT.slice(0, 3)), OPTS);
    const stop = await stopOf(d, `pw_${PLAYWRIGHT[1]}`);
    expect(stop).toMatchObject({ code: "tool_excluded" });
    expect(stop).toHaveProperty("message", expect.stringContaining("mcpServers.pw.allowTools"));
    // Listed again once allowTools lets it through: callable as before.
    await syncServerTools(d, serverConfig("pw"), listing(PLAYWRIGHT.slice(0, 3)), OPTS);
    expect(await stopOf(d, `pw_${PLAYWRIGHT[1]}`)).not.toMatchObject({ code: "tool_excluded" });
  });

  it("a tool the server lists no more is still refused as gone", async () => {
    const d = await memoryDb();
    const srv = serverConfig("pw");
    await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    await enableAll(d, ["a"]);
    await syncServerTools(d, srv, [tool("b")], OPTS);
    expect(await stopOf(d, "pw_a")).toMatchObject({ code: "tool_gone" });
  });

  it("a tool over the cap is refused as tool_over_cap, naming the file and line where maxTools is raised", async () => {
    const d = await memoryDb();
    const base = serverConfig("pw", { maxTools: 2 });
    const srv: ServerConfig = {
      ...base,
      source: { file: "/etc/gatehouse/gatehouse.json", line: 7, enabled: true },
    };
    await syncServerTools(d, srv, [tool("a"), tool("b"), tool("c")], OPTS);
    const stop = await stopOf(d, "pw_c");
    expect(stop).toMatchObject({ code: "tool_over_cap" });
    expect(stop).toHaveProperty("message", expect.stringContaining('"maxTools" is 2'));
    expect(stop).toHaveProperty("message", expect.stringContaining("/etc/gatehouse/gatehouse.json line 7"));
    expect(await stopOf(d, "pw_nothing")).toMatchObject({ code: "tool_not_found" });
  });
});
