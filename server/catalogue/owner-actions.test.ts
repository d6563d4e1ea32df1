/**
 * Owners' actions against a migrated test store (SQLite in memory, or PostgreSQL): vouching and "always
 * confirm" through updateTool, and status changes in bulk.
 */
import type { Tool } from "@modelcontextprotocol/client";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { auditEvents } from "../store/schema";
import { audit, feed, row, view } from "./governance-fixtures";
import { bulkSetToolStatus, setToolStatus, updateTool } from "./owner-actions";
import { syncServerTools } from "./sync";
import { listCatalogue, listEnabledTools } from "./views";

describe("vouch and always confirm", () => {
  async function setup() {
    const d = await memoryDb();
    await syncServerTools(
      d,
      serverConfig("srv"),
      [
        tool("plain"),
        tool("ro", { annotations: { readOnlyHint: true } }),
        tool("rw", { annotations: { readOnlyHint: false } }),
        tool("boom", { annotations: { destructiveHint: true } }),
      ],
      OPTS,
    );
    for (const name of ["srv_plain", "srv_ro", "srv_rw", "srv_boom"])
      await setToolStatus(d, { localName: name, status: "enabled", actor: "olive" });
    return d;
  }

  it("an owner vouches a tool without annotations: it is read-only, shown with who and when, and audited", async () => {
    const d = await setup();
    expect(await view(d, "srv_plain")).toMatchObject({
      destructive: true,
      approvalReason: "no readOnlyHint",
      vouch: null,
    });
    const updated = await updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    expect(updated).toMatchObject({ destructive: false, approvalReason: null, readOnlyBy: "vouch" });
    expect(updated.vouch?.by).toBe("olive");
    expect(Date.parse(updated.vouch?.at ?? "")).not.toBeNaN();
    expect((await listEnabledTools(d)).find((t) => t.name === "srv_plain")?.destructive).toBe(false);
    expect(await audit(d, "tool.vouch", "srv_plain")).toMatchObject([{ actor: "olive" }]);
    expect((await row(d, "srv_plain")).vouchedHash).toBe((await row(d, "srv_plain")).definitionHash);
  });

  it("a tool whose server says readOnlyHint either way or destructiveHint: true cannot be vouched", async () => {
    const d = await setup();
    for (const [name, why] of [
      ["srv_rw", "readOnlyHint: false"],
      ["srv_boom", "destructiveHint: true"],
      ["srv_ro", "readOnlyHint: true"],
    ] as const) {
      expect((await view(d, name)).vouchProblem).toContain(why);
      await expect(updateTool(d, { localName: name, vouch: true, actor: "olive" }), name).rejects.toThrow(
        expect.objectContaining({ code: "conflict", message: expect.stringContaining(why) }),
      );
      expect((await row(d, name)).vouchedHash, name).toBeNull();
    }
    expect((await view(d, "srv_plain")).vouchProblem).toBeNull();
    expect(await d.select().from(auditEvents).where(eq(auditEvents.action, "tool.vouch"))).toEqual([]);
  });

  it("a vouch is dropped when the definition changes, recorded in the feed and the audit log", async () => {
    const d = await setup();
    const srv = serverConfig("srv");
    await updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    const vouchedAt = (await row(d, "srv_plain")).vouchedAt;
    const listing = (plain: Tool) => [
      plain,
      tool("ro", { annotations: { readOnlyHint: true } }),
      tool("rw", { annotations: { readOnlyHint: false } }),
      tool("boom", { annotations: { destructiveHint: true } }),
    ];
    const summary = await syncServerTools(d, srv, listing(tool("plain", { description: "changed" })), OPTS);
    expect(summary.vouchDropped).toEqual(["srv_plain"]);
    expect(await row(d, "srv_plain")).toMatchObject({ vouchedHash: null, vouchedBy: null, vouchedAt: null });
    expect((await feed(d)).filter((c) => c.kind === "vouch_dropped")).toEqual([
      {
        kind: "vouch_dropped",
        tool: "plain",
        localName: "srv_plain",
        detail: { vouchedBy: "olive", vouchedAt },
      },
    ]);
    expect(await audit(d, "tool.vouch_dropped", "srv_plain")).toMatchObject([{ actor: "server:srv" }]);
    // Accepting the change does not bring the vouch back: the new definition was never vouched.
    await updateTool(d, { localName: "srv_plain", status: "enabled", actor: "olive" });
    expect(await view(d, "srv_plain")).toMatchObject({ destructive: true, vouch: null, availability: "ok" });
    // Nor does the server going back to the vouched definition.
    await syncServerTools(d, srv, listing(tool("plain")), OPTS);
    expect((await view(d, "srv_plain")).vouch).toBeNull();
  });

  it("withdrawing a vouch makes the tool destructive again and is audited once", async () => {
    const d = await setup();
    await updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    await updateTool(d, { localName: "srv_plain", vouch: false, actor: "oscar" });
    await updateTool(d, { localName: "srv_plain", vouch: false, actor: "oscar" });
    expect(await view(d, "srv_plain")).toMatchObject({ destructive: true, vouch: null });
    expect(await audit(d, "tool.unvouch", "srv_plain")).toMatchObject([{ actor: "oscar" }]);
  });

  it("vouching twice writes one audit row", async () => {
    const d = await setup();
    await updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    await updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    expect(await audit(d, "tool.vouch", "srv_plain")).toHaveLength(1);
  });

  it("always confirm makes a read-only tool need approval, and its audit rows say on and off", async () => {
    const d = await setup();
    expect(await view(d, "srv_ro")).toMatchObject({ destructive: false, readOnlyBy: "annotation" });
    const on = await updateTool(d, { localName: "srv_ro", alwaysConfirm: true, actor: "olive" });
    expect(on).toMatchObject({
      destructive: true,
      alwaysConfirm: true,
      approvalReason: "owner requires confirmation",
      readOnlyBy: "annotation",
    });
    expect((await listEnabledTools(d)).find((t) => t.name === "srv_ro")?.destructive).toBe(true);
    await updateTool(d, { localName: "srv_ro", alwaysConfirm: true, actor: "olive" });
    await updateTool(d, { localName: "srv_ro", alwaysConfirm: false, actor: "olive" });
    expect(await view(d, "srv_ro")).toMatchObject({ destructive: false, alwaysConfirm: false });
    expect((await audit(d, "tool.always_confirm", "srv_ro")).map((a) => a.detail)).toEqual(["on", "off"]);
  });

  it("several changes in one update apply together, or none when one is refused", async () => {
    const d = await setup();
    await expect(
      updateTool(d, {
        localName: "srv_rw",
        status: "disabled",
        alwaysConfirm: true,
        vouch: true,
        actor: "olive",
      }),
    ).rejects.toThrow(expect.objectContaining({ code: "conflict" }));
    expect(await row(d, "srv_rw")).toMatchObject({ status: "enabled", alwaysConfirm: false });
    const both = await updateTool(d, {
      localName: "srv_plain",
      vouch: true,
      alwaysConfirm: true,
      actor: "olive",
    });
    expect(both).toMatchObject({ vouch: { by: "olive" }, alwaysConfirm: true, destructive: true });
  });

  it("updating a tool that does not exist is tool_not_found", async () => {
    const d = await setup();
    await expect(updateTool(d, { localName: "srv_nope", vouch: true, actor: "olive" })).rejects.toThrow(
      expect.objectContaining({ code: "tool_not_found" }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Bulk status

describe("bulkSetToolStatus", () => {
  it("enables every named tool in one go, each pinned and audited", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("srv"), [tool("a"), tool("b"), tool("c")], OPTS);
    const out = await bulkSetToolStatus(d, {
      names: ["srv_a", "srv_c", "srv_a"],
      status: "enabled",
      actor: "olive",
    });
    expect(out.map((t) => [t.localName, t.status])).toEqual([
      ["srv_a", "enabled"],
      ["srv_c", "enabled"],
    ]);
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a", "srv_c"]);
    expect(await d.select().from(auditEvents).where(eq(auditEvents.action, "tool.enable"))).toHaveLength(2);
  });

  it("changes nothing when one tool cannot be enabled, and names it with the reason", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a"), tool("b"), tool("has space")], OPTS);
    await syncServerTools(d, srv, [tool("a"), tool("has space")], OPTS);
    let error: unknown;
    try {
      await bulkSetToolStatus(d, {
        names: ["srv_a", "srv_b", "srv_has space", "srv_nope"],
        status: "enabled",
        actor: "olive",
      });
    } catch (err) {
      error = err;
    }
    expect(error).toMatchObject({ code: "tool_gone" });
    const message = (error as Error).message;
    expect(message).toContain("nothing was changed: 3 tools cannot be enabled");
    expect(message).toContain("srv_b (its server no longer lists it)");
    expect(message).toContain("srv_has space (the tool name has characters");
    expect(message).toContain("srv_nope (no such tool)");
    expect((await listCatalogue(d)).filter((t) => t.status === "enabled")).toEqual([]);
  });

  it("disables in bulk even tools that are gone", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    await bulkSetToolStatus(d, { names: ["srv_a", "srv_b"], status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await bulkSetToolStatus(d, { names: ["srv_a", "srv_b"], status: "disabled", actor: "olive" });
    expect((await listCatalogue(d)).map((t) => t.status)).toEqual(["disabled", "disabled"]);
  });
});
