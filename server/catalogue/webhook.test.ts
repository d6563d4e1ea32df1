/**
 * The catalogue webhook against real loopback HTTP receivers: what it posts, that it goes through
 * the outbound guard, that a slow or failing receiver never holds up a refresh, and that its logs
 * never carry the URL's path or query (where webhook secrets live). The last test wires it
 * through a real runtime with the demo MCP server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { DEMO_SERVER, REPO_ROOT, waitForEvent } from "@/test/support/runtime";
import { validateConfig } from "../config";
import type { Logger } from "../log";
import { createRuntime, type Runtime } from "../runtime";
import { serverViews } from "../servers/status";
import { type Db, openDb } from "../store/db";
import { syncServerTools } from "./catalogue";
import { type CatalogueWebhook, type CatalogueWebhookPayload, createCatalogueWebhook } from "./webhook";

const SECRET_PATH = "/hooks/T0-s3cr3t-path";
const SECRET_QUERY = "token=q-s3cr3t";

interface Received {
  method: string;
  url: string;
  contentType: string | undefined;
  body: string;
}

interface Receiver {
  url: string;
  received: Received[];
  /** Resolves with the next request (or one that already came and was not taken yet). */
  next(): Promise<Received>;
  close(): Promise<void>;
}

/**
 * A real HTTP server on 127.0.0.1: `answer` decides the response; "hang" never answers.
 */
