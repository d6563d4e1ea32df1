import "server-only";
import { sql } from "drizzle-orm";
import type { BusBridge } from "../replicas/bus-bridge";
import { type Db, rows } from "../store/db";
import { json } from "./route";

/** The probes' paths: liveness and readiness. */
export const HEALTH_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz"]);

/** How long readiness waits for the store before it answers not ready (ms). */
const STORE_CHECK_MS = 2_000;

/**
 * Liveness and readiness for load balancers and Kubernetes probes, answered without a session,
 * a Host check or any detail about the deployment. `/healthz`: 200 while the process answers.
 * `/readyz`: 200 when the store answers within {@link STORE_CHECK_MS} and, with replicas, this
 * one hears the others' events; else 503 `store_unavailable` with `Retry-After`, so a balancer
 * sends agents to a replica that can serve them until this one recovers (it does by itself).
 */
export async function answerHealth(
  path: string,
  runtime: { db: Db; bridge: BusBridge | null },
): Promise<Response> {
  if (path === "/healthz") return json({ status: "ok" });
  const problem = await notReady(runtime);
  if (problem === null) return json({ status: "ready" });
  return json({ error: { code: "store_unavailable", message: problem } }, 503, { "retry-after": "5" });
}

async function notReady(runtime: { db: Db; bridge: BusBridge | null }): Promise<string | null> {
  try {
    if ((await withinMs(rows(runtime.db, sql`SELECT 1`), STORE_CHECK_MS)) === "late")
      return "the store did not answer in time";
  } catch {
    return "the store cannot be reached";
  }
  if (runtime.bridge && !runtime.bridge.listening)
    return "not hearing the other replicas' events (reconnecting)";
  return null;
}

/**
 * What `work` resolves with, or "late" once `ms` have passed first (the work goes on unwatched);
 * its rejection is passed on. For a probe that must answer whether the store does or not.
 */
export async function withinMs<T>(work: Promise<T>, ms: number): Promise<T | "late"> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
