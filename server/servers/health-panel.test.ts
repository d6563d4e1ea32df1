import { describe, expect, it } from "vitest";
import type { HealthPanelView } from "@/lib/api-types";
import { bodyOf, createTestUser, LIST_NOTES, request, waitForCallStatus } from "@/test/support/runtime";
import { addNote, approve, call, deny, people, runtimes } from "../calls/call-fixtures";
import { PANEL_HOURS, quantile } from "./health-panel";

const { start } = runtimes();

describe("the health panel", () => {
  it("counts waiting calls, reviewers' decisions this hour with their times, and calls per server per hour", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    await call(agent, LIST_NOTES, {}, 200);
    const approved = await addNote(agent, "approve me");
    expect((await approve(approved.id, alice.cookie)).status).toBe(200);
    await waitForCallStatus(rt.runtime, approved.id, "succeeded");
    const denied = await addNote(agent, "deny me");
    expect((await deny(denied.id, alice.cookie, "no")).status).toBe(200);
    await addNote(agent, "still waiting");

    const olive = await createTestUser(rt.runtime, "olive", ["owner"]);
    const res = await request("GET", "/api/health", { cookie: olive.cookie });
    expect(res.status).toBe(200);
    const panel = await bodyOf<HealthPanelView>(res);
    expect(panel.pendingNow).toBe(1);
    expect(panel.decisionsLastHour).toBe(2);
    expect(panel.hours).toHaveLength(PANEL_HOURS);
    // The latest hours only (a test may run across the turn of an hour).
    const recent = panel.timeToDecision.slice(-2);
    expect(recent.reduce((n, h) => n + h.decisions, 0)).toBe(2);
    for (const h of recent.filter((r) => r.decisions > 0)) {
      expect(h.p50).toBeGreaterThanOrEqual(0);
      expect(h.p95).toBeGreaterThanOrEqual(h.p50 ?? 0);
    }
    expect(panel.timeToDecision.slice(0, -2).every((h) => h.decisions === 0 && h.p50 === null)).toBe(true);
    expect(panel.callsPerServer.map((s) => s.server)).toEqual(["demo"]);
    const demo = panel.callsPerServer[0]?.counts ?? [];
    expect(demo).toHaveLength(PANEL_HOURS);
    expect(demo.slice(-2).reduce((a, b) => a + b, 0)).toBe(4);
    expect(demo.slice(0, -2).every((n) => n === 0)).toBe(true);
    expect(panel.failedDeliveries).toBe(0);
  });

  it("is for owners: a reviewer gets 403 and nobody signed in 401", async () => {
    const rt = await start();
    const { alice } = await people(rt);
    expect((await request("GET", "/api/health", { cookie: alice.cookie })).status).toBe(403);
    expect((await request("GET", "/api/health")).status).toBe(401);
  });

  it("takes quantiles by nearest rank, and none of no values", () => {
    expect(quantile([], 0.5)).toBeNull();
    expect(quantile([3], 0.95)).toBe(3);
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 100], 0.95)).toBe(19);
  });
});
