/**
 * A person's session is judged again once a request's body has arrived: a body can take minutes
 * to send, and whatever ended that session meanwhile (removal, a reset, signing out everywhere,
 * a role taken) must hold for that request too.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  bodyOf,
  createTestUser,
  loadRoute,
  ORIGIN,
  type RouteHandler,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import { endUserSessions, removeUser, updatePerson } from "../auth/user-admin";
import { agentTokens } from "../store/schema";

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

/** Starts `POST /api/tokens` as `cookie` with a body that arrives only when `send()` is called. */
async function stalledTokenRequest(cookie: string, name: string) {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => (controller = c) });
  const req = new Request(`${ORIGIN}/api/tokens`, {
    method: "POST",
    headers: { host: new URL(ORIGIN).host, origin: ORIGIN, cookie, "content-type": "application/json" },
    body,
    duplex: "half",
  } as RequestInit);
  const post = (await loadRoute("tokens/route.ts")).POST as RouteHandler;
  const answer = post(req, { params: Promise.resolve({}) });
  return {
    answer,
    send() {
      controller.enqueue(new TextEncoder().encode(JSON.stringify({ name })));
      controller.close();
    },
  };
}

const tokenNames = async (t: TestRuntime) =>
  (await t.runtime.db.select({ name: agentTokens.name }).from(agentTokens)).map((r) => r.name);

describe("a request whose body is still arriving", () => {
  for (const [what, act, status] of [
    [
      "removed",
      (t: TestRuntime) =>
        removeUser(t.runtime.db, { name: "mallory", actor: "olga", withdrawPending: async () => 0 }),
      401,
    ],
    [
      "signed out everywhere",
      (t: TestRuntime) => endUserSessions(t.runtime.db, { name: "mallory", actor: "olga" }),
      401,
    ],
    [
      "whose password was reset",
      (t: TestRuntime) =>
        updatePerson(t.runtime.db, null, { name: "mallory", password: "a reset passphrase", actor: "olga" }),
      401,
    ],
    [
      "who lost the owner role",
      (t: TestRuntime) =>
        updatePerson(t.runtime.db, null, { name: "mallory", roles: ["reviewer"], actor: "olga" }),
      403,
    ],
  ] as const) {
    it(`from a person ${what} meanwhile changes nothing (${status})`, async () => {
      rt = await startTestRuntime();
      await createTestUser(rt.runtime, "olga", ["owner"]);
      const mallory = await createTestUser(rt.runtime, "mallory", ["owner"]);
      const pending = await stalledTokenRequest(mallory.cookie, "late-bot");
      await act(rt);
      pending.send();
      const res = await pending.answer;
      expect(res.status, JSON.stringify(await bodyOf(res.clone()))).toBe(status);
      expect(await tokenNames(rt)).not.toContain("late-bot");
    });
  }

  it("from a person whose session still holds goes through", async () => {
    rt = await startTestRuntime();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const pending = await stalledTokenRequest(olga.cookie, "on-time-bot");
    pending.send();
    expect((await pending.answer).status).toBeLessThan(300);
    expect(await tokenNames(rt)).toContain("on-time-bot");
  });
});
