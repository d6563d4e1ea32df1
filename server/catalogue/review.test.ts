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
  it("enabling keeps the pinned definition as JSON beside its hash", () => {
    const d = memoryDb();
    syncServerTools(d, serverConfig("srv"), [tool("a")], OPTS);
    expect(row(d, "srv_a").pinnedDefinition).toBeNull();
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(row(d, "srv_a").pinnedDefinition).toBe(row(d, "srv_a").definition);
  });

  it("the view of a changed tool carries the pinned definition, the current one and their diff", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(view(d, "srv_a").change).toBeNull();
    const hostile = "the a tool <b>and</b> deletes\u202E everything";
    syncServerTools(
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
    const v = view(d, "srv_a");
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

  it("accepting the change re-pins the new definition: callable again, nothing left to review", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    expect(listEnabledTools(d)).toEqual([]);
    const accepted = updateTool(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(accepted).toMatchObject({ availability: "ok", change: null });
    expect(JSON.parse(row(d, "srv_a").pinnedDefinition ?? "{}").description).toBe("v2");
    expect(listEnabledTools(d).map((t) => t.name)).toEqual(["srv_a"]);
  });

  it("a tool enabled before definitions were kept still gets a before view when it changes", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    d.update(tools).set({ pinnedDefinition: null }).where(eq(tools.localName, "srv_a")).run();
    syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    const change = view(d, "srv_a").change;
    expect(change?.before?.description).toBe("the a tool");
    expect(change?.diff?.summary).toEqual(["description"]);
  });

  it("a changed tool whose pinned definition is unknown shows the current one without a diff", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    d.update(tools).set({ pinnedDefinition: null }).where(eq(tools.localName, "srv_a")).run();
    expect(view(d, "srv_a").change).toMatchObject({ before: null, diff: null, after: { description: "v2" } });
  });
});
