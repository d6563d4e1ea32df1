import { createHmac, timingSafeEqual } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import type { APIRequestContext, APIResponse, Page } from "@playwright/test";
import { E2E_SECRET, people, type ReceivedHook, readState } from "./support/env";
import { expect, snap, test } from "./support/fixtures";

/**
 * Reaching reviewers, end to end (PRODUCT.md §10), after the journey (its owner and enabled demo
 * tools), through the real SMTP server and webhook receiver global-setup runs: the owner gives a
 * new reviewer an email address in Settings; an agent's destructive call mails that reviewer a
 * link without the call's arguments; the link, opened signed out, leads through sign-in to the
 * call, and approving it there answers the agent's long-poll. The webhook got `call.pending` with
 * the same link and a signature that verifies, then `call.decided`; Settings lists both
 * destinations with those deliveries.
 */
const nora = { name: "nora", password: "nora-reviewer-pass-1", email: "nora@reviewers.e2e.test" };
const TOKEN = "notify-bot";
/** The call's only argument: it must reach the reviewer's screen, never a message. */
const NOTE = "notify: the quarterly numbers 5b2e";

test.describe
  .serial("a reviewer reached by email and webhook decides from the link", () => {
    let agent: APIRequestContext;
    let callId = "";
    let link = "";
    let requestedAt = 0;
    /** The agent's `GET /api/calls/:id?wait=60`, started as soon as the call is held. */
    let waited: Promise<APIResponse> | null = null;
    let answered = false;
    let mailDelivery = "";

    test.beforeAll(async ({ playwright }) => {
      const { baseURL } = readState();
      const owner = await playwright.request.newContext({ baseURL });
      const session = await owner.post("/api/session", { headers: { Origin: baseURL }, data: people.owner });
      expect(session.status()).toBe(200);
      const token = await owner.post("/api/tokens", { headers: { Origin: baseURL }, data: { name: TOKEN } });
      expect(token.status()).toBe(201);
      const { secret } = (await token.json()) as { secret: string };
      await owner.dispose();
      agent = await playwright.request.newContext({
        baseURL,
        extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
      });
    });

    test.afterAll(async () => {
      // A long-poll still out when a step failed: let it end before its context goes.
      await waited?.catch(() => undefined);
      await agent.dispose();
    });

    test("the owner adds a reviewer in Settings and gives them an email address", async ({ page }) => {
      await signIn(page, people.owner);
      await page.goto("/settings");
      await page.getByLabel("Name", { exact: true }).fill(nora.name);
      await page.getByLabel("Password", { exact: true }).fill(nora.password);
      await page.getByLabel("Reviewer").check();
      await page.getByRole("button", { name: "Add user" }).click();
      const row = page.getByTestId(`user-${nora.name}`);
      await expect(row).toContainText("No email");

      await row.getByRole("button", { name: `Edit email for ${nora.name}` }).click();
      await row.getByLabel(`Email for ${nora.name}`).fill(nora.email);
      await row.getByRole("button", { name: "Save" }).click();
      await expect(row).toContainText(nora.email);
      await expect(row.getByRole("button", { name: `Edit email for ${nora.name}` })).toBeFocused();
      const users = (await (await page.request.get("/api/users")).json()) as {
        users: { name: string; email: string | null }[];
      };
      expect(users.users.find((u) => u.name === nora.name)?.email).toBe(nora.email);
    });

    test("an agent's held call mails the reviewer a link to it, without its arguments", async () => {
      const { baseURL, mailDir } = readState();
      requestedAt = Date.now();
      const res = await agent.post("/api/calls", {
        data: { tool: "demo_add_note", arguments: { text: NOTE } },
      });
      expect(res.status()).toBe(202);
      callId = ((await res.json()) as { id: string; status: string }).id;
      waited = agent.get(`/api/calls/${callId}?wait=60`, { timeout: 70_000 });
      void waited.then(
        () => {
          answered = true;
        },
        () => {
          answered = true;
        },
      );

      await expect
        .poll(() => mailsAbout(mailDir, callId).length, { message: `an email about ${callId} in ${mailDir}` })
        .toBe(1);
      const [mail] = mailsAbout(mailDir, callId);
      if (!mail) throw new Error("no mail");
      test.info().annotations.push({
        type: "figure",
        description: `email on the SMTP server ${Math.round(mail.arrivedAt - requestedAt)} ms after the call was requested`,
      });
      expect(mail.header("to")).toBe(nora.email);
      expect(mail.header("from")).toBe("gatehouse@e2e.test");
      expect(mail.header("subject")).toBe(`Approval needed: demo_add_note by ${TOKEN}`);
      expect(mail.header("x-gatehouse-event")).toBe("call.pending");
      mailDelivery = mail.header("x-gatehouse-delivery") ?? "";
      expect(mailDelivery).not.toBe("");

      link = `${baseURL}/approvals/${callId}`;
      const text = mail.part("text/plain");
      const html = mail.part("text/html");
      expect(text).toContain(`Review it: ${link}\n`);
      expect(text).toContain("Tool: demo_add_note (server demo)");
      expect(text).toContain(`Requested by: ${TOKEN} (agent)`);
      expect(html).toContain(`href="${link}"`);
      // The only link is the call's own page.
      expect([...text.matchAll(/https?:\/\/\S+/g)].map((m) => m[0])).toEqual([link]);
      // Argument values stay in Gatehouse: not in either part, not in the raw message.
      for (const body of [text, html, mail.raw]) {
        expect(body).not.toContain(NOTE);
        expect(body).not.toContain("quarterly");
      }
      // The agent is still waiting for a decision.
      expect(answered).toBe(false);
    });

    test("the link, opened signed out, leads through sign-in to the call; approving it answers the agent", async ({
      browser,
    }) => {
      expect(link, "the link from the email of the previous step").not.toBe("");
      const { baseURL } = readState();
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(link);
      await expect(page).toHaveURL(`${baseURL}/login?next=${encodeURIComponent(`/approvals/${callId}`)}`);
      await expect(page.getByText("the call you were sent opens right after")).toBeVisible();
      await snap(page, "notify-email-link-login");
      await page.getByLabel("Name").fill(nora.name);
      await page.getByLabel("Password").fill(nora.password);
      await page.getByRole("button", { name: "Sign in" }).click();

      await expect(page).toHaveURL(link);
      await expect(page.getByText(`Signed in as ${nora.name}`)).toBeVisible();
      const card = page.getByTestId(`call-${callId}`);
      await expect(card).toContainText("demo_add_note");
      await expect(card).toContainText(`agent ${TOKEN}`);
      // The reviewer sees in Gatehouse what the message left out.
      await expect(card).toContainText(`"text": "${NOTE}"`);
      await snap(page, "notify-email-link-call");
      expect(answered).toBe(false);

      await card.getByRole("button", { name: "Approve" }).click();
      await expect(page.getByTestId("call-outcome")).toContainText("The tool ran and succeeded");
      if (!waited) throw new Error("no long-poll");
      const outcome = await waited;
      expect(outcome.status()).toBe(200);
      const done = (await outcome.json()) as {
        id: string;
        status: string;
        decidedBy: string;
        result: unknown;
      };
      expect(done.id).toBe(callId);
      expect(done.status).toBe("succeeded");
      expect(done.decidedBy).toBe(nora.name);
      expect(JSON.stringify(done.result)).toContain(NOTE);
      await context.close();
    });

    test("the webhook got call.pending with the link and a signature that verifies, then call.decided", async () => {
      expect(callId, "the call of the earlier steps").not.toBe("");
      const { hooksDir } = readState();
      await expect
        .poll(() => hooksAbout(hooksDir, callId).map((h) => h.json.event), {
          message: `call.pending and call.decided for ${callId} in ${hooksDir}`,
        })
        .toEqual(["call.pending", "call.decided"]);
      const [pending, decided] = hooksAbout(hooksDir, callId);
      if (!pending || !decided) throw new Error("no deliveries");

      for (const hook of [pending, decided]) {
        expect(hook.received.method).toBe("POST");
        expect(hook.received.url).toBe("/hook");
        expect(hook.received.headers["content-type"]).toBe("application/json");
        expect(hook.received.headers["gatehouse-event"]).toBe(hook.json.event);
        expect(hook.received.headers["gatehouse-delivery"]).toBe(hook.json.deliveryId);
        expectSignedWith(E2E_SECRET, hook.received);
        // The argument values stay in Gatehouse: only their digest goes out.
        expect(hook.received.body).not.toContain(NOTE);
        expect(hook.json.call).not.toHaveProperty("arguments");
        expect(hook.json.call?.argumentsDigest).toMatch(/^[0-9a-f]{64}$/);
        expect(hook.json.url).toBe(link);
      }
      expect(pending.json.call).toMatchObject({
        id: callId,
        tool: "demo_add_note",
        server: "demo",
        requester: { kind: "agent", name: TOKEN },
        status: "pending",
        approvals: 0,
        decidedBy: null,
      });
      expect(decided.json.call).toMatchObject({ id: callId, approvals: 1, decidedBy: nora.name });
      expect(decided.json.deliveryId).not.toBe(pending.json.deliveryId);
      expect(Date.parse(decided.received.receivedAt)).toBeGreaterThanOrEqual(
        Date.parse(pending.received.receivedAt),
      );
      test.info().annotations.push({
        type: "figure",
        description: `call.pending on the webhook receiver ${Date.parse(pending.received.receivedAt) - requestedAt} ms after the call was requested`,
      });
    });

    test("Settings lists the webhook and the email channel with their delivered messages, and no secret", async ({
      page,
    }) => {
      expect(callId, "the call of the earlier steps").not.toBe("");
      expect(mailDelivery, "the email delivery of the earlier steps").not.toBe("");
      const { baseURL, hooksDir } = readState();
      const [pending, decided] = hooksAbout(hooksDir, callId);
      if (!pending || !decided) throw new Error("no deliveries");
      const hookOrigin = `http://${String(pending.received.headers.host)}`;

      await signIn(page, people.owner);
      await page.goto("/settings");
      const section = page.getByRole("region", { name: "Notifications" });
      await expect(section).toContainText(`Links in messages start with ${baseURL}.`);

      const hook = section.getByRole("article", { name: "Webhook e2e-hook" });
      await expect(hook).toContainText(hookOrigin);
      await expect(hook).not.toContainText(`${hookOrigin}/hook`);
      await expect(hook).toContainText("signed");
      await expect(hook).not.toContainText("unsigned");
      await expect(hook).toContainText("call.pending");
      await expect(hook).toContainText("call.decided");
      for (const { json } of [pending, decided]) {
        const row = hook.getByTestId(`delivery-${json.deliveryId}`);
        await expect(row).toContainText("delivered");
        await expect(row).toContainText(json.event);
        await expect(row).toContainText("1 try");
        await expect(row).toContainText("HTTP 200 at");
        await expect(row.getByRole("link", { name: `Story of call ${callId}` })).toBeVisible();
      }

      const email = section.getByRole("article", { name: "Email" });
      await expect(email).toContainText("127.0.0.1");
      const mailed = email.getByTestId(`delivery-${mailDelivery}`);
      await expect(mailed).toContainText("delivered");
      await expect(mailed).toContainText("call.pending");
      await expect(mailed).toContainText(/delivered at /);

      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width).toBeLessThanOrEqual(page.viewportSize()?.width ?? 1280);
      await section.scrollIntoViewIfNeeded();
      await snap(page, "notify-settings-notifications");

      // Neither the page nor its API answer shows the webhook's path, its key, the SMTP URL or an argument.
      const answer = await (await page.request.get("/api/notifications")).text();
      for (const shown of [await page.content(), answer]) {
        expect(shown).not.toContain(E2E_SECRET);
        expect(shown).not.toContain(`${hookOrigin}/hook`);
        expect(shown).not.toContain("smtp://");
        expect(shown).not.toContain(NOTE);
      }
    });
  });

