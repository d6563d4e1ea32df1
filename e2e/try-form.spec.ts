import path from "node:path";
import { fileURLToPath } from "node:url";
import { type BrowserContext, expect, type Locator, type Page, test } from "@playwright/test";
import { snap } from "./support/fixtures";
import { type Instance, startInstance } from "./support/instance";

/**
 * The "Try" dialog's form, built from each tool's input schema: every tool the reference server
 * (server-everything) lists gets the right control for each of its properties, sends nothing
 * while a required field is empty, sends only what was filled, and reaches its outcome — at once
 * for a read-only tool, pending a reviewer for a destructive one. Nested objects and arrays, which
 * server-everything has none of, come from test/fixtures/servers/form-shapes.mjs, as does a tool
 * of 200 properties; the raw JSON view goes there and back.
 *
 * A Gatehouse of its own (e2e/support/instance.ts) on an empty store, so that its owner and
 * catalogue are this spec's alone.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const owner = { name: "tess", password: "tess-owner-pass-1" };

const config = {
  mcpServers: {
    everything: {
      command: process.execPath,
      // Its bin; the first argument picks the transport.
      args: [path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"],
      enabled: true,
      // It lists more than the default 12; this spec wants every one of them.
      maxTools: 50,
    },
    shapes: {
      command: process.execPath,
      args: [path.join(root, "test/fixtures/servers/form-shapes.mjs")],
      enabled: true,
    },
    demo: {
      command: process.execPath,
      args: [path.join(root, "demo", "server.mjs")],
      env: { DEMO_STATE_FILE: "{dir}/demo-state.json" },
      enabled: true,
    },
  },
  approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
  catalogue: { descriptionMaxChars: 1024, refreshSeconds: 300 },
};

/** The control a property should get: an input of a type, a select, a checkbox, a JSON textarea, a fieldset or a list. */
type Control = "text" | "url" | "email" | "number" | "select" | "checkbox" | "json" | "fieldset" | "list";

const controlElement: Record<Exclude<Control, "fieldset" | "list">, string> = {
  text: "input:text",
  url: "input:url",
  email: "input:email",
  number: "input:number",
  select: "select",
  checkbox: "input:checkbox",
  json: "textarea",
};

interface Plan {
  /** Each property of the tool's input schema, and its control. */
  controls: Record<string, Control>;
  /** What the form says stops the call before anything is filled; absent when it can be sent as it opens. */
  blockedBy?: string[];
  /** Fills the form (after the controls were checked). */
  fill?: (dialog: Locator) => Promise<void>;
  /** Exactly the arguments the call should carry. */
  sends: Record<string, unknown>;
  /** `pending` for a destructive tool (its annotations do not say readOnlyHint: true). */
  outcome: "succeeded" | "pending";
  /** Text the outcome shows, beyond its status. */
  shows?: string;
  /** A screenshot name, for the tools worth looking at. */
  snap?: string;
}

