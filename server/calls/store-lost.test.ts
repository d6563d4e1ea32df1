import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { bodyOf, createAgentToken, enableTool, LIST_NOTES, request } from "@/test/support/runtime";
import { asAdmin, testDialect } from "@/test/support/store";
import { calls } from "../store/schema";
import { runtimes } from "./call-fixtures";

const { start } = runtimes();

describe.runIf(testDialect === "postgres")("PostgreSQL lost during operation", () => {
  it("calls answer 503 store_unavailable while it is gone, write nothing, and work again once it is back", async () => {
    const rt = await start();
    await enableTool(rt.runtime, LIST_NOTES);
    const agent = await createAgentToken(rt.runtime, "agent-a");
    let answered = 0;
    const send = async () => {
      const res = await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: LIST_NOTES, arguments: {} },
      });
      if (res.status === 200) answered++;
      return res;
    };
    expect((await send()).status).toBe(200);
    const before = (await rt.runtime.db.select({ id: calls.id }).from(calls)).length - answered;

    const database = new URL(rt.databaseUrl ?? "").pathname.slice(1);
    await asAdmin(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS false`);
    try {
      await asAdmin(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}' AND pid <> pg_backend_pid()`,
      );
      for (let i = 0; i < 3; i++) {
        const res = await send();
        expect(res.status).toBe(503);
        expect(res.headers.get("retry-after")).toBeTruthy();
        const body = await bodyOf<{ error: { code: string; message: string } }>(res);
        expect(body.error.code).toBe("store_unavailable");
        expect(body.error.message).not.toContain("password");
      }
    } finally {
      await asAdmin(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`);
    }

    // Back by itself, no restart: the demo server too, which this replica stopped when the
    // connection holding its lock went (another replica might have taken it meanwhile).
    await expect
      .poll(async () => (await bodyOf<CallView>(await send())).status, { timeout: 30_000 })
      .toBe("succeeded");
    // The refused requests left no row behind: every row is one of an answered call.
    const rows = await rt.runtime.db.select({ id: calls.id }).from(calls);
    expect(rows.length).toBe(before + answered);
  }, 60_000);
});
