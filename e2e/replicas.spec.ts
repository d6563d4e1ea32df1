import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type APIRequestContext, test as base, expect, type Page } from "@playwright/test";
import { snap } from "./support/fixtures";
import {
  agentAt,
  type Cluster,
  crew,
  enableTools,
  holderOf,
  LEASE_SECONDS,
  serverAt,
  signedIn,
  startCluster,
  until,
} from "./support/replicas";

/**
 * PRODUCT.md §14: three replicas of the production build (`npm start`) on one PostgreSQL behind a
 * round-robin proxy that sends every request to the next replica. The tests run in this order on
 * one cluster (the worker's): the journey needs `demo_add_note` still proposed; the two that kill
 * a replica come last, and every test starts with all three running again. Each test enables the
 * tools it needs itself: after a failure Playwright starts a new worker, and with it a new cluster.
 */
const test = base.extend<{ allUp: undefined }, { cluster: Cluster }>({
  cluster: [
    // biome-ignore lint/correctness/noEmptyPattern: Playwright fixtures must destructure their first argument.
    async ({}, use) => {
      const cluster = await startCluster();
      try {
        await use(cluster);
      } finally {
        await cluster.stop();
      }
    },
    { scope: "worker", timeout: 300_000 },
  ],
  baseURL: async ({ cluster }, use) => use(cluster.proxy.origin),
  allUp: [
    async ({ cluster }, use) => {
      await cluster.ensureRunning();
      await use(undefined);
    },
    { auto: true },
  ],
});

interface Call {
  id: string;
  status: string;
  decidedBy?: string | null;
  grantId?: string | null;
  result?: unknown;
  error?: { code: string; message: string } | null;
}

const APPROVE_PATH = /^\/api\/calls\/[^/]+\/approve$/;

async function signIn(page: Page, who: { name: string; password: string }): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}

/** Asks for `tool` as the agent; the answer's status and body. */
async function ask(agent: APIRequestContext, tool: string, args: Record<string, unknown> = {}) {
  const res = await agent.post("/api/calls", { data: { tool, arguments: args } });
  return { status: res.status(), body: (await res.json()) as Call };
}

/** A pending call of `demo_add_note`, asked for through the proxy. */
async function pendingNote(agent: APIRequestContext, text: string): Promise<string> {
  const { status, body } = await ask(agent, "demo_add_note", { text });
  expect(status, JSON.stringify(body)).toBe(202);
  expect(body.status).toBe("pending");
  return body.id;
}

test("the journey across replicas: sessions, the agent's call, a reviewer elsewhere and the long-poll", async ({
  page,
  browser,
  playwright,
  cluster,
}) => {
  test.setTimeout(180_000);
  const { proxy } = cluster;
  const from = proxy.hits.length;
  await signIn(page, crew.owner);
  await page.goto("/tools");
  const writeRow = page.getByRole("row").filter({ hasText: "demo_add_note" });
  await expect(writeRow).toContainText("proposed");
  await expect(writeRow).toContainText(/destructive/i);
  await writeRow.getByRole("button", { name: "Enable" }).click();
  await expect(writeRow.getByRole("button", { name: "Disable" })).toBeVisible();
  await expect(writeRow).toContainText("enabled");
  // The browser's session, made on one replica, is known to every replica: it is in the store.
  const answeredBy = () =>
    new Set(
      proxy.hits
        .slice(from)
        .filter((h) => h.path.startsWith("/api/") && !h.path.startsWith("/api/session") && h.status === 200)
        .map((h) => h.target),
    );
  for (let i = 0; i < 9 && answeredBy().size < 3; i++) {
    const me = await page.request.get("/api/me");
    expect(me.status()).toBe(200);
    expect(((await me.json()) as { user: { name: string } }).user.name).toBe(crew.owner.name);
  }
  expect(answeredBy()).toEqual(new Set([0, 1, 2]));

  const agent = await agentAt(playwright, proxy.origin, cluster.agentSecret);
  const id = await pendingNote(agent, "ship it across replicas");
  expect(cluster.demoRuns()).toBe(0);

  const reviewerContext = await browser.newContext({ baseURL: proxy.origin });
  const reviewer = await reviewerContext.newPage();
  await signIn(reviewer, crew.reviewer);
  await expect(reviewer).toHaveURL(/\/approvals$/);
  const card = reviewer.getByTestId(`call-${id}`);
  await expect(card).toContainText("demo_add_note");
  await expect(card).toContainText(crew.agent);

  // The agent waits on one replica; the approval goes to another, so only the store and
  // LISTEN/NOTIFY can carry the decision to the waiting request.
  const waitPath = new RegExp(`^/api/calls/${id}\\?wait=30$`);
  const waited = agent.get(`/api/calls/${id}?wait=30`);
  const waitingOn = await until("the long-poll reaches a replica", 10_000, async () => {
    const target = proxy.targetsOf(waitPath)[0];
    return target === undefined || target < 0 ? null : target;
  });
  proxy.pin(APPROVE_PATH, (waitingOn + 1) % 3);
  try {
    await card.getByRole("button", { name: "Approve" }).click();
    const outcome = await waited;
    expect(outcome.status()).toBe(200);
    const done = (await outcome.json()) as Call;
    expect(done.status).toBe("succeeded");
    expect(done.decidedBy).toBe(crew.reviewer.name);
    expect(JSON.stringify(done.result)).toContain("ship it across replicas");
  } finally {
    proxy.unpin();
  }
  expect(proxy.targetsOf(APPROVE_PATH, "POST")).toEqual([(waitingOn + 1) % 3]);
  expect(cluster.demoRuns()).toBe(1);
  // The reviewer's live events (on whichever replica holds their stream) saw the call end.
  await expect(card).toBeHidden();
  await reviewerContext.close();
  await agent.dispose();

  // Every stdio server's card says which replica runs it.
  await page.goto("/servers");
  for (const server of ["demo", "slow"]) {
    const where = page.getByTestId(`server-${server}`).getByTestId("server-replica");
    await expect(where).toContainText(/replica .+ pid \d+/);
  }
  await expect(page.getByTestId("server-demo")).toContainText("ready");
  await snap(page, "replicas-servers");
});