/** server-everything's tools, by the name it lists them under. */
const everything: Record<string, Plan> = {
  echo: {
    controls: { message: "text" },
    blockedBy: ["Fill in message."],
    fill: async (d) => d.getByLabel("message", { exact: true }).fill("hello from the form"),
    sends: { message: "hello from the form" },
    outcome: "succeeded",
    shows: "hello from the form",
  },
  "get-annotated-message": {
    controls: { messageType: "select", includeImage: "select" },
    blockedBy: ["Choose messageType."],
    fill: async (d) => {
      const type = d.getByLabel("messageType", { exact: true });
      await expect(type.getByRole("option")).toHaveText(["Choose…", "error", "success", "debug"]);
      // An optional boolean can be left out; its default prefills it.
      const image = d.getByLabel("includeImage", { exact: true });
      await expect(image.getByRole("option")).toHaveText(["Not sent", "true", "false"]);
      await expect(image).toHaveValue("false");
      await type.selectOption("success");
    },
    sends: { messageType: "success", includeImage: false },
    outcome: "succeeded",
    snap: "try-form-enum",
  },
  "get-env": { controls: {}, sends: {}, outcome: "succeeded" },
  "get-resource-links": {
    controls: { count: "number" },
    fill: async (d) => {
      const count = d.getByLabel("count", { exact: true });
      await expect(count).toHaveValue("3");
      // The range is in the label beside the name.
      await expect(d.getByText("number, 1 to 10", { exact: true })).toBeVisible();
      await count.fill("11");
      await expect(d.getByRole("button", { name: "Call tool" })).toBeDisabled();
      await expect(d).toContainText("count must be at most 10");
      await count.fill("2");
    },
    sends: { count: 2 },
    outcome: "succeeded",
  },
  "get-resource-reference": {
    controls: { resourceType: "select", resourceId: "number" },
    fill: async (d) => {
      await expect(d.getByLabel("resourceType", { exact: true })).toHaveValue("0");
      await expect(d.getByLabel("resourceId", { exact: true })).toHaveValue("1");
    },
    sends: { resourceType: "Text", resourceId: 1 },
    outcome: "succeeded",
  },
  "get-structured-content": {
    controls: { location: "select" },
    blockedBy: ["Choose location."],
    fill: async (d) => {
      await d.getByLabel("location", { exact: true }).selectOption("Chicago");
    },
    sends: { location: "Chicago" },
    outcome: "succeeded",
    // Its answer for Chicago.
    shows: "Light rain / drizzle",
  },
  "get-sum": {
    controls: { a: "number", b: "number" },
    blockedBy: ["Fill in a.", "Fill in b."],
    fill: async (d) => {
      // What a number input would have reported as empty is named for what it is.
      await d.getByLabel("a", { exact: true }).fill("1e");
      await expect(d.getByTestId("try-problems")).toContainText("a must be a number");
      await expect(d.getByRole("button", { name: "Call tool" })).toBeDisabled();
      await d.getByLabel("a", { exact: true }).fill("2.5");
      await d.getByLabel("b", { exact: true }).fill("4");
    },
    sends: { a: 2.5, b: 4 },
    outcome: "succeeded",
    shows: "The sum of 2.5 and 4 is 6.5.",
  },
  "get-tiny-image": { controls: {}, sends: {}, outcome: "succeeded" },
  "gzip-file-as-resource": {
    controls: { name: "text", data: "url", outputType: "select" },
    fill: async (d) => {
      await expect(d.getByLabel("name", { exact: true })).toHaveValue("README.md.gz");
      await d.getByLabel("data", { exact: true }).fill("data:text/plain;base64,aGVsbG8=");
    },
    sends: { name: "README.md.gz", data: "data:text/plain;base64,aGVsbG8=", outputType: "resourceLink" },
    outcome: "pending",
  },
  "toggle-simulated-logging": { controls: {}, sends: {}, outcome: "pending" },
  "toggle-subscriber-updates": { controls: {}, sends: {}, outcome: "pending" },
  "trigger-long-running-operation": {
    controls: { duration: "number", steps: "number" },
    fill: async (d) => {
      await d.getByLabel("duration", { exact: true }).fill("1");
      await d.getByLabel("steps", { exact: true }).fill("1");
    },
    sends: { duration: 1, steps: 1 },
    outcome: "succeeded",
  },
  "simulate-research-query": {
    controls: { topic: "text", ambiguous: "select" },
    blockedBy: ["Fill in topic."],
    fill: async (d) => {
      await d.getByLabel("topic", { exact: true }).fill("forms");
      await d.getByLabel("ambiguous", { exact: true }).selectOption("Not sent");
    },
    sends: { topic: "forms" },
    outcome: "pending",
  },
  "get-roots-list": { controls: {}, sends: {}, outcome: "succeeded" },
};

const LONG_NAME = `a_property_name_that_goes_on_${"and_on_".repeat(9)}`.slice(0, 90);

