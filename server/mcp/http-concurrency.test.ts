/**
 * Many calls at once to one streamable-HTTP tool server (a real one, on the v1 SDK, answering
 * each POST with its own event stream), as agents make them under load: every call is answered,
 * and the connection's requests leave nothing behind on the signal they share.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fixtureOverHttp, freePort, httpServerConfig, stopHttpServers } from "@/test/support/http-servers";
import { FIXTURES, gatehouse, Harness, tempDir, text } from "@/test/support/mcp-harness";
import { registerLifecycleCleanup } from "./lifecycle-fixtures";

registerLifecycleCleanup();
afterEach(stopHttpServers);

describe("concurrent calls to an HTTP tool server", () => {
  it("300 calls, 60 at a time, are all answered and raise no listener-leak warning", async () => {
    const server = fixtureOverHttp(await freePort(), join(FIXTURES, "restartable-http.mjs"), {
      REQUEST_LOG: join(tempDir(), "requests.log"),
    });
    await server.start();
    const harness = new Harness(gatehouse([httpServerConfig("fx", server.url)]));
    await harness.manager.start();
    await harness.waitForState("fx", "ready");
    const warnings: string[] = [];
    const onWarning = (warning: Error) => {
      if (warning.name === "MaxListenersExceededWarning") warnings.push(warning.message);
    };
    process.on("warning", onWarning);
    try {
      for (let round = 0; round < 5; round++) {
        const answers = await Promise.all(
          Array.from({ length: 60 }, (_, i) =>
            harness.manager.callTool("fx", "echo", { text: `${round}.${i}` }),
          ),
        );
        expect(answers.map(text)).toEqual(Array.from({ length: 60 }, (_, i) => `echo: ${round}.${i}`));
      }
      // Node emits warnings on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
});
