/**
 * A resource link an agent got in a tool result from one replica is readable through another
 * (PRODUCT.md §14): the links are shared through the store (`linked_uris`) on PostgreSQL. Two
 * endpoints on one store stand for two replicas, with @modelcontextprotocol/server-everything
 * over stdio and the SDK client. On SQLite one process serves the store and keeps its own links.
 */
import path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { createAgentToken, enableTool, REPO_ROOT, waitForServersReady } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { listAuditByActions } from "../store/audit";
import { linkedUris } from "../store/schema";
import { endpointFixtures } from "./endpoint-fixtures";
import { unwrapUri } from "./links";

const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const LINKS = "everything_get-resource-links";

const { start, endpoint, connect } = endpointFixtures();

describe.runIf(testDialect === "postgres")("resource links across replicas", () => {
  it("a URI linked in a tool result on one replica is read on another as linked, not by chance of a template", async () => {
    const t = await start({
      servers: { everything: { command: "node", args: [EVERYTHING, "stdio"], enabled: true } },
    });
    await waitForServersReady(t.runtime, ["everything"]);
    await enableTool(t.runtime, LINKS);
    const token = await createAgentToken(t.runtime, "bot");
    const a = endpoint(t, {});
    const b = endpoint(t, {});
    const onA = (await connect({ token, handler: (req) => a.handle(req) })).client;
    const onB = (await connect({ token, handler: (req) => b.handle(req) })).client;

    const res = (await onA.callTool({ name: LINKS, arguments: { count: 2 } })) as CallToolResult;
    const link = res.content.find((c) => c.type === "resource_link");
    if (link?.type !== "resource_link") throw new Error("no resource link in the result");
    // In the store by the time the agent has the result: hashed keys, never the URI itself.
    const rows = await t.runtime.db.select().from(linkedUris);
    expect(rows.length).toBe(2);
    expect(JSON.stringify(rows)).not.toContain(unwrapUri(link.uri)?.uri ?? "?");

    const read = await onB.readResource({ uri: link.uri });
    expect(read.contents[0]?.uri).toBe(link.uri);
    const [audit] = await listAuditByActions(t.runtime.db, { actions: ["resource.read"], limit: 1 });
    expect(audit?.detail).toMatch(/^linked by a tool result; /);
  }, 60_000);
});
