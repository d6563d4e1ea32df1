/**
 * What agents are told when a server cannot serve their request: the server's name and state,
 * never its address, its error text or its stderr. The errors are real: a stdio child
 * (test/fixtures/servers/leaky.mjs) answering with a JSON-RPC error that spills an internal
 * address, its secret and a forged log line, and a dial to a port nobody listens on.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import type { ServerState } from "@/lib/api-types";
import { freePort } from "@/test/support/http-servers";
import { REPO_ROOT } from "@/test/support/runtime";
import { registerSecrets } from "../log";
import { unavailableForAgents, upstreamErrorForAgents } from "./agent-facing";
import { messageOf } from "./failures";
import { BoundedStdioTransport, LineRing } from "./stdio-transport";

const LEAKY = path.join(REPO_ROOT, "test/fixtures/servers/leaky.mjs");

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

describe("messages agents get from a server that cannot serve them", () => {
  it("a server that is not ready is named to agents by its state alone", () => {
    const words: Record<ServerState, RegExp> = {
      connecting: /^server files is connecting/,
      backoff: /^server files is in backoff/,
      failed: /^server files has failed/,
      needs_auth: /^server files waits for an owner to sign in/,
      closed: /^server files is stopped/,
      dark: /^server files is disabled/,
      ready: /^server files is not connected/,
    };
    for (const [state, said] of Object.entries(words) as [ServerState, RegExp][]) {
      expect(unavailableForAgents("files", state)).toMatch(said);
    }
  });

  it("a server's JSON-RPC error reaches agents in its own words, without Gatehouse's secrets or a forged line", async () => {
    const secret = `sk-${randomUUID()}`;
    // The runtime registers a server's env values as secrets; this client stands in for it.
    registerSecrets([secret, "k9"]);
    const stderr = new LineRing();
    const client = new Client({ name: "test", version: "1" });
    await client.connect(
      new BoundedStdioTransport({
        command: process.execPath,
        args: [LEAKY],
        env: { LEAK_SHORT_KEY: "k9", LEAK_TOKEN: secret },
        cwd: null,
        maxFrameBytes: 1 << 20,
        stderr,
      }),
    );
    try {
      const err = await rejection(client.callTool({ name: "leak", arguments: {} }));
      expect(err).toBeInstanceOf(ProtocolError);
      expect(messageOf(err)).toContain(secret);
      const told = upstreamErrorForAgents("files", err, { connectionFailed: false });
      expect(told).toMatch(/^server files answered with an error \(JSON-RPC code -32603\): (?!MCP error)/);
      // The server's answer is the agent's to read...
      expect(told).toContain("10.20.30.40");
      // ...but not the credential Gatehouse gave it, and it stays one line.
      for (const spilled of [secret, "key=k9", "\n"]) expect(told).not.toContain(spilled);
      expect(told).toContain("[redacted]");
    } finally {
      await client.close();
    }
  }, 15_000);

  it("an unreachable server's address and error text do not reach agents", async () => {
    const port = await freePort();
    const client = new Client({ name: "test", version: "1" });
    const err = await rejection(
      client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`))),
    );
    expect(messageOf(err)).toContain(`127.0.0.1:${port}`);
    const told = upstreamErrorForAgents("web", err, { connectionFailed: false });
    expect(told).toBe(
      "server web could not be reached, or its answer did not arrive whole; an owner can see why on the Servers page",
    );
    expect(told).not.toContain(String(port));
  });

  it("a connection that failed under a request is named without its reason", () => {
    const err = new Error("server process exited (code 3): panic at /home/build/secret-path");
    expect(upstreamErrorForAgents("files", err, { connectionFailed: true })).toBe(
      "server files: the connection failed during the request; an owner can see why on the Servers page",
    );
    expect(upstreamErrorForAgents("files", err, { connectionFailed: false })).toBe(
      "server files: the request failed; an owner can see why on the Servers page",
    );
  });
});

describe("a server echoing a secret in its error", () => {
  it("a secret split by hidden characters is still redacted in agent-facing errors", () => {
    const secret = `sk-${randomUUID()}`;
    registerSecrets([secret]);
    const split = `${secret.slice(0, 5)}\u200B${secret.slice(5)}`;
    const told = upstreamErrorForAgents("files", new ProtocolError(-32603, `you sent ${split}`), {
      connectionFailed: false,
    });
    expect(told).not.toContain(secret);
    expect(told).toContain("you sent [redacted]");
  });
});
