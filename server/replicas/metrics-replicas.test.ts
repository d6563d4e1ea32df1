/**
 * `/metrics` on replicas: each replica counts what it did itself, under a `replica` label, while
 * what describes shared state (calls waiting) is read from the store and is the same on every
 * replica. Two real runtimes on one PostgreSQL database; on SQLite, one process says it without
 * the label.
 */
import { describe, expect, it } from "vitest";
import { answerMetrics } from "@/server/http/metrics";
import { ADD_NOTE, enableTool, LIST_NOTES, type TestRuntime } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { runtimes } from "../calls/call-fixtures";
import { replicaLabel } from "./registry";

const { start } = runtimes();
const TOKEN = "scrape-token-0123456789abcdef";
const agent = { kind: "agent", name: "agent-a" } as const;

async function scrape(rt: TestRuntime): Promise<string> {
  const res = await answerMetrics(new Headers({ authorization: `Bearer ${TOKEN}` }), {
    ...rt.runtime,
    scrapeToken: TOKEN,
  });
  expect(res.status).toBe(200);
  return res.text();
}

/** The value of the one series of `name` whose labels include every one of `labels`. */
function value(text: string, name: string, labels: string[] = []): number {
  const lines = text
    .split("\n")
    .filter(
      (l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && labels.every((x) => l.includes(x)),
    );
  expect(lines.length, `${name} ${labels.join(",")}:\n${lines.join("\n")}`).toBeLessThanOrEqual(1);
  return lines[0] ? Number(lines[0].slice(lines[0].lastIndexOf(" ") + 1)) : 0;
}

describe.runIf(testDialect === "postgres")("metrics across replicas", () => {
  it("each replica counts its own calls under its replica label, and both tell the store's count of waiting calls", async () => {
    const a = await start();
    await enableTool(a.runtime, ADD_NOTE);
    await enableTool(a.runtime, LIST_NOTES);
    const b = await start({ databaseUrl: a.databaseUrl });
    const read = await a.runtime.broker.request(agent, { tool: LIST_NOTES, arguments: {} });
    expect(read.httpStatus).toBe(200);
    const held = await b.runtime.broker.request(agent, { tool: ADD_NOTE, arguments: { text: "wait" } });
    expect(held.httpStatus).toBe(202);

    const [onA, onB] = [await scrape(a), await scrape(b)];
    const label = `replica="${replicaLabel()}"`;
    const succeeded = [`tool="${LIST_NOTES}"`, 'outcome="succeeded"', label];
    expect(value(onA, "gatehouse_calls_total", succeeded)).toBe(1);
    expect(value(onB, "gatehouse_calls_total", succeeded)).toBe(0);
    expect(value(onA, "gatehouse_pending_calls", [label])).toBe(1);
    expect(value(onB, "gatehouse_pending_calls", [label])).toBe(1);
    // Every series carries the label, process metrics included.
    for (const line of onA.split("\n").filter((l) => l !== "" && !l.startsWith("#")))
      expect(line).toContain(label);
  });
});

describe.runIf(testDialect === "sqlite")("metrics of one process", () => {
  it("carry no replica label", async () => {
    const rt = await start();
    expect(await scrape(rt)).not.toContain("replica=");
  });
});
