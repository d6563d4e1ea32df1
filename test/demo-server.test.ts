/**
 * The bundled demo server (demo/server.mjs, what `npm start` configures) serves both protocol
 * eras over stdio: a real SDK v1 client speaks 2025 to it, a real SDK v2 client pinned to
 * 2026-07-28 speaks the new revision, and both see the same tools and the same notebook.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Client as V1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as V1StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterEach, describe, expect, it } from "vitest";
import { DEMO_SERVER } from "./support/runtime";

const dirs: string[] = [];
const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stateFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-demo-"));
  dirs.push(dir);
  return path.join(dir, "state.json");
}

async function v1Client(state: string): Promise<V1Client> {
  const client = new V1Client({ name: "v1-agent", version: "1.0.0" });
  await client.connect(
    new V1StdioClientTransport({
      command: process.execPath,
      args: [DEMO_SERVER],
      env: { PATH: process.env.PATH ?? "", DEMO_STATE_FILE: state },
    }),
  );
  closers.push(() => client.close());
  return client;
}

async function modernClient(state: string): Promise<Client> {
  const client = new Client(
    { name: "v2-agent", version: "1.0.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [DEMO_SERVER],
      env: { PATH: process.env.PATH ?? "", DEMO_STATE_FILE: state },
    }),
  );
  closers.push(() => client.close());
  return client;
}

const text = (result: { content?: unknown }) =>
  (result.content as { type: string; text?: string }[]).map((c) => c.text ?? "").join("\n");

describe("the demo server", () => {
  it("serves a 2025 client and a 2026-07-28 client the same tools, annotations and notebook", async () => {
    const state = stateFile();
    const old = await v1Client(state);
    const modern = await modernClient(state);
    expect(old.getServerVersion()?.name).toBe("gatehouse-demo");
    expect(modern.getProtocolEra()).toBe("modern");
    expect(modern.getNegotiatedProtocolVersion()).toBe("2026-07-28");

    const shape = (tools: { name: string; annotations?: unknown; inputSchema: unknown }[]) =>
      tools.map(({ name, annotations, inputSchema }) => ({ name, annotations, inputSchema }));
    const listedOld = shape((await old.listTools()).tools);
    expect(listedOld.map((t) => [t.name, t.annotations])).toEqual([
      ["list_notes", { readOnlyHint: true }],
      ["add_note", undefined],
    ]);
    expect(shape((await modern.listTools()).tools)).toEqual(listedOld);

    // Written over one era, read over the other: one notebook, in the state file.
    const added = await old.callTool({ name: "add_note", arguments: { text: "buy milk" } });
    expect(text(added as { content?: unknown })).toBe("Added note 1: buy milk");
    const listed = await modern.callTool({ name: "list_notes", arguments: {} });
    expect(text(listed)).toBe("1. buy milk");
    expect(listed.structuredContent).toEqual({ notes: ["buy milk"] });
    expect(JSON.parse(readFileSync(state, "utf8"))).toEqual({ notes: ["buy milk"], addNoteRuns: 1 });

    const refused = await modern.callTool({ name: "add_note", arguments: { text: "" } });
    expect(refused.isError).toBe(true);
    expect(JSON.parse(readFileSync(state, "utf8")).addNoteRuns).toBe(1);
  });
});
