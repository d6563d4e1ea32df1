/**
 * Resource reads are visible like calls: what agents read through the real `/mcp` endpoint
 * from the files fixture (test/fixtures/servers/files.mjs), allowed or refused, is listed
 * through `GET /api/resource-reads` for reviewers and owners, newest first and paged, with the
 * agent's token name; and each read tells browsers to refresh.
 */
import { beforeEach, describe, expect, it } from "vitest";
import type { LiveEvent, ResourceReadsPage } from "@/lib/api-types";
import type { ErrorBody } from "@/lib/errors";
import { bodyOf, createTestUser, request, waitForEvent } from "@/test/support/runtime";
import { logger } from "../log";
import { writeAudit } from "../store/audit";
import { filesFixture, rpcRefusal } from "./files-fixtures";
import { listResourceReads } from "./reads";
import { ListedResources, RESOURCE_NOT_FOUND, readResource } from "./resources";

const files = filesFixture("gatehouse-reads-");
const { fileUri, wrapped, connect } = files;
let reviewerCookie: string;

/** A read Gatehouse refuses: the -32002 every refusal answers. */
async function refused(p: Promise<unknown>): Promise<void> {
  expect((await rpcRefusal(p)).code).toBe(RESOURCE_NOT_FOUND);
}

/** `GET /api/resource-reads` as the reviewer; `query` without the `?`. */
async function readsPage(query = ""): Promise<ResourceReadsPage> {
  const res = await request("GET", `/api/resource-reads${query ? `?${query}` : ""}`, {
    cookie: reviewerCookie,
  });
  expect(res.status).toBe(200);
  return bodyOf<ResourceReadsPage>(res);
}

