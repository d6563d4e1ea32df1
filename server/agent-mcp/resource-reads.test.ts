/**
 * Resources obey the catalogue: through the real `/mcp` endpoint, against a careless file server
 * (test/fixtures/servers/files.mjs) that would serve any file it is asked for, an agent reads only
 * what the server listed or an owner allowed in `resources.allow`, and every read, allowed or
 * refused, is an audit row under the agent's token name.
 */
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ErrorCode, ReadResourceResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { logger } from "../log";
import { type AuditRow, listAuditByActions } from "../store/audit";
import { filesFixture, rpcRefusal } from "./files-fixtures";
import type { ResourceDeps } from "./listings";
import {
  ListedResources,
  RESOURCE_NOT_FOUND,
  RESOURCE_READ_MAX_BYTES,
  readResource,
  TRUNCATED_META_KEY,
} from "./resources";

const files = filesFixture("gatehouse-files-");
const { fileUri, wrapped, connect } = files;

const refusal = rpcRefusal;

function reads(): Promise<AuditRow[]> {
  return listAuditByActions(files.rt.runtime.db, {
    actions: ["resource.read", "resource.refused"],
    limit: 100,
  });
}

/** How many `resources/list` requests the fixture has answered (its `list_count` tool). */
async function listsServed(): Promise<number> {
  const res = await files.rt.runtime.manager
    .get("files")
    .read((client, options) => client.callTool({ name: "list_count", arguments: {} }, options));
  const first = (res.content as { type: string; text?: string }[])[0];
  return Number(first?.text);
}

function deps(): ResourceDeps {
  return {
    db: files.rt.runtime.db,
    manager: files.rt.runtime.manager,
    log: logger("test-resources"),
    descriptionMaxChars: 1024,
  };
}

