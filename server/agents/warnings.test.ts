import { afterEach, describe, expect, it } from "vitest";
import { createAgentToken, startTestRuntime, type TestRuntime } from "@/test/support/runtime";
import { revokeToken, setTokenToolSet } from "../auth/tokens";
import { toolSetWarnings } from "./warnings";

/** The start-time warnings about tool sets: a set matching no tool, a token in a set gone from the config. */

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

describe("tool set warnings", () => {
  it("name a set whose globs match no known tool, and an active token whose set is not configured", async () => {
    rt = await startTestRuntime({
      config: { toolSets: { notes: { tools: ["demo_*"] }, typo: { tools: ["dmeo_*"] } } },
    });
    const { db } = rt.runtime;
    await createAgentToken(rt.runtime, "fine-bot", { toolSet: "notes" });
    await createAgentToken(rt.runtime, "lost-bot", { toolSet: "notes" });
    await setTokenToolSet(db, { name: "lost-bot", toolSet: "gone", actor: "test", knownSets: ["gone"] });
    await createAgentToken(rt.runtime, "old-bot", { toolSet: "notes" });
    await setTokenToolSet(db, { name: "old-bot", toolSet: "gone", actor: "test", knownSets: ["gone"] });
    await revokeToken(db, { name: "old-bot", actor: "test" });

    const warnings = await toolSetWarnings(db, rt.runtime.config.toolSets, [
      "demo_add_note",
      "demo_list_notes",
    ]);
    expect(warnings).toEqual([
      "toolSets.typo: its tools globs match no tool in the catalogue; check them for a typo",
      'agent token lost-bot: its tool set "gone" is not in the configuration, so it may use no tool; give it another on Settings or with token set',
    ]);
  });
});
