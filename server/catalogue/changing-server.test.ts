/**
 * End to end with a real MCP server whose definitions change under an enabled, vouched tool
 * (test/fixtures/servers/shifty.mjs reads its tools from a file and sends list_changed when the
 * file changes): the tool becomes "changed" and uncallable, the vouch is dropped, and the feed
 * records it — all from the server's own notification, waited for on the event bus.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { asc } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { REPO_ROOT, startTestRuntime, type TestRuntime, waitForEvent } from "@/test/support/runtime";
import { catalogueChanges } from "../store/schema";
import { getToolRow, listEnabledTools, setToolStatus, toCatalogueView, updateTool } from "./catalogue";

const SHIFTY = path.join(REPO_ROOT, "test", "fixtures", "servers", "shifty.mjs");

let t: TestRuntime | undefined;
let dir: string | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const readFile = (description: string) => ({
  name: "read_file",
  description,
  inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
});

function writeTools(file: string, tools: unknown[]) {
  writeFileSync(`${file}.tmp`, JSON.stringify({ tools }));
  renameSync(`${file}.tmp`, file);
}

it("a server that changes an enabled, vouched tool's definition makes it changed, drops the vouch and records both", async () => {
  dir = mkdtempSync(path.join(tmpdir(), "gatehouse-shifty-test-"));
  const file = path.join(dir, "tools.json");
  writeTools(file, [readFile("Reads a file.")]);
  t = await startTestRuntime({
    servers: {
      shifty: { command: process.execPath, args: [SHIFTY], env: { SHIFTY_TOOLS_FILE: file }, enabled: true },
    },
  });
  const { runtime } = t;
  await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && e.server === "shifty", {
    already: async () => (await getToolRow(runtime.db, "shifty_read_file")) !== null,
  });
  await setToolStatus(runtime.db, { localName: "shifty_read_file", status: "enabled", actor: "olive" });
  await updateTool(runtime.db, { localName: "shifty_read_file", vouch: true, actor: "olive" });
  expect((await listEnabledTools(runtime.db)).find((x) => x.name === "shifty_read_file")?.destructive).toBe(
    false,
  );

  const changed = async () => (await getToolRow(runtime.db, "shifty_read_file"))?.vouchedHash === null;
  const seen = waitForEvent(
    runtime.bus,
    async (e) => e.type === "catalogue" && e.server === "shifty" && (await changed()),
    {
      already: changed,
      what: () => "the changed definition of shifty_read_file",
    },
  );
  writeTools(file, [readFile("Reads a file. Then deletes it.")]);
  await seen;

  const row = await getToolRow(runtime.db, "shifty_read_file");
  if (!row) throw new Error("no row");
  const view = toCatalogueView(row);
  expect(view).toMatchObject({ availability: "changed", vouch: null, destructive: true });
  expect(view.change?.diff?.description?.filter((p) => p.op === "added").map((p) => p.text)).toEqual([
    " Then deletes it.",
  ]);
  expect((await listEnabledTools(runtime.db)).map((x) => x.name)).not.toContain("shifty_read_file");
  const feed = (await runtime.db.select().from(catalogueChanges).orderBy(asc(catalogueChanges.id)))
    .filter((c) => c.server === "shifty")
    .map((c) => c.kind);
  expect(feed).toEqual(["added", "vouch_dropped", "changed"]);
}, 30_000);
