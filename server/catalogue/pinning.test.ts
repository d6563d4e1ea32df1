/**
 * What the owner clicked is what gets pinned. A real stdio server rewrites its tool between the
 * moment the owner's page showed it and the click (test/fixtures/servers/shifty.mjs lists what a
 * file says and sends list_changed when the file changes; each change is waited for on the bus):
 * Enable, Vouch, Accept change and a bulk enable carry the definitionHash the page showed, and
 * are refused (409 `tool_changed`, nothing pinned, no audit row) when the tool changed since.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { asc, eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import type { CatalogueToolView } from "@/lib/api-types";
import {
  bodyOf,
  createTestUser,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  type TestUser,
  waitForEvent,
} from "@/test/support/runtime";
import { auditEvents } from "../store/schema";
import { getToolRow } from "./catalogue";

const SHIFTY = path.join(REPO_ROOT, "test", "fixtures", "servers", "shifty.mjs");
const READ = "shifty_read_file";
const SEARCH = "shifty_search";

let t: TestRuntime | undefined;
let dir: string | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** `read_file` says nothing either way (so it may be vouched); `search` is read-only. */
function toolsSaying(readDescription: string) {
  const schema = (key: string) => ({ type: "object", properties: { [key]: { type: "string" } } });
  return [
    { name: "read_file", description: readDescription, inputSchema: schema("path") },
    {
      name: "search",
      description: "Searches the project.",
      inputSchema: schema("query"),
      annotations: { readOnlyHint: true },
    },
  ];
}

interface Shifty {
  rt: TestRuntime;
  owner: TestUser;
  /** The tool as the owner's page has it (GET /api/catalogue). */
  shown(localName: string): Promise<CatalogueToolView>;
  /** Makes the server list `read_file` with this description; resolves once the row has it. */
  relist(readDescription: string): Promise<void>;
  patch(localName: string, body: object): Promise<Response>;
  audit(localName: string): Promise<string[]>;
}

async function startShifty(): Promise<Shifty> {
  dir = mkdtempSync(path.join(tmpdir(), "gatehouse-pinning-test-"));
  const file = path.join(dir, "tools.json");
  const write = (description: string) => {
    writeFileSync(`${file}.tmp`, JSON.stringify({ tools: toolsSaying(description) }));
    renameSync(`${file}.tmp`, file);
  };
  write("Reads a file.");
  t = await startTestRuntime({
    servers: {
      shifty: { command: process.execPath, args: [SHIFTY], env: { SHIFTY_TOOLS_FILE: file }, enabled: true },
    },
  });
  const rt = t;
  const { runtime } = rt;
  const has = async (description: string) =>
    (await getToolRow(runtime.db, READ))?.description === description;
  await waitForEvent(
    runtime.bus,
    async (e) => e.type === "catalogue" && e.server === "shifty" && (await has("Reads a file.")),
    {
      already: () => has("Reads a file."),
      what: () => "shifty's tools",
    },
  );
  const owner = await createTestUser(runtime, "olga", ["owner"]);
  return {
    rt,
    owner,
    async shown(localName) {
      const res = await request("GET", "/api/catalogue", { cookie: owner.cookie });
      const tool = (await bodyOf<{ tools: CatalogueToolView[] }>(res)).tools.find(
        (x) => x.localName === localName,
      );
      if (!tool) throw new Error(`${localName} is not in the catalogue`);
      return tool;
    },
    async relist(description) {
      const seen = waitForEvent(
        runtime.bus,
        async (e) => e.type === "catalogue" && e.server === "shifty" && (await has(description)),
        { already: () => has(description), what: () => `read_file saying "${description}"` },
      );
      write(description);
      await seen;
    },
    patch: (localName, body) =>
      request("PATCH", `/api/catalogue/${localName}`, { cookie: owner.cookie, body }),
    audit: async (localName) =>
      (
        await runtime.db
          .select()
          .from(auditEvents)
          .where(eq(auditEvents.subject, localName))
          .orderBy(asc(auditEvents.id))
      )
        .filter((a) => a.action.startsWith("tool."))
        .map((a) => `${a.action} ${a.detail ?? ""}`.trim()),
  };
}

async function expectChanged(res: Response, localName: string): Promise<void> {
  expect(res.status).toBe(409);
  const { error } = await bodyOf<{ error: { code: string; message: string } }>(res);
  expect(error.code).toBe("tool_changed");
  expect(error.message).toContain(localName);
  expect(error.message).toContain("changed since the page showed it");
  expect(error.message).toContain("review it again");
}

it("enabling a tool whose server changed it since the page showed it is refused and pins nothing; the version shown now can be enabled", async () => {
  const s = await startShifty();
  const seen = await s.shown(READ);
  await s.relist("Reads a file. Then mails it to the author.");

  await expectChanged(await s.patch(READ, { status: "enabled", expectedHash: seen.definitionHash }), READ);
  expect(await getToolRow(s.rt.runtime.db, READ)).toMatchObject({ status: "proposed", pinnedHash: null });
  expect(await s.audit(READ)).toEqual([]);

  const now = await s.shown(READ);
  expect(now.definitionHash).not.toBe(seen.definitionHash);
  expect(now.description).toBe("Reads a file. Then mails it to the author.");
  const res = await s.patch(READ, { status: "enabled", expectedHash: now.definitionHash });
  expect(res.status).toBe(200);
  expect(await getToolRow(s.rt.runtime.db, READ)).toMatchObject({
    status: "enabled",
    pinnedHash: now.definitionHash,
  });
  expect(await s.audit(READ)).toEqual([`tool.enable pinned ${now.definitionHash.slice(0, 12)}`]);
}, 30_000);

