/**
 * Pending-call email under a flood, against a real SMTP server (`smtp-server`): past five waiting
 * calls of one requester, each reviewer gets one digest instead of a mail per call, the next one
 * not before the digest interval, and another requester's mail is not held behind the backlog.
 */

import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { registerCleanup, startDemoRuntime } from "@/test/support/notify";
import { ADD_NOTE, createTestUser } from "@/test/support/runtime";
import type { Runtime } from "../runtime";
import { users } from "../store/schema";
import { DIGEST_AFTER, DIGEST_EVERY_MS } from "./digests";
import { deliveryRows, demoConfig, mailReceiver, PUBLIC_URL, untilRow } from "./notify-fixtures";

const cleanup = registerCleanup();

const flood = { kind: "agent", name: "flood-bot" } as const;
const other = { kind: "agent", name: "docs-bot" } as const;
const REVIEWERS = ["rex", "rita"];

/** An SMTP server that takes no message until `release()`, and a runtime mailing two reviewers through it. */
async function start() {
  let release = () => {};
  const hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  const rx = await mailReceiver({ hold });
  cleanup.push(() => rx.close());
  cleanup.push(release);
  const demo = demoConfig(
    {
      email: {
        smtp: `smtp://127.0.0.1:${rx.port}`,
        from: "gatehouse@example.test",
        events: ["call.pending"],
        allowPrivate: true,
      },
    },
    {},
    // The flood's 50 waiting calls are the premise: the default maxPendingCalls (20) is off.
    { agentLimits: { maxPendingCalls: 0 } },
  );
  cleanup.push(() => demo.remove());
  const runtime = await startDemoRuntime(demo, cleanup);
  for (const name of REVIEWERS) {
    await createTestUser(runtime, name, ["reviewer"]);
    await runtime.db
      .update(users)
      .set({ email: `${name}@example.test` })
      .where(eq(users.name, name));
  }
  return { rx, runtime, release };
}

async function callsOf(runtime: Runtime, requester: typeof flood | typeof other, n: number) {
  for (let i = 0; i < n; i++) {
    await runtime.broker.request(requester, {
      tool: ADD_NOTE,
      arguments: { text: `${requester.name}-${i}` },
    });
  }
}

const subjectOf = (text: string) => /^Subject: (.*)$/m.exec(text)?.[1] ?? "";

describe("pending-call email under a flood", () => {
  it("50 waiting calls of one requester give each reviewer five mails and one digest; another requester's mail is not held behind them", async () => {
    const { rx, runtime, release } = await start();
    await callsOf(runtime, flood, 50);

    const queued = (await deliveryRows(runtime.db)).filter((r) => r.channel === "email");
    const digests = queued.filter((r) => r.callId === null);
    expect(digests.map((r) => r.target).sort()).toEqual(REVIEWERS);
    expect(queued.length).toBe(REVIEWERS.length * (DIGEST_AFTER + 1));

    // The first two tries are in flight, held by the SMTP server; the rest of the backlog waits.
    await callsOf(runtime, other, 1);
    release();

    const total = REVIEWERS.length * (DIGEST_AFTER + 2);
    await rx.waitFor(() => rx.mails.length >= total, `${total} mails`);
    const subjects = rx.mails.map((m) => subjectOf(m.text));
    // Sent in turns by requester: docs-bot's two mails come right after the two in flight and a
    // turn of flood-bot's, not after its twelve.
    const docs = subjects.flatMap((s, i) => (s === `Approval needed: ${ADD_NOTE} by docs-bot` ? [i] : []));
    expect(docs).toHaveLength(REVIEWERS.length);
    expect(Math.max(...docs)).toBeLessThan(6);

    for (const name of REVIEWERS) {
      const theirs = rx.mails.filter((m) => m.to.includes(`${name}@example.test`)).map((m) => m.text);
      const single = theirs.filter((t) => subjectOf(t) === `Approval needed: ${ADD_NOTE} by flood-bot`);
      expect(single).toHaveLength(DIGEST_AFTER);
      const digest = theirs.filter((t) => subjectOf(t).includes("calls from flood-bot"));
      expect(digest).toHaveLength(1);
      // Counted when sent: every one of the 50 was waiting by then.
      expect(subjectOf(digest[0] ?? "")).toBe("50 calls from flood-bot wait for review");
      expect(digest[0]).toContain(`${PUBLIC_URL}/approvals`);
      expect(digest[0]).not.toContain("flood-bot-1");
    }
    expect(rx.mails).toHaveLength(total);
  });

  it("after a digest is delivered, the next one about the same requester waits out the interval, and one covers every call meanwhile", async () => {
    const { rx, runtime, release } = await start();
    release();
    await callsOf(runtime, flood, DIGEST_AFTER + 1);
    const total = REVIEWERS.length * (DIGEST_AFTER + 1);
    await rx.waitFor(() => rx.mails.length >= total, `${total} mails`);
    // The mail reached the server before its try was recorded: wait for the digests' rows to say so.
    for (const name of REVIEWERS) {
      await untilRow(
        runtime.notifier,
        runtime.db,
        (r) => r.callId === null && r.target === name && r.status === "delivered",
        `${name}'s digest recorded as delivered`,
      );
    }

    const log = (await runtime.notifier.view()).channels.find((c) => c.channel === "email")?.deliveries ?? [];
    expect(
      log
        .filter((d) => d.digestOf === "flood-bot")
        .map((d) => d.recipient)
        .sort(),
    ).toEqual(REVIEWERS);
    expect(log.filter((d) => d.digestOf === null)).toHaveLength(REVIEWERS.length * DIGEST_AFTER);

    const before = Date.now();
    await callsOf(runtime, flood, 3);
    const next = (await deliveryRows(runtime.db)).filter((r) => r.callId === null && r.status === "queued");
    expect(next.map((r) => r.target).sort()).toEqual(REVIEWERS);
    for (const row of next) {
      expect(Date.parse(row.nextAttemptAt)).toBeGreaterThanOrEqual(before + DIGEST_EVERY_MS - 1_000);
    }
    expect(rx.mails).toHaveLength(total);
  });

  it("a digest whose calls were all decided before it went is not sent", async () => {
    const { rx, runtime, release } = await start();
    const made: string[] = [];
    for (let i = 0; i <= DIGEST_AFTER; i++) {
      const { call } = await runtime.broker.request(flood, { tool: ADD_NOTE, arguments: { text: `n-${i}` } });
      made.push(call.id);
    }
    for (const id of made) await runtime.broker.withdraw(flood, id);
    release();
    for (const name of REVIEWERS) {
      const row = await untilRow(
        runtime.notifier,
        runtime.db,
        (r) => r.callId === null && r.target === name && r.status !== "queued",
        `${name}'s digest settled`,
      );
      expect(row.status).toBe("failed");
      expect(row.lastError).toBe("superseded: no call of its requester waits any more");
    }
    expect(rx.mails.filter((m) => m.text.includes("calls from flood-bot"))).toEqual([]);
  });
});
