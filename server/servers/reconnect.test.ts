/**
 * The owner's Reconnect through the real route: the server is dialled again, the owner's name
 * is on an audit row, and the answer is the server's view.
 */
import { and, eq } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ServerView } from "@/lib/api-types";
import { auditEvents } from "@/server/store/schema";
import {
  createTestUser,
  request,
  sessionCookieFor,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { serverViews } from "./status";

let rt: TestRuntime;
let cookie: string;

beforeEach(async () => {
  rt = await startTestRuntime();
  const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
  cookie = await sessionCookieFor(rt.runtime, owner.user.id);
}, 30_000);

afterEach(() => rt.stop());

describe("reconnecting a server", () => {
  it("dials again, writes the owner's audit row and answers with the server's view", async () => {
    const demo = async () =>
      (await serverViews(rt.runtime.manager, rt.runtime.db)).find((s) => s.name === "demo");
    const dials = async () => (await demo())?.history.filter((h) => h.state === "connecting").length ?? 0;
    const before = await dials();
    const res = await request("POST", "/api/servers/demo/reconnect", { cookie });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { server: ServerView };
    expect(body.server.name).toBe("demo");
    const redialled = async () => (await dials()) > before && (await demo())?.state === "ready";
    await waitForEvent(rt.runtime.bus, async (e) => e.type === "server" && (await redialled()), {
      already: redialled,
      what: () => "the demo server to be dialled again and ready",
    });
    const rows = await rt.runtime.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "server.reconnect"), eq(auditEvents.subject, "demo")));
    expect(rows).toEqual([expect.objectContaining({ actor: "olga", callId: null, detail: null })]);
  });

  it("the server's view says which protocol revision its connection speaks", async () => {
    const res = await request("GET", "/api/servers", { cookie });
    const { servers } = (await res.json()) as { servers: ServerView[] };
    // The bundled demo server serves both eras (SDK v2): the probe is answered, so no fallback.
    expect(servers.find((s) => s.name === "demo")).toMatchObject({
      state: "ready",
      protocolVersion: "2026-07-28",
    });
  });

  it("an unknown server answers 404 and writes nothing", async () => {
    const res = await request("POST", "/api/servers/nowhere/reconnect", { cookie });
    expect(res.status).toBe(404);
    const rows = await rt.runtime.db
      .select()
      .from(auditEvents)
      .where(eq(auditEvents.action, "server.reconnect"));
    expect(rows).toEqual([]);
  });
});