describe("GET /api/resource-reads", () => {
  beforeEach(async () => {
    reviewerCookie = (await createTestUser(files.rt.runtime, "rita", ["reviewer"])).cookie;
  });

  it("a listed read and a refused read are listed with the agent's name, newest first", async () => {
    const client = await connect();
    await client.listResources();
    await client.readResource({ uri: wrapped(fileUri("notes.md")) });
    await refused(client.readResource({ uri: wrapped(fileUri(".secret")) }));

    const page = await readsPage();
    expect(page.nextBefore).toBeNull();
    const [refusal, read] = page.reads;
    expect(page.reads).toHaveLength(2);
    expect(refusal).toMatchObject({
      agent: "bot",
      server: "files",
      uri: fileUri(".secret"),
      allowed: false,
      detail: "not listed by the server",
      durationMs: null,
    });
    expect(read).toMatchObject({ agent: "bot", server: "files", uri: fileUri("notes.md"), allowed: true });
    expect(read?.detail).toMatch(/^listed; \d+ bytes$/);
    expect(typeof read?.durationMs).toBe("number");
    expect(Number.isNaN(Date.parse(read?.at ?? ""))).toBe(false);
    expect((refusal?.id ?? 0) > (read?.id ?? 0)).toBe(true);
    // What the agent got is not in the list: only that it read, why, and how much.
    expect(JSON.stringify(page)).not.toContain("# Notes");
  }, 30_000);

  it("a read through /mcp tells open browsers to refresh their list of reads", async () => {
    const client = await connect();
    await client.listResources();
    const told = waitForEvent(files.rt.runtime.bus, (e) => e.type === "resources", {
      what: () => "a resources event",
    });
    await client.readResource({ uri: wrapped(fileUri("notes.md")) });
    expect(await told).toEqual({ type: "resources" });
  }, 30_000);

  it("pages go back with before: each page at most limit reads, the last one without nextBefore", async () => {
    const client = await connect();
    await client.listResources();
    await client.readResource({ uri: wrapped(fileUri("notes.md")) });
    await refused(client.readResource({ uri: wrapped(fileUri(".secret")) }));
    await client.readResource({ uri: wrapped(fileUri("drafts", "plan.md")) });

    const first = await readsPage("limit=2");
    expect(first.reads.map((r) => r.uri)).toEqual([fileUri("drafts", "plan.md"), fileUri(".secret")]);
    expect(first.nextBefore).toBe(first.reads[1]?.id);
    const second = await readsPage(`limit=2&before=${first.nextBefore}`);
    expect(second.reads.map((r) => r.uri)).toEqual([fileUri("notes.md")]);
    expect(second.nextBefore).toBeNull();
    // A page that ends exactly at the oldest read says there is no more.
    const exact = await readsPage("limit=3");
    expect(exact.reads).toHaveLength(3);
    expect(exact.nextBefore).toBeNull();
  }, 30_000);

  it("a page holds 50 reads unless asked, at most 200, and no other audit rows", async () => {
    for (let i = 0; i < 230; i++) {
      await writeAudit(files.rt.runtime.db, {
        actor: "bot",
        action: i % 2 ? "resource.read" : "resource.refused",
        subject: `files file:///r/${i}`,
        detail: i % 2 ? "listed; 1 bytes" : "not listed by the server",
      });
      await writeAudit(files.rt.runtime.db, {
        actor: "bot",
        action: "call.refused",
        subject: "demo_add_note",
      });
    }
    const byDefault = await readsPage();
    expect(byDefault.reads).toHaveLength(50);
    expect(byDefault.reads[0]?.uri).toBe("file:///r/229");
    expect(byDefault.nextBefore).toBe(byDefault.reads[49]?.id);
    const most = await readsPage("limit=200");
    expect(most.reads).toHaveLength(200);
    expect(new Set(most.reads.map((r) => r.server))).toEqual(new Set(["files"]));
    for (const bad of ["limit=201", "limit=0", "before=x"]) {
      const res = await request("GET", `/api/resource-reads?${bad}`, { cookie: reviewerCookie });
      expect(res.status, bad).toBe(400);
      expect((await bodyOf<ErrorBody>(res)).error.code).toBe("bad_request");
    }
    // The server function bounds what it is asked for itself.
    expect((await listResourceReads(files.rt.runtime.db, { limit: 10_000 })).reads).toHaveLength(200);
  }, 30_000);

  it("only reviewers and owners see reads: an agent token gets 403, no one signed in 401", async () => {
    const client = await connect();
    await client.listResources();
    await client.readResource({ uri: wrapped(fileUri("notes.md")) });

    const asAgent = await request("GET", "/api/resource-reads", { bearer: files.token });
    expect(asAgent.status).toBe(403);
    expect((await bodyOf<ErrorBody>(asAgent)).error.code).toBe("forbidden");
    const anonymous = await request("GET", "/api/resource-reads");
    expect(anonymous.status).toBe(401);
    expect((await bodyOf<ErrorBody>(anonymous)).error.code).toBe("unauthenticated");

    const owner = await createTestUser(files.rt.runtime, "olga", ["owner"]);
    for (const cookie of [reviewerCookie, owner.cookie]) {
      const res = await request("GET", "/api/resource-reads", { cookie });
      expect(res.status).toBe(200);
      expect((await bodyOf<ResourceReadsPage>(res)).reads.map((r) => r.agent)).toEqual(["bot"]);
    }
  }, 30_000);

  it("a refused URI that names no server is shown whole, without a server, even one made to look like a read of one", async () => {
    const client = await connect();
    await refused(client.readResource({ uri: "file:///etc/passwd" }));
    await refused(client.readResource({ uri: "files file:///etc/passwd" }));

    const page = await readsPage();
    expect(page.reads.map((r) => [r.server, r.uri, r.allowed])).toEqual([
      [null, "files file:///etc/passwd", false],
      [null, "file:///etc/passwd", false],
    ]);
  }, 30_000);

  it("each read and refusal tells browsers to refresh, once its row is in the list", async () => {
    // Read as each event is published (the statement runs then), awaited at the end.
    const seen: Promise<{ event: LiveEvent; listed: number }>[] = [];
    const unsubscribe = files.rt.runtime.bus.subscribe((event) => {
      if (event.type === "resources")
        seen.push(
          listResourceReads(files.rt.runtime.db).then((page) => ({ event, listed: page.reads.length })),
        );
    });
    try {
      const deps = {
        db: files.rt.runtime.db,
        manager: files.rt.runtime.manager,
        log: logger("test-reads"),
        descriptionMaxChars: 1024,
        bus: files.rt.runtime.bus,
      };
      const ctx = { agent: "bot", listed: new ListedResources(0) };
      await readResource(deps, ctx, wrapped(fileUri("notes.md")));
      await refused(readResource(deps, ctx, wrapped(fileUri(".secret"))));
    } finally {
      unsubscribe();
    }
    expect(await Promise.all(seen)).toEqual([
      { event: { type: "resources" }, listed: 1 },
      { event: { type: "resources" }, listed: 2 },
    ]);
  }, 30_000);
});
