/**
 * A server's `maxTools` on its card and for agents, with a real fixture server that lists more
 * tools than its cap, a real runtime and store: the card names the tools over the cap and where
 * to raise it, an agent calling one is told `tool_over_cap` with that hint, and a cap lowered
 * below the enabled count warns at start and on the card.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setToolStatus } from "@/server/catalogue/catalogue";
import {
  bodyOf,
  createAgentToken,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
  waitForServersReady,
} from "@/test/support/runtime";
import { serverView } from "./status";

const MANY = path.join(REPO_ROOT, "test", "fixtures", "servers", "many-tools.mjs");
/** 12 tools: a 60-character name, "has space", tool_000 … tool_009. */
const many = (maxTools: number) => ({
  command: "node",
  args: [MANY],
  env: { TOOL_COUNT: "10" },
  enabled: true,
  maxTools,
});

let rt: TestRuntime | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await rt?.stop();
});

/** A runtime in `dir`; given `databaseUrl` (postgres project), on that database again: a restart. */
async function start(maxTools: number, dir: string, databaseUrl?: string) {
  const t = await startTestRuntime({
    dir,
    servers: { many: many(maxTools) },
    ...(databaseUrl ? { databaseUrl } : {}),
  });
  rt = t;
  await waitForServersReady(t.runtime, ["many"]);
  const listed = () => t.runtime.manager.get("many").snapshot().listedTools > 0;
  await waitForEvent(t.runtime.bus, (e) => e.type === "catalogue" && e.server === "many", {
    already: listed,
    what: () => "the many-tools server's catalogue",
  });
  return t;
}

const tmp = () => mkdtempSync(path.join(tmpdir(), "gh-cap-"));
const tools = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `tool_${String(from + i).padStart(3, "0")}`);

describe("tools over a server's cap", () => {
  it("the server's card names the tools over its cap and says where to raise maxTools", async () => {
    const t = await start(4, tmp());
    const { cap } = await serverView(t.runtime.manager, t.runtime.db, "many");
    expect(cap.overCapTools).toEqual(tools(2, 9));
    expect(cap.maxTools).toBe(4);
    expect(cap.hint).toContain('raise "maxTools"');
    expect(cap.warning).toBeNull();
  });

  it("an agent calling a tool over the cap is told tool_over_cap with where to raise it, not that no such tool exists", async () => {
    const t = await start(4, tmp());
    const bearer = await createAgentToken(t.runtime, "bot");
    const res = await request("POST", "/api/calls", {
      bearer,
      body: { tool: "many_tool_009", arguments: {} },
    });
    expect(res.status).toBe(409);
    const { error } = await bodyOf<{ error: { code: string; message: string } }>(res);
    expect(error.code).toBe("tool_over_cap");
    expect(error.message).toContain('"maxTools" is 4; raise "maxTools"');
    const unknown = await request("POST", "/api/calls", {
      bearer,
      body: { tool: "many_nothing", arguments: {} },
    });
    expect((await bodyOf<{ error: { code: string } }>(unknown)).error.code).toBe("tool_not_found");
  });

  it("a maxTools lowered below the enabled count warns at start and on the card", async () => {
    const dir = tmp();
    const first = await start(6, dir);
    for (const name of tools(0, 3)) {
      await setToolStatus(first.runtime.db, { localName: `many_${name}`, status: "enabled", actor: "olga" });
    }
    await first.stop({ keepDir: true });

    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      lines.push(String(chunk));
      return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
    });
    const second = await start(2, dir, first.databaseUrl);
    const warning = '4 tools are enabled but "maxTools" is 2';
    expect(lines.filter((l) => l.includes("WARN") && l.includes(warning))).toHaveLength(1);
    expect((await serverView(second.runtime.manager, second.runtime.db, "many")).cap.warning).toContain(
      warning,
    );
  });
});