test("50 approvals of one call at once, spread over three replicas, run it exactly once", async ({
  playwright,
  cluster,
}) => {
  test.setTimeout(120_000);
  const { replicas, proxy } = cluster;
  const owner = await signedIn(playwright, proxy.origin, crew.owner);
  await enableTools(owner, ["demo_add_note"]);
  const reviewers = await Promise.all(replicas.map((r) => signedIn(playwright, r.origin, crew.reviewer)));
  const agent = await agentAt(playwright, proxy.origin, cluster.agentSecret);
  const id = await pendingNote(agent, "fifty hands, one run");
  const runsBefore = cluster.demoRuns();

  const answers = await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      const res = await (reviewers[i % 3] as APIRequestContext).post(`/api/calls/${id}/approve`, {
        data: {},
      });
      return {
        status: res.status(),
        body: (await res.json()) as { error?: { code: string; message: string } },
      };
    }),
  );
  const won = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status !== 200);
  expect(won).toHaveLength(1);
  expect(refused).toHaveLength(49);
  for (const r of refused) {
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.error?.code).toBe("already_decided");
    expect(r.body.error?.message).toBe(`Already decided: ${crew.reviewer.name} approved it.`);
  }

  const done = (await (await agent.get(`/api/calls/${id}?wait=30`)).json()) as Call;
  expect(done.status).toBe("succeeded");
  expect(cluster.demoRuns()).toBe(runsBefore + 1);
  const story = (await (await (reviewers[0] as APIRequestContext).get(`/api/calls/${id}/story`)).json()) as {
    audit: { action: string }[];
  };
  const actions = story.audit.map((a) => a.action);
  expect(actions.filter((a) => a === "call.approved")).toHaveLength(1);
  expect(actions.filter((a) => a === "call.succeeded")).toHaveLength(1);
  await Promise.all([owner, agent, ...reviewers].map((c) => c.dispose()));
});

