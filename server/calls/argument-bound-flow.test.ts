/**
 * Through a real runtime and the real `/api/calls` route: a server's `maxArgumentBytes` bounds
 * the arguments of its tools, and only its tools; a bound outside 1 KiB..1 MiB never starts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { ADD_NOTE, bodyOf, DEMO_SERVER, enableTool, request, waitForEvent } from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import { measureArguments } from "./argument-size";
import { ARGUMENT_LIMITS } from "./arguments";
import { type ErrorBody, people, runtimes } from "./call-fixtures";

const { start } = runtimes();

/** The demo server's `add_note` again, as server "files" with its own bound. */
const FILES_ADD_NOTE = "files_add_note";

function filesServer(dir: string, maxArgumentBytes: unknown) {
  return {
    command: "node",
    args: [DEMO_SERVER],
    env: { DEMO_STATE_FILE: path.join(dir, "files-state.json") },
    enabled: true,
    maxArgumentBytes,
  };
}

function post(bearer: string, tool: string, args: Record<string, unknown>): Promise<Response> {
  return request("POST", "/api/calls", { bearer, body: { tool, arguments: args } });
}

/**
 * About 4 KiB of JSON that `add_note`'s schema accepts (at most 2,000 characters): "€" is one
 * character and three bytes of UTF-8.
 */
const FOUR_KIB = { text: "€".repeat(1400) };

describe("a server's maxArgumentBytes, end to end", () => {
  it("a server configured with 2048 refuses a 4 KiB argument naming its bound; the demo server without one accepts it", async () => {
    const bytes = measureArguments(FOUR_KIB, ARGUMENT_LIMITS).bytes;
    expect(bytes).toBeGreaterThan(4096);
    const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
    const rt = await start({ dir, servers: { files: filesServer(dir, 2048) } });
    const listed = async () =>
      rt.runtime.manager.get("files").snapshot().state === "ready" &&
      (await getToolRow(rt.runtime.db, FILES_ADD_NOTE)) !== null;
    await waitForEvent(rt.runtime.bus, listed, { already: listed, what: () => "the files server's tools" });
    const { agent } = await people(rt);
    await enableTool(rt.runtime, FILES_ADD_NOTE);

    const refused = await post(agent, FILES_ADD_NOTE, FOUR_KIB);
    expect(refused.status).toBe(422);
    expect((await bodyOf<ErrorBody>(refused)).error).toEqual({
      code: "invalid_arguments",
      message:
        "arguments are over 2 KiB of JSON (2048 bytes), the most a call to files may send (set by mcpServers.files.maxArgumentBytes in the config)",
    });

    // The same arguments to the same tool of a server without the key: the global 1 MiB applies.
    const accepted = await post(agent, ADD_NOTE, FOUR_KIB);
    expect(accepted.status).toBe(202);
    expect((await bodyOf<CallView>(accepted)).status).toBe("pending");
    // And the bounded server still takes what fits.
    const small = await post(agent, FILES_ADD_NOTE, { text: "a short note" });
    expect(small.status).toBe(202);
  });

  it.each([
    ["0", 0],
    ["5 MiB", 5 * 1024 * 1024],
    ["a string", "2048"],
  ])("maxArgumentBytes %s is refused at validation, naming its JSON path and the range", async (_, value) => {
    const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
    try {
      await expect(start({ dir, servers: { files: filesServer(dir, value) } })).rejects.toThrow(
        /mcpServers\.files\.maxArgumentBytes.*an integer from 1024 to 1048576 \(1 KiB to 1 MiB/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