interface ReceivedMail {
  raw: string;
  /** When the SMTP server had written it (the file's mtime, ms). */
  arrivedAt: number;
  header(name: string): string | undefined;
  /** The decoded body of the first part of this type; "" when there is none. */
  part(type: string): string;
}

/** The messages in `dir` whose text mentions the call, oldest first. */
function mailsAbout(dir: string, id: string): ReceivedMail[] {
  return filesIn(dir, ".eml")
    .map((file) => ({ ...parseMail(readFileSync(file, "latin1")), arrivedAt: statSync(file).mtimeMs }))
    .filter((mail) => mail.part("text/plain").includes(`/approvals/${id}`));
}

/** The e2e webhook's deliveries about the call, in the order they arrived. */
function hooksAbout(dir: string, id: string): { received: ReceivedHook; json: HookBody }[] {
  return filesIn(dir, ".json")
    .map((file) => JSON.parse(readFileSync(file, "utf8")) as ReceivedHook)
    .map((received) => ({ received, json: JSON.parse(received.body) as HookBody }))
    .filter((hook) => hook.json.call?.id === id);
}

interface HookBody {
  event: string;
  deliveryId: string;
  url: string | null;
  call?: {
    id: string;
    status: string;
    argumentsDigest: string;
    approvals: number;
    decidedBy: string | null;
  };
}