test("20 calls at once against a grant of 5 uses run 5, whichever replicas take them", async ({
  playwright,
  cluster,
}) => {
  test.setTimeout(120_000);
  const { replicas, proxy } = cluster;
  const owner = await signedIn(playwright, proxy.origin, crew.owner);
  await enableTools(owner, ["demo_add_note"]);
  const reviewer = await signedIn(playwright, proxy.origin, crew.reviewer);
  const agent = await agentAt(playwright, proxy.origin, cluster.agentSecret);
  const seed = await pendingNote(agent, "the grant's first note");
  const approved = await reviewer.post(`/api/calls/${seed}/approve`, {
    data: { grant: { scope: "tool", minutes: 10, uses: 5 } },
  });
  expect(approved.status()).toBe(200);
  const { grant } = (await approved.json()) as { grant: { id: string; usesAllowed: number } };
  expect(grant.usesAllowed).toBe(5);
  expect(((await (await agent.get(`/api/calls/${seed}?wait=30`)).json()) as Call).status).toBe("succeeded");
  const runsBefore = cluster.demoRuns();

  const agents = await Promise.all(replicas.map((r) => agentAt(playwright, r.origin, cluster.agentSecret)));
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      ask(agents[i % 3] as APIRequestContext, "demo_add_note", { text: `granted note ${i}` }),
    ),
  );
  const ran = answers.filter((a) => a.status === 200);
  const waiting = answers.filter((a) => a.status === 202);
  expect(ran).toHaveLength(5);
  expect(waiting).toHaveLength(15);
  for (const a of ran) {
    expect(a.body.status).toBe("succeeded");
    expect(a.body.grantId).toBe(grant.id);
  }
  for (const a of waiting) expect(a.body.status).toBe("pending");
  expect(cluster.demoRuns()).toBe(runsBefore + 5);
  const grants = (await (await reviewer.get("/api/grants")).json()) as {
    grants: { id: string; uses: number; state: string }[];
  };
  expect(grants.grants.find((g) => g.id === grant.id)).toMatchObject({ uses: 5, state: "ended" });

  // Nothing of this test is left waiting for the next.
  for (const a of waiting) {
    const res = await reviewer.post(`/api/calls/${a.body.id}/deny`, { data: { reason: "grant test done" } });
    expect(res.status()).toBe(200);
  }
  await Promise.all([owner, reviewer, agent, ...agents].map((c) => c.dispose()));
});

test("an SDK v1 client keeps its session when the proxy moves it and when its replica restarts", async ({
  playwright,
  cluster,
}) => {
  test.setTimeout(180_000);
  const { proxy } = cluster;
  const owner = await signedIn(playwright, proxy.origin, crew.owner);
  await enableTools(owner, ["demo_list_notes"]);
  await owner.dispose();
  const transport = new StreamableHTTPClientTransport(new URL(`${proxy.origin}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${cluster.agentSecret}` } },
  });
  const client = new Client({ name: "replicas-e2e", version: "1.0.0" });
  const listNotes = async () => {
    const result = await client.callTool({ name: "demo_list_notes", arguments: {} });
    expect(result.isError ?? false, JSON.stringify(result)).toBe(false);
    // The demo server's own words: the call reached it, wherever it runs.
    expect(JSON.stringify(result.content)).toMatch(/The notebook is empty\.|1\. /);
  };
  try {
    await client.connect(transport);
    const session = transport.sessionId;
    expect(session).toEqual(expect.any(String));
    const mine = (after = 0) =>
      proxy.hits.slice(after).filter((h) => h.sessionId === session && h.method === "POST");
    const started = mine()[0]?.target ?? -1;
    expect(started).toBeGreaterThanOrEqual(0);

    for (let i = 0; i < 4; i++) await listNotes();
    // The proxy sent the session's requests to every replica, not only the one that opened it.
    expect(new Set(mine().map((h) => h.target))).toEqual(new Set([0, 1, 2]));
    expect(mine().every((h) => h.status === 200 || h.status === 202)).toBe(true);

    // The replica that opened the session restarts (a deploy): the client never hears of it.
    const restarted = cluster.replica(started);
    await restarted.stop("SIGTERM");
    await listNotes();
    await restarted.start();
    const after = proxy.hits.length;
    // To the restarted replica, whatever the turn (the client's stream reconnects take turns too).
    proxy.pin(/^\/mcp/, started);
    try {
      await listNotes();
    } finally {
      proxy.unpin();
    }
    expect(mine(after).some((h) => h.target === started && h.status === 200)).toBe(true);
    expect(transport.sessionId).toBe(session);
  } finally {
    await client.close();
  }
});

