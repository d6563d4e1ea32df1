/**
 * The owner's look into a server: resources (list and read of text) and prompts, through the
 * real routes against @modelcontextprotocol/server-everything.
 */
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { PromptView, ResourceContentView, ResourceView } from "@/lib/api-types";
import {
  createTestUser,
  REPO_ROOT,
  request,
  sessionCookieFor,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { serverViews } from "./status";

const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

let rt: TestRuntime;
let cookie: string;

beforeEach(async () => {
  rt = await startTestRuntime({
    servers: { everything: { command: "node", args: [EVERYTHING, "stdio"], enabled: true } },
  });
  const ready = async () =>
    (await serverViews(rt.runtime.manager, rt.runtime.db)).find((s) => s.name === "everything")?.state ===
    "ready";
  await waitForEvent(rt.runtime.bus, async (e) => e.type === "server" && (await ready()), {
    already: ready,
    timeoutMs: 20_000,
    what: () => "server-everything to be ready",
  });
  const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
  cookie = await sessionCookieFor(rt.runtime, owner.user.id);
}, 30_000);

afterEach(() => rt.stop());

describe("inspecting a server", () => {
  it("lists a server's resources and reads the text of one", async () => {
    const res = await request("GET", "/api/servers/everything/resources", { cookie });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { supported: boolean; resources: ResourceView[] };
    expect(body.supported).toBe(true);
    expect(body.resources.length).toBeGreaterThan(0);
    const text = body.resources.find((r) => r.mimeType?.startsWith("text/")) ?? body.resources[0];
    expect(text).toBeDefined();
    const read = await request(
      "GET",
      `/api/servers/everything/resources/read?uri=${encodeURIComponent(text?.uri ?? "")}`,
      { cookie },
    );
    expect(read.status).toBe(200);
    const content = (await read.json()) as ResourceContentView;
    expect(content.contents.length).toBeGreaterThan(0);
    expect(content.contents.some((c) => (c.text ?? "").length > 0 || (c.binaryBytes ?? 0) > 0)).toBe(true);
  }, 30_000);

  it("lists a server's prompts with their arguments", async () => {
    const res = await request("GET", "/api/servers/everything/prompts", { cookie });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { supported: boolean; prompts: PromptView[] };
    expect(body.supported).toBe(true);
    expect(body.prompts.length).toBeGreaterThan(0);
    expect(body.prompts.some((p) => p.arguments.length > 0)).toBe(true);
  }, 30_000);

  it("a server that offers no resources says so instead of failing", async () => {
    const res = await request("GET", "/api/servers/demo/resources", { cookie });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { supported: boolean }).supported).toBe(false);
  });

  it("a server that is not ready answers 502 server_unavailable, at once", async () => {
    await rt.runtime.manager.get("everything").stop();
    const started = performance.now();
    const res = await request("GET", "/api/servers/everything/prompts", { cookie });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("server_unavailable");
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