interface CatalogueTool {
  localName: string;
  remoteName: string;
  server: string;
  destructive: boolean;
  availability: string;
  inputSchema: { properties?: Record<string, unknown> };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The fieldset (object or list) of a property, by the name its legend starts with. */
function group(scope: Locator, name: string): Locator {
  return scope.getByRole("group", { name: new RegExp(`^${escapeRegExp(name)}\\b`) });
}

async function expectControl(scope: Locator, name: string, control: Control): Promise<void> {
  if (control === "fieldset" || control === "list") {
    const set = group(scope, name);
    await expect(set).toBeVisible();
    const add = set.getByRole("button", { name: `Add item to ${name}` });
    await expect(add).toHaveCount(control === "list" ? 1 : 0);
    return;
  }
  const input = scope.getByLabel(name, { exact: true });
  await expect(input).toBeVisible();
  // A number is a text input with a numeric keyboard (see components/schema-form.tsx), so that
  // text it cannot parse is reported as "must be a number".
  const element = await input.evaluate((el) =>
    el instanceof HTMLInputElement && el.type === "text" && /^(numeric|decimal)$/.test(el.inputMode)
      ? "input:number"
      : `${el.tagName.toLowerCase()}${el instanceof HTMLInputElement ? `:${el.type}` : ""}`,
  );
  expect(element, `the control of ${name}`).toBe(controlElement[control]);
}

async function catalogue(page: Page): Promise<CatalogueTool[]> {
  const res = await page.request.get("/api/catalogue");
  expect(res.status()).toBe(200);
  return ((await res.json()) as { tools: CatalogueTool[] }).tools;
}

async function openTry(page: Page, localName: string): Promise<Locator> {
  await page.getByRole("button", { name: `Try ${localName}`, exact: true }).click();
  const dialog = page.getByRole("dialog", { name: `Try ${localName}` });
  await expect(dialog).toBeVisible();
  return dialog;
}

/** The arguments of the call the dialog's outcome is about, as Gatehouse recorded them. */
async function sentArguments(page: Page, dialog: Locator): Promise<Record<string, unknown>> {
  const href = await dialog
    .getByTestId("try-outcome")
    .getByRole("link", { name: "Story" })
    .getAttribute("href");
  const id = decodeURIComponent((href ?? "").replace(/^\/activity\//, ""));
  const res = await page.request.get(`/api/calls/${encodeURIComponent(id)}`);
  expect(res.status()).toBe(200);
  return ((await res.json()) as { arguments: Record<string, unknown> }).arguments;
}

async function expectOutcome(dialog: Locator, outcome: Plan["outcome"], shows?: string): Promise<void> {
  const box = dialog.getByTestId("try-outcome");
  if (outcome === "pending") {
    await expect(box).toContainText("pending");
    await expect(box).toContainText("Waiting for a reviewer's approval.");
  } else {
    await expect(box).toContainText("succeeded");
    await expect(box).toContainText(/Done/);
  }
  if (shows) await expect(box).toContainText(shows);
}

async function enableAll(page: Page, server: string, count: number): Promise<void> {
  await page.goto("/tools");
  await page.getByLabel("Server").selectOption(server);
  await expect(page.getByTestId(new RegExp(`^tool-${server}_`))).toHaveCount(count);
  await page.getByLabel("Select every proposed tool on this page").check();
  await page.getByRole("button", { name: `Enable selected (${count})` }).click();
  await expect(page.getByTestId(new RegExp(`^tool-${server}_`)).filter({ hasText: "enabled" })).toHaveCount(
    count,
  );
}

test.describe
  .serial("the Try dialog's form, built from each tool's input schema", () => {
    let instance: Instance;
    let context: BrowserContext;
    let page: Page;

    test.beforeAll(async ({ browser }) => {
      instance = await startInstance(config);
      context = await browser.newContext({ baseURL: instance.baseURL });
      page = await context.newPage();
    });

    test.afterAll(async () => {
      await context?.close();
      await instance?.stop();
    });

    test("the owner sets up and enables every tool of server-everything and the fixture", async () => {
      await page.goto(instance.setupLink);
      await page.getByLabel("Name").fill(owner.name);
      await page.getByLabel("Password", { exact: true }).fill(owner.password);
      await page.getByLabel("Confirm password").fill(owner.password);
      await page.getByRole("button", { name: "Create owner" }).click();
      await expect(page).toHaveURL(/\/servers$/);
      for (const server of ["everything", "shapes", "demo"]) {
        await expect(page.getByTestId(`server-${server}`)).toContainText("ready");
      }

      const listed = (await catalogue(page)).filter((t) => t.server === "everything");
      // Every tool it lists has a plan here, and every plan a tool: a new tool fails this test.
      expect(listed.map((t) => t.remoteName).sort()).toEqual(Object.keys(everything).sort());
      for (const tool of listed) {
        const plan = everything[tool.remoteName];
        expect(Object.keys(tool.inputSchema.properties ?? {}).sort(), tool.remoteName).toEqual(
          Object.keys(plan?.controls ?? {}).sort(),
        );
        // Its annotations decide whether a call waits.
        expect(tool.destructive, tool.remoteName).toBe(plan?.outcome === "pending");
      }
      await enableAll(page, "everything", listed.length);
      await enableAll(page, "shapes", 2);
      await enableAll(page, "demo", 2);
    });

    for (const [name, plan] of Object.entries(everything)) {
      test(`server-everything's ${name}: its controls, what stops it, what it sends, its outcome`, async () => {
        const localName = `everything_${name}`;
        await page.goto(`/tools?tool=${encodeURIComponent(localName)}`);
        const dialog = await openTry(page, localName);
        const call = dialog.getByRole("button", { name: "Call tool" });

        if (Object.keys(plan.controls).length === 0) {
          await expect(dialog).toContainText("This tool takes no arguments");
        }
        for (const [property, control] of Object.entries(plan.controls)) {
          await expectControl(dialog, property, control);
        }
        if (plan.blockedBy) {
          await expect(call).toBeDisabled();
          await expect(dialog.getByTestId("try-problems").getByRole("listitem")).toHaveText(plan.blockedBy);
        } else {
          await expect(call).toBeEnabled();
        }
        await plan.fill?.(dialog);
        await expect(dialog.getByTestId("try-problems")).toHaveCount(0);
        if (plan.snap) await snap(page, plan.snap, false);
        await call.click();
        await expectOutcome(dialog, plan.outcome, plan.shows);
        expect(await sentArguments(page, dialog)).toEqual(plan.sends);
        await dialog.getByRole("button", { name: "Close" }).click();
        await expect(dialog).toBeHidden();
      });
    }

    test("a required text left empty is not sent: the demo's add_note waits until it is filled", async () => {
      await page.goto("/tools");
      const dialog = await openTry(page, "demo_add_note");
      const call = dialog.getByRole("button", { name: "Call tool" });
      await expect(call).toBeDisabled();
      await expect(dialog.getByTestId("try-problems")).toHaveText("Fill in text.");
      await expect(dialog.getByLabel("text", { exact: true })).toHaveAttribute("aria-required", "true");
      await expect(dialog).toContainText("The note's text");
      await dialog.getByLabel("text", { exact: true }).fill("from the form");
      await call.click();
      await expectOutcome(dialog, "pending");
      expect(await sentArguments(page, dialog)).toEqual({ text: "from the form" });
    });

    test("nested objects are fieldsets, arrays are lists or JSON, and the raw JSON view goes there and back", async () => {
      await page.goto("/tools?tool=shapes_plan_trip");
      const dialog = await openTry(page, "shapes_plan_trip");
      const call = dialog.getByRole("button", { name: "Call tool" });
      for (const [property, control] of Object.entries({
        traveller: "fieldset",
        stops: "list",
        nights: "list",
        legs: "json",
        pace: "select",
        budget: "json",
        extra: "json",
      } satisfies Record<string, Control>)) {
        await expectControl(dialog, property, control);
      }
      const traveller = group(dialog, "traveller");
      await expect(traveller).toContainText("Traveller");
      await expect(traveller).toContainText("Who travels.");
      await expectControl(traveller, "name", "text");
      await expectControl(traveller, "age", "number");
      await expectControl(traveller, "contact", "fieldset");
      const contact = group(traveller, "contact");
      await expectControl(contact, "email", "email");
      await expectControl(contact, "sms", "select");
      await expect(dialog.getByLabel("pace", { exact: true }).getByRole("option")).toHaveText([
        "Choose…",
        "Slow and easy",
        "Fast",
      ]);
      await expect(dialog).toContainText("Written as JSON: its items are objects.");
      await expect(dialog).toContainText("Written as JSON: it refers to another schema ($ref).");
      await expect(dialog).toContainText("Written as JSON: it combines schemas (anyOf).");

      await expect(call).toBeDisabled();
      await expect(dialog.getByTestId("try-problems").getByRole("listitem")).toHaveText([
        "Fill in traveller.name.",
        "Add at least 1 item to stops.",
      ]);

      await traveller.getByLabel("name", { exact: true }).fill("Ada");
      await traveller.getByLabel("age", { exact: true }).fill("151");
      await expect(dialog.getByTestId("try-problems")).toContainText("traveller.age must be at most 150.");
      await traveller.getByLabel("age", { exact: true }).fill("36");
      await contact.getByLabel("email", { exact: true }).fill("ada@example.org");
      const stops = group(dialog, "stops");
      await stops.getByRole("button", { name: "Add item to stops" }).click();
      await stops.getByRole("button", { name: "Add item to stops" }).click();
      await expect(dialog.getByTestId("try-problems").getByRole("listitem")).toHaveText([
        "Fill in stops item 1 or remove it.",
        "Fill in stops item 2 or remove it.",
      ]);
      await stops.getByLabel("stops item 1", { exact: true }).fill("Oslo");
      await stops.getByLabel("stops item 2", { exact: true }).fill("Rome");
      const nights = group(dialog, "nights");
      await nights.getByRole("button", { name: "Add item to nights" }).click();
      await nights.getByLabel("nights item 1", { exact: true }).fill("0");
      await expect(nights).toContainText("nights item 1 must be at least 1");
      await nights.getByLabel("nights item 1", { exact: true }).fill("2");
      await nights.getByRole("button", { name: "Add item to nights" }).click();
      await nights.getByRole("button", { name: "Remove nights item 2" }).click();
      await expect(nights.getByLabel("nights item 2", { exact: true })).toHaveCount(0);
      await dialog.getByLabel("legs", { exact: true }).fill('[{"from": "Oslo", "to": "Rome"}]');
      await dialog.getByLabel("pace", { exact: true }).selectOption("Fast");
      await expect(call).toBeEnabled();
      await traveller.scrollIntoViewIfNeeded();
      await snap(page, "try-form-nested", false);

      const expected = {
        traveller: { name: "Ada", age: 36, contact: { email: "ada@example.org" } },
        stops: ["Oslo", "Rome"],
        nights: [2],
        legs: [{ from: "Oslo", to: "Rome" }],
        pace: "fast",
      };
      const rawToggle = dialog.getByRole("button", { name: "Raw JSON" });
      await rawToggle.click();
      await expect(rawToggle).toHaveAttribute("aria-pressed", "true");
      const raw = dialog.getByLabel("Arguments (JSON)");
      await expect(raw).toHaveValue(JSON.stringify(expected, null, 2));
      await snap(page, "try-form-raw", false);

      // A key the form has no field for cannot go back into it; the raw view says so and stays.
      await raw.fill(JSON.stringify({ ...expected, bogus: 1 }));
      await rawToggle.click();
      await expect(dialog.getByRole("alert")).toHaveText(
        "Cannot switch back to the form: the form has no field bogus",
      );
      await expect(rawToggle).toHaveAttribute("aria-pressed", "true");
      await raw.fill(JSON.stringify({ ...expected, traveller: { name: 7 } }));
      await rawToggle.click();
      await expect(dialog.getByRole("alert")).toHaveText(
        "Cannot switch back to the form: traveller.name must be a string for the form",
      );

      const edited = { ...expected, stops: ["Oslo", "Rome", "Paris"] };
      await raw.fill(JSON.stringify(edited));
      await rawToggle.click();
      await expect(rawToggle).toHaveAttribute("aria-pressed", "false");
      await expect(group(dialog, "stops").getByLabel("stops item 3", { exact: true })).toHaveValue("Paris");
      await expect(group(dialog, "traveller").getByLabel("age", { exact: true })).toHaveValue("36");

      await call.click();
      await expectOutcome(dialog, "succeeded", "Paris");
      expect(await sentArguments(page, dialog)).toEqual(edited);
    });

    test("a tool of 200 properties stays usable: the fields scroll inside the dialog, long names wrap", async () => {
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.goto("/tools?tool=shapes_wide_form");
      const dialog = await openTry(page, "shapes_wide_form");
      const call = dialog.getByRole("button", { name: "Call tool" });
      await expectControl(dialog, LONG_NAME, "text");
      await expectControl(dialog, "field_001", "number");
      await expectControl(dialog, "field_002", "select");
      await expectControl(dialog, "field_003", "select");
      await expectControl(dialog, "field_199", "select");
      await expect(dialog.locator("input, select, textarea")).toHaveCount(200);
      await expect(dialog.getByTestId("try-problems").getByRole("listitem")).toHaveText([
        `Fill in ${LONG_NAME}.`,
        "Fill in field_001.",
        "Choose field_199.",
      ]);

      // The dialog fits the window; its buttons stay in view while the fields scroll.
      const box = await dialog.boundingBox();
      expect(box && box.height <= 800 && box.width <= 1280).toBe(true);
      await expect(call).toBeInViewport();
      await expect(dialog.getByLabel("field_199", { exact: true })).not.toBeInViewport();
      const overflow = await dialog.evaluate((el) => el.scrollWidth - el.clientWidth);
      expect(overflow).toBeLessThanOrEqual(0);
      await snap(page, "try-form-wide", false);

      await dialog.getByLabel(LONG_NAME, { exact: true }).fill("long");
      await dialog.getByLabel("field_001", { exact: true }).fill("4");
      await dialog.getByLabel("field_199", { exact: true }).selectOption("blue");
      await expect(call).toBeInViewport();
      await call.click();
      await expectOutcome(dialog, "succeeded");
      expect(await sentArguments(page, dialog)).toEqual({
        [LONG_NAME]: "long",
        field_001: 4,
        field_199: "blue",
      });
      await snap(page, "try-form-wide-called", false);
    });
  });