/** Whole files only (global-setup writes them aside, then renames), in the receivers' numbering. */
function filesIn(dir: string, ext: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith(ext) && !name.startsWith("."))
    .sort()
    .map((name) => path.join(dir, name));
}

/** `Gatehouse-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, checked as a receiver would. */
function expectSignedWith(secret: string, hook: ReceivedHook): void {
  const header = hook.headers["gatehouse-signature"];
  expect(typeof header).toBe("string");
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(header));
  expect(m, String(header)).not.toBeNull();
  const [, t = "", v1 = ""] = m ?? [];
  const expected = createHmac("sha256", secret).update(`${t}.${hook.body}`).digest();
  expect(timingSafeEqual(Buffer.from(v1, "hex"), expected)).toBe(true);
  // Fresh: signed when it was sent, not replayed from long ago.
  expect(Math.abs(Date.parse(hook.receivedAt) / 1000 - Number(t))).toBeLessThan(300);
}

/**
 * Just enough MIME for what nodemailer sends: unfolded headers, nested multiparts, and
 * quoted-printable, base64 or plain bodies read as UTF-8. `raw` comes in as latin1 (one char per byte).
 */
function parseMail(raw: string): Omit<ReceivedMail, "arrivedAt"> {
  const entity = parseEntity(raw);
  const parts: { type: string; body: string }[] = [];
  const walk = (e: Entity) => {
    const type = (e.headers.get("content-type") ?? "text/plain").toLowerCase();
    const boundary = /boundary="?([^";]+)"?/i.exec(e.headers.get("content-type") ?? "")?.[1];
    if (type.startsWith("multipart/") && boundary) {
      const chunks = e.body.split(`--${boundary}`).slice(1);
      for (const chunk of chunks) {
        if (chunk.startsWith("--")) break;
        walk(parseEntity(chunk.replace(/^\r?\n/, "")));
      }
      return;
    }
    parts.push({ type: type.split(";")[0]?.trim() ?? type, body: decodeBody(e) });
  };
  walk(entity);
  return {
    raw,
    header: (name) => entity.headers.get(name.toLowerCase()),
    part: (type) => parts.find((p) => p.type === type)?.body ?? "",
  };
}

interface Entity {
  headers: Map<string, string>;
  body: string;
}

function parseEntity(text: string): Entity {
  const split = /\r?\n\r?\n/.exec(text);
  const head = split ? text.slice(0, split.index) : text;
  const body = split ? text.slice(split.index + split[0].length) : "";
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r?\n[ \t]+/g, " ").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { headers, body };
}

function decodeBody(e: Entity): string {
  const encoding = (e.headers.get("content-transfer-encoding") ?? "7bit").toLowerCase();
  let bytes: Buffer;
  if (encoding === "base64") bytes = Buffer.from(e.body.replace(/\s+/g, ""), "base64");
  else if (encoding === "quoted-printable") {
    const soft = e.body.replace(/=\r?\n/g, "");
    bytes = Buffer.from(
      soft.replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
      "latin1",
    );
  } else bytes = Buffer.from(e.body, "latin1");
  return bytes.toString("utf8").replace(/\r\n/g, "\n");
}

async function signIn(page: Page, who: { name: string; password: string }) {
  await page.goto("/login");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}