test(`SIGKILL of the replica running a call leaves it interrupted once the lease (${LEASE_SECONDS} s) runs out, never re-run`, async ({
  playwright,
  cluster,
}) => {
  test.setTimeout(180_000);
  const { replicas, proxy } = cluster;
  const owners = await Promise.all(replicas.map((r) => signedIn(playwright, r.origin, crew.owner)));
  await enableTools(owners[0] as APIRequestContext, ["slow_write"]);
  const holder = await until("a replica runs slow", 30_000, () => holderOf(owners, "slow"));
  const agent = await agentAt(playwright, proxy.origin, cluster.agentSecret);
  const { status, body } = await ask(agent, "slow_write", { text: "takes a while" });
  expect(status).toBe(202);
  const startsBefore = cluster.slowStarts();

  // Approved on the replica holding `slow`: that replica runs the call.
  const reviewer = await signedIn(playwright, cluster.replica(holder).origin, crew.reviewer);
  const approved = await reviewer.post(`/api/calls/${body.id}/approve`, { data: {} });
  expect(approved.status()).toBe(200);
  await until("the tool began", 15_000, async () => (cluster.slowStarts() > startsBefore ? true : null));
  const survivor = (holder + 1) % 3;
  const survivorAgent = await agentAt(playwright, cluster.replica(survivor).origin, cluster.agentSecret);
  expect(((await (await survivorAgent.get(`/api/calls/${body.id}`)).json()) as Call).status).toBe("running");

  try {
    await cluster.replica(holder).stop("SIGKILL");
    // A survivor's long-poll wakes when another survivor (or itself) reaps the dead replica.
    const res = await survivorAgent.get(`/api/calls/${body.id}?wait=${LEASE_SECONDS + 20}`);
    const ended = (await res.json()) as Call;
    expect(ended.status).toBe("interrupted");
    // The server is started again on a survivor, and the call is not sent to it again.
    const alive = owners.map((o, i) => (i === holder ? null : o));
    await until("a survivor runs slow", 30_000, () => holderOf(alive, "slow"));
    expect(cluster.slowStarts()).toBe(startsBefore + 1);
    expect(((await (await survivorAgent.get(`/api/calls/${body.id}`)).json()) as Call).status).toBe(
      "interrupted",
    );
  } finally {
    await Promise.all([agent, survivorAgent, reviewer, ...owners].map((c) => c.dispose()));
  }
});

test("SIGKILL of the replica holding a stdio server moves it to a survivor: calls work again within 15 s", async ({
  playwright,
  cluster,
}) => {
  test.setTimeout(180_000);
  const { replicas } = cluster;
  const owners = await Promise.all(replicas.map((r) => signedIn(playwright, r.origin, crew.owner)));
  await enableTools(owners[0] as APIRequestContext, ["demo_list_notes"]);
  const holder = await until("a replica runs demo", 30_000, () => holderOf(owners, "demo"));
  const agents = await Promise.all(replicas.map((r) => agentAt(playwright, r.origin, cluster.agentSecret)));
  // Every replica reaches it first: the holder itself, the others by forwarding.
  for (const agent of agents) expect((await ask(agent, "demo_list_notes")).status).toBe(200);
  const before = await serverAt(owners[holder] as APIRequestContext, "demo");
  // Every replica's Servers page says the same of it: where it runs and what it listed.
  for (const owner of owners) {
    const view = await serverAt(owner, "demo");
    expect(view).toMatchObject({
      state: "ready",
      tools: { listed: 2 },
      replica: { label: before?.replica?.label },
    });
  }

  const survivors = [0, 1, 2].filter((i) => i !== holder);
  const meanwhile: string[] = [];
  try {
    await cluster.replica(holder).stop("SIGKILL");
    const killedAt = Date.now();
    await Promise.all(
      survivors.map((i) =>
        until(`replica ${i} answers a demo call`, 15_000, async () => {
          const { status, body } = await ask(agents[i] as APIRequestContext, "demo_list_notes");
          if (status === 200 && body.status === "succeeded") return true;
          meanwhile.push(
            `+${Date.now() - killedAt} ms replica ${i}: ${status} ${body.status ?? ""} ${body.error?.code ?? ""} ${body.error?.message ?? ""}`,
          );
          return null;
        }),
      ),
    );
    expect(Date.now() - killedAt, meanwhile.join("\n")).toBeLessThan(15_000);
    // Whatever a call met while the server moved said what it was, never a bare 500.
    for (const answer of meanwhile) expect(answer).not.toMatch(/^500|internal/);
    // And the Servers page of either survivor names the new holder.
    for (const i of survivors) {
      await until(`replica ${i} names demo's new holder`, 5_000, async () => {
        const label = (await serverAt(owners[i] as APIRequestContext, "demo"))?.replica?.label;
        return label && label !== before?.replica?.label ? label : null;
      });
    }
    test.info().annotations.push({
      type: "while demo moved",
      description: meanwhile.length ? [...new Set(meanwhile)].join("; ") : "no call failed",
    });
  } finally {
    await Promise.all([...agents, ...owners].map((c) => c.dispose()));
  }
});