async function receiver(answer: number | "hang" = 204): Promise<Receiver> {
  const received: Received[] = [];
  const waiting: ((r: Received) => void)[] = [];
  let taken = 0;
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      const r = {
        method: req.method ?? "",
        url: req.url ?? "",
        contentType: req.headers["content-type"],
        body,
      };
      received.push(r);
      const w = waiting.shift();
      if (w) {
        taken++;
        w(r);
      }
      if (answer === "hang") return;
      res.statusCode = answer;
      res.end(answer >= 400 ? "no thanks" : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${SECRET_PATH}?${SECRET_QUERY}`,
    received,
    next() {
      const ready = received[taken];
      if (ready) {
        taken++;
        return Promise.resolve(ready);
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

function recordingLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push(`${level} ${message} ${fields ? JSON.stringify(fields) : ""}`);
  };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

function serverConfig(name: string) {
  const server = validateConfig(
    { mcpServers: { [name]: { command: "node", enabled: true } } },
    { env: {}, baseDir: "/" },
  ).config?.servers[0];
  if (!server) throw new Error("bad config");
  return server;
}

const tool = (name: string, description = `the ${name} tool`): Tool =>
  ({ name, description, inputSchema: { type: "object" } }) as Tool;

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function open(url: string, opts: { allowPrivate: boolean; timeoutMs?: number }) {
  const log = recordingLog();
  const webhook = createCatalogueWebhook({ url, log, ...opts });
  cleanup.push(() => webhook.close());
  return { webhook, log };
}

function memoryDb(): Db {
  const db = openDb(":memory:");
  cleanup.push(() => {
    db.$client.close();
  });
  return db;
}

/** One refresh through syncServerTools, its changes handed to the webhook as the runtime does. */
function refresh(db: Db, webhook: CatalogueWebhook, listing: Tool[]) {
  const summary = syncServerTools(db, serverConfig("srv"), listing, { descriptionMaxChars: 1024 });
  webhook.send("srv", summary.changes);
  return summary;
}

describe("catalogue webhook", () => {
  it("a refresh with changes is POSTed once as JSON; a refresh that changes nothing posts nothing", async () => {
    const rx = await receiver();
    cleanup.push(() => rx.close());
    const { webhook } = open(rx.url, { allowPrivate: true });
    const db = memoryDb();

    refresh(db, webhook, [tool("b"), tool("a")]);
    const got = await rx.next();
    expect(got.method).toBe("POST");
    expect(got.url).toBe(`${SECRET_PATH}?${SECRET_QUERY}`);
    expect(got.contentType).toBe("application/json");
    const payload = JSON.parse(got.body) as CatalogueWebhookPayload;
    expect(payload).toMatchObject({ source: "gatehouse", event: "catalogue.changes", server: "srv" });
    expect(payload.changes.map((c) => `${c.kind} ${c.localName}`)).toEqual(["added srv_b", "added srv_a"]);
    expect(payload.changes.every((c) => c.at === payload.at && typeof c.id === "number")).toBe(true);

    refresh(db, webhook, [tool("b"), tool("a")]);
    refresh(db, webhook, [tool("b"), tool("a", "now it deletes")]);
    const changed = JSON.parse((await rx.next()).body) as CatalogueWebhookPayload;
    expect(changed.changes.map((c) => [c.kind, c.tool, c.detail?.summary])).toEqual([
      ["changed", "a", ["description"]],
    ]);
    await webhook.idle();
    expect(rx.received).toHaveLength(2);
  });

  it("a loopback webhook without webhookAllowPrivate is refused at dial time and logged without its secret", async () => {
    const rx = await receiver();
    cleanup.push(() => rx.close());
    const { webhook, log } = open(rx.url, { allowPrivate: false });
    refresh(memoryDb(), webhook, [tool("a")]);
    await webhook.idle();
    expect(rx.received).toEqual([]);
    const line = log.lines.find((l) => l.startsWith("warn catalogue webhook failed"));
    expect(line).toMatch(
      /refused: 127\.0\.0\.1, a loopback address; set catalogue\.webhookAllowPrivate to allow/,
    );
    expect(line).toContain(new URL(rx.url).origin);
    expect(log.lines.join("\n")).not.toMatch(/s3cr3t/);
  });

  it("a webhook that never answers does not hold up the refresh, and its post times out (logged)", async () => {
    const rx = await receiver("hang");
    cleanup.push(() => rx.close());
    const { webhook, log } = open(rx.url, { allowPrivate: true, timeoutMs: 300 });
    const t0 = performance.now();
    const summary = refresh(memoryDb(), webhook, [tool("a")]);
    const refreshMs = performance.now() - t0;
    expect(summary.added).toEqual(["srv_a"]);
    expect(refreshMs).toBeLessThan(250);
    await rx.next();
    await webhook.idle();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    expect(log.lines.filter((l) => l.startsWith("warn"))).toEqual([
      expect.stringMatching(
        /^warn catalogue webhook failed: timed out \{"target":"http:\/\/127\.0\.0\.1:\d+"/,
      ),
    ]);
    expect(log.lines.join("\n")).not.toMatch(/s3cr3t/);
  });

  it("a receiver that answers with an error status is logged with the status, not the URL", async () => {
    const rx = await receiver(500);
    cleanup.push(() => rx.close());
    const { webhook, log } = open(rx.url, { allowPrivate: true });
    refresh(memoryDb(), webhook, [tool("a")]);
    await rx.next();
    await webhook.idle();
    expect(log.lines.filter((l) => l.startsWith("warn"))).toEqual([
      expect.stringMatching(/^warn catalogue webhook answered 500 /),
    ]);
    expect(log.lines.join("\n")).not.toMatch(/s3cr3t/);
  });

  it("a receiver that is down is logged as refused, and the refresh is stored all the same", async () => {
    const rx = await receiver();
    const url = rx.url;
    await rx.close();
    const { webhook, log } = open(url, { allowPrivate: true });
    const summary = refresh(memoryDb(), webhook, [tool("a")]);
    expect(summary.added).toEqual(["srv_a"]);
    await webhook.idle();
    expect(log.lines.some((l) => /^warn catalogue webhook failed: .*ECONNREFUSED/.test(l))).toBe(true);
  });

  it("the runtime posts a server's catalogue changes to the configured webhook", async () => {
    const rx = await receiver();
    cleanup.push(() => rx.close());
    const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-webhook-test-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const result = validateConfig(
      {
        mcpServers: {
          demo: {
            command: process.execPath,
            args: [DEMO_SERVER],
            env: { DEMO_STATE_FILE: path.join(dir, "demo-state.json") },
            enabled: true,
          },
        },
        catalogue: { webhook: rx.url, webhookAllowPrivate: true },
      },
      { env: {}, baseDir: REPO_ROOT },
    );
    if (!result.config) throw new Error(JSON.stringify(result.errors));
    const runtime: Runtime = createRuntime({ config: result.config, dbFile: path.join(dir, "gatehouse.db") });
    cleanup.push(() => runtime.stop());
    const got = await rx.next();
    const payload = JSON.parse(got.body) as CatalogueWebhookPayload;
    expect(payload.server).toBe("demo");
    expect(payload.changes.map((c) => `${c.kind} ${c.localName}`).sort()).toEqual([
      "added demo_add_note",
      "added demo_list_notes",
    ]);
    // The catalogue was stored in the same refresh that was posted.
    await waitForEvent(runtime.bus, (e) => e.type === "catalogue", {
      already: () => serverViews(runtime.manager, runtime.db)[0]?.tools.proposed === 2,
    });
  }, 30_000);
});
