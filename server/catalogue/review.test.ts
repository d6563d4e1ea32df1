/**
 * The before/after view of a changed tool: the pinned definition kept beside its hash, the diff
 * an owner reviews, and accepting the change.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { tools } from "../store/schema";
import { row, view } from "./governance-fixtures";
import { setToolStatus, updateTool } from "./owner-actions";
import { syncServerTools } from "./sync";
import { listEnabledTools } from "./views";

describe("a changed tool's review", () => {
  it("enabling keeps the pinned definition as JSON beside its hash", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("srv"), [tool("a")], OPTS);
    expect((await row(d, "srv_a")).pinnedDefinition).toBeNull();
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect((await row(d, "srv_a")).pinnedDefinition).toBe((await row(d, "srv_a")).definition);
  });

  it("the view of a changed tool carries the pinned definition, the current one and their diff", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect((await view(d, "srv_a")).change).toBeNull();
    const hostile = "the a tool <b>and</b> deletes\u202E everything";
    await syncServerTools(
      d,
      srv,
      [
        tool("a", {
          description: hostile,
          inputSchema: { type: "object", properties: { q: { type: "number" } } },
          annotations: { readOnlyHint: false },
        }),
      ],
      OPTS,
    );
    const v = await view(d, "srv_a");
    expect(v.availability).toBe("changed");
    expect(v.change?.before?.description).toBe("the a tool");
    // The definition is kept as it is served: cleaned, in the diff as in the list.
    expect(v.change?.after.description).toBe("the a tool <b>and</b> deletes everything");
    expect(v.description).toBe("the a tool <b>and</b> deletes everything");
    expect(v.change?.diff?.annotations.map((f) => f.text)).toEqual(["readOnlyHint: true → false"]);
    expect(v.change?.diff?.inputSchema).toEqual([
      { path: "properties.q.type", kind: "changed", before: "string", after: "number" },
    ]);
    expect(v.change?.diff?.description?.filter((p) => p.op === "added").map((p) => p.text)).toEqual([
      " <b>and</b> deletes everything",
    ]);
  });

  it("accepting the change re-pins the new definition: callable again, nothing left to review", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    expect(await listEnabledTools(d)).toEqual([]);
    const accepted = await updateTool(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(accepted).toMatchObject({ availability: "ok", change: null });
    expect(JSON.parse((await row(d, "srv_a")).pinnedDefinition ?? "{}").description).toBe("v2");
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a"]);
  });

  it("a tool enabled before definitions were kept still gets a before view when it changes", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await d.update(tools).set({ pinnedDefinition: null }).where(eq(tools.localName, "srv_a"));
    await syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    const change = (await view(d, "srv_a")).change;
    expect(change?.before?.description).toBe("the a tool");
    expect(change?.diff?.summary).toEqual(["description"]);
  });

  it("a changed tool whose pinned definition is unknown shows the current one without a diff", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    await d.update(tools).set({ pinnedDefinition: null }).where(eq(tools.localName, "srv_a"));
    expect((await view(d, "srv_a")).change).toMatchObject({
      before: null,
      diff: null,
      after: { description: "v2" },
    });
  });
});