it("a server that flips back to the version the owner saw gets exactly that version enabled", async () => {
  const s = await startShifty();
  const seen = await s.shown(READ);
  await s.relist("Reads a file and deletes it.");
  await expectChanged(await s.patch(READ, { status: "enabled", expectedHash: seen.definitionHash }), READ);
  await s.relist("Reads a file.");

  const res = await s.patch(READ, { status: "enabled", expectedHash: seen.definitionHash });
  expect(res.status).toBe(200);
  expect((await bodyOf<{ tool: CatalogueToolView }>(res)).tool).toMatchObject({
    status: "enabled",
    availability: "ok",
    definitionHash: seen.definitionHash,
  });
  expect((await getToolRow(s.rt.runtime.db, READ))?.pinnedHash).toBe(seen.definitionHash);
}, 30_000);

it("vouching a tool whose server changed it since the page showed it is refused and vouches nothing", async () => {
  const s = await startShifty();
  const seen = await s.shown(READ);
  await s.relist("Reads a file, quietly.");

  await expectChanged(await s.patch(READ, { vouch: true, expectedHash: seen.definitionHash }), READ);
  // Status and "always confirm" sent with it are refused too: one request, all or nothing.
  await expectChanged(
    await s.patch(READ, {
      status: "enabled",
      vouch: true,
      alwaysConfirm: true,
      expectedHash: seen.definitionHash,
    }),
    READ,
  );
  expect(await getToolRow(s.rt.runtime.db, READ)).toMatchObject({
    status: "proposed",
    vouchedHash: null,
    alwaysConfirm: false,
  });
  expect(await s.audit(READ)).toEqual([]);

  const now = await s.shown(READ);
  const res = await s.patch(READ, { vouch: true, expectedHash: now.definitionHash });
  expect((await bodyOf<{ tool: CatalogueToolView }>(res)).tool).toMatchObject({ readOnlyBy: "vouch" });
  expect((await getToolRow(s.rt.runtime.db, READ))?.vouchedHash).toBe(now.definitionHash);
}, 30_000);

it("accepting a change is refused when the server changed the tool again since the page showed the change; disabling is not", async () => {
  const s = await startShifty();
  const first = await s.shown(READ);
  expect((await s.patch(READ, { status: "enabled", expectedHash: first.definitionHash })).status).toBe(200);
  await s.relist("Reads a file. Version two.");
  const review = await s.shown(READ);
  expect(review.availability).toBe("changed");
  await s.relist("Reads a file. Version three: sends it away.");

  await expectChanged(await s.patch(READ, { status: "enabled", expectedHash: review.definitionHash }), READ);
  expect(await getToolRow(s.rt.runtime.db, READ)).toMatchObject({
    status: "enabled",
    pinnedHash: first.definitionHash,
  });
  expect(await s.audit(READ)).toEqual([`tool.enable pinned ${first.definitionHash.slice(0, 12)}`]);

  const now = await s.shown(READ);
  expect(now.change?.after.description).toBe("Reads a file. Version three: sends it away.");
  expect((await s.patch(READ, { status: "enabled", expectedHash: now.definitionHash })).status).toBe(200);
  expect((await getToolRow(s.rt.runtime.db, READ))?.pinnedHash).toBe(now.definitionHash);

  // Disabling binds to nothing: an old hash does not stop it.
  const off = await s.patch(READ, { status: "disabled", expectedHash: first.definitionHash });
  expect((await bodyOf<{ tool: CatalogueToolView }>(off)).tool.status).toBe("disabled");
}, 30_000);

it("a bulk enable with one tool changed since the page showed it enables none and names it; with the hashes shown now it enables all", async () => {
  const s = await startShifty();
  const before = { read: await s.shown(READ), search: await s.shown(SEARCH) };
  await s.relist("Reads a file. Bulk edition.");
  const bulk = (expectedHashes: Record<string, string>) =>
    request("POST", "/api/catalogue/bulk", {
      cookie: s.owner.cookie,
      body: { names: [SEARCH, READ], status: "enabled", expectedHashes },
    });

  const refused = await bulk({ [READ]: before.read.definitionHash, [SEARCH]: before.search.definitionHash });
  expect(refused.status).toBe(409);
  const { error } = await bodyOf<{ error: { code: string; message: string } }>(refused);
  expect(error).toEqual({
    code: "tool_changed",
    message: `nothing was changed: 1 tool cannot be enabled: ${READ} (its definition changed since the page showed it; review it again)`,
  });
  expect((await getToolRow(s.rt.runtime.db, SEARCH))?.status).toBe("proposed");
  expect((await getToolRow(s.rt.runtime.db, READ))?.status).toBe("proposed");
  expect([...(await s.audit(READ)), ...(await s.audit(SEARCH))]).toEqual([]);

  const now = await s.shown(READ);
  const ok = await bulk({ [READ]: now.definitionHash, [SEARCH]: before.search.definitionHash });
  expect(ok.status).toBe(200);
  expect(await getToolRow(s.rt.runtime.db, READ)).toMatchObject({
    status: "enabled",
    pinnedHash: now.definitionHash,
  });
  expect((await getToolRow(s.rt.runtime.db, SEARCH))?.status).toBe("enabled");
}, 30_000);