describe("resources/read through /mcp", () => {
  it("a resource the server listed is read, and the read is audited with the agent's name", async () => {
    const client = await connect();
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toEqual([wrapped(fileUri("notes.md"))]);
    const read = await client.readResource({ uri: wrapped(fileUri("notes.md")) });
    expect(read.contents).toEqual([
      { uri: wrapped(fileUri("notes.md")), mimeType: "text/plain", text: "# Notes\nlisted\n" },
    ]);
    const [row] = await reads();
    expect(row).toMatchObject({
      actor: "bot",
      action: "resource.read",
      subject: `files ${fileUri("notes.md")}`,
    });
    expect(row?.detail).toMatch(/^listed; \d+ bytes$/);
  }, 30_000);

  it("a URI the server never listed is refused with -32002 and audited, though the server would serve it", async () => {
    // The server itself hands out both: the refusal is Gatehouse's.
    const server = files.rt.runtime.manager.get("files");
    for (const uri of ["file:///etc/passwd", fileUri(".secret")]) {
      const direct = await server.read((c, options) => c.readResource({ uri }, options));
      expect(direct.contents.length).toBe(1);
    }
    const client = await connect();
    await client.listResources();
    const passwd = await refusal(client.readResource({ uri: wrapped("file:///etc/passwd") }));
    const hidden = await refusal(client.readResource({ uri: wrapped(fileUri(".secret")) }));
    const missing = await refusal(client.readResource({ uri: wrapped(fileUri("nothing-here.md")) }));
    for (const err of [passwd, hidden, missing]) expect(err.code).toBe(RESOURCE_NOT_FOUND);
    // One answer whatever exists, so an agent cannot probe the server's disk.
    expect(new Set([passwd.message, hidden.message, missing.message]).size).toBe(1);
    expect(passwd.message).toMatch(/listed/);
    expect((await reads()).reverse().map((r) => [r.actor, r.action, r.subject, r.detail])).toEqual([
      ["bot", "resource.refused", "files file:///etc/passwd", "not listed by the server"],
      ["bot", "resource.refused", `files ${fileUri(".secret")}`, "not listed by the server"],
      ["bot", "resource.refused", `files ${fileUri("nothing-here.md")}`, "not listed by the server"],
    ]);
  }, 30_000);

  it("a URI the owner allowed in resources.allow is read though never listed; a way out of the allowed folder is not", async () => {
    const client = await connect();
    const plan = await client.readResource({ uri: wrapped(fileUri("drafts", "plan.md")) });
    expect(plan.contents).toMatchObject([{ text: "allowed by the owner\n" }]);
    const allowedRow = (await reads())[0];
    expect(allowedRow).toMatchObject({ actor: "bot", action: "resource.read" });
    expect(allowedRow?.detail).toMatch(/^allowed by resources\.allow; /);

    const drafts = pathToFileURL(path.join(files.root, "drafts")).href;
    for (const wayOut of [
      `${drafts}/../.secret`,
      `${drafts}/%2e%2e/.secret`,
      `${drafts}/..%2f.secret`,
      `${drafts}/./../.secret`,
    ]) {
      const err = await refusal(client.readResource({ uri: wrapped(wayOut) }));
      expect(err.code).toBe(RESOURCE_NOT_FOUND);
    }
    expect((await reads()).filter((r) => r.action === "resource.refused")).toHaveLength(4);
  }, 30_000);

  it("a way out of the allowed folder percent-encoded twice or more is refused, audited, and never reaches the server", async () => {
    const client = await connect();
    const drafts = pathToFileURL(path.join(files.root, "drafts")).href;
    const waysOut = [
      `${drafts}/%252e%252e%252f.secret`,
      `${drafts}/%252E%252E/.secret`,
      `${drafts}/%25252e%25252e%25252f.secret`,
    ];
    for (const wayOut of waysOut) {
      const err = await refusal(client.readResource({ uri: wrapped(wayOut) }));
      expect(err.code, wayOut).toBe(RESOURCE_NOT_FOUND);
    }
    expect((await reads()).map((r) => [r.action, r.subject])).toEqual(
      waysOut.reverse().map((uri) => ["resource.refused", `files ${uri}`]),
    );
  }, 30_000);

  it("a URI that is not a string is refused as not found by Gatehouse, and audited", async () => {
    const client = await connect();
    const err = await refusal(
      client.request({ method: "resources/read", params: { uri: 5 } }, ReadResourceResultSchema),
    );
    expect(err.code).toBe(RESOURCE_NOT_FOUND);
    expect((await reads())[0]).toMatchObject({ action: "resource.refused", subject: "5" });
  }, 30_000);

  it("an audit subject is one line without hidden characters, cut to a sane length", async () => {
    const client = await connect();
    const uri = `file:///x\u202E\u{E0041}\u2028forged line ${"y".repeat(5000)}`;
    expect((await refusal(client.readResource({ uri: wrapped(uri) }))).code).toBe(RESOURCE_NOT_FOUND);
    const [row] = await reads();
    expect(row?.subject.startsWith("files file:///x forged line yyy")).toBe(true);
    expect(row?.subject).not.toMatch(/[\n\r\u2028\u2029]/);
    expect(row?.subject.length).toBeLessThanOrEqual(512);
  }, 30_000);

  it("a resource over the read bound comes back cut, marked and audited as cut", async () => {
    const big = path.join(files.root, "big.txt");
    // Multi-byte characters, so the cut has to land between characters.
    writeFileSync(big, "é".repeat(RESOURCE_READ_MAX_BYTES));
    try {
      const client = await connect();
      await client.listResources();
      const read = await client.readResource({ uri: wrapped(fileUri("big.txt")) });
      const [content] = read.contents;
      const text = content && "text" in content ? content.text : "";
      expect(Buffer.byteLength(text, "utf8")).toBeLessThanOrEqual(RESOURCE_READ_MAX_BYTES);
      expect(text.length).toBeGreaterThan(RESOURCE_READ_MAX_BYTES / 4);
      expect(text).toBe("é".repeat(text.length));
      expect(read._meta?.[TRUNCATED_META_KEY]).toBe(true);
      expect(content?._meta?.[TRUNCATED_META_KEY]).toBe(true);
      expect((await reads())[0]?.detail).toMatch(/cut to 1048576/);
    } finally {
      rmSync(big);
    }
  }, 30_000);

  it("a read that cannot be recorded is not answered", async () => {
    const client = await connect();
    await client.listResources();
    // The store refuses the audit row, as a full disk would.
    await files.rt.runtime.db.run(
      sql.raw(
        "CREATE TEMP TRIGGER no_reads BEFORE INSERT ON audit_events WHEN NEW.action LIKE 'resource.%' BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
      ),
    );
    const err = await refusal(client.readResource({ uri: wrapped(fileUri("notes.md")) }));
    expect(err.code).toBe(ErrorCode.InternalError);
    expect(err.message).toMatch(/could not record this read/);
    expect(err.message).not.toMatch(/disk/);
    expect(JSON.stringify(err.data ?? null)).not.toContain("Notes");
  }, 30_000);

  it("a read before any list lists the server first; a file listed later is read after one re-list", async () => {
    const listed = new ListedResources(0);
    const ctx = { agent: "bot", listed };
    const first = await readResource(deps(), ctx, wrapped(fileUri("notes.md")));
    expect(first.contents).toHaveLength(1);
    const later = path.join(files.root, "later.md");
    writeFileSync(later, "new\n");
    try {
      const before = await listsServed();
      const read = await readResource(deps(), ctx, wrapped(fileUri("later.md")));
      expect(read.contents).toMatchObject([{ text: "new\n" }]);
      expect(await listsServed()).toBe(before + 1);
    } finally {
      rmSync(later);
    }
  }, 30_000);

  it("probing unlisted URIs costs the server at most one list per interval, however many probes", async () => {
    const listed = new ListedResources(60_000);
    const ctx = { agent: "bot", listed };
    const before = await listsServed();
    const probes = Array.from({ length: 20 }, (_, i) =>
      refusal(readResource(deps(), ctx, wrapped(fileUri(`guess-${i}.md`)))),
    );
    for (const err of await Promise.all(probes)) expect(err.code).toBe(RESOURCE_NOT_FOUND);
    await refusal(readResource(deps(), ctx, wrapped("file:///etc/shadow")));
    expect(await listsServed()).toBe(before + 1);
  }, 30_000);
});
