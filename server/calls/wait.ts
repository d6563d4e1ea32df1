import "server-only";
import { type CallView, isFinalCallStatus as isFinal } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { EventBus } from "../events";
import { callTrace, inSpan } from "../tracing";

/** A W3C `traceparent` (version 00): one that is not is no parent, and the call's own trace is used. */
const W3C_TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** What a wait on a call reads: the bus its moves are published on, and its view (null: none). */
export interface WaitSource {
  bus: EventBus;
  get(id: string): Promise<CallView | null>;
}

/**
 * Resolves with call `id`'s view when it reaches a final status, after `seconds`, or when `signal`
 * aborts, whichever is first; woken by the event bus, never by polling. `call_not_found` when
 * there is no such call.
 */
export function untilFinal(
  source: WaitSource,
  id: string,
  seconds: number,
  signal?: AbortSignal,
  /** The span the wait is traced under: the request waiting; default the one that made the call. */
  traceparent: string | null = null,
): Promise<CallView> {
  const parent = traceparent && W3C_TRACEPARENT.test(traceparent) ? traceparent : callTrace(id);
  return inSpan(
    "wait for review",
    { attributes: { "gatehouse.call.id": id }, traceparent: parent },
    async (span) => {
      const view = await waitFinal(source, id, seconds, signal);
      span.setAttribute("gatehouse.call.status", view.status);
      return view;
    },
  );
}

async function waitFinal(
  source: WaitSource,
  id: string,
  seconds: number,
  signal?: AbortSignal,
): Promise<CallView> {
  const first = await source.get(id);
  if (!first) throw new GatehouseError("call_not_found", `no call ${id}`);
  // An abort that came before the wait (a cancellation while the call was being stored) would
  // never fire its listener: it ends the wait at once, as a later one does.
  if (isFinal(first.status) || seconds <= 0 || signal?.aborted) return first;
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, seconds * 1000);
    const unsubscribe = source.bus.subscribe((e) => {
      if (e.type === "call" && e.id === id && isFinal(e.status)) done();
    });
    signal?.addEventListener("abort", done);
    // The decision may have landed between the first read and the subscription.
    void source.get(id).then(
      (again) => {
        if (again && isFinal(again.status)) done();
      },
      // Unread now: the timer, the bus or the abort still ends the wait.
      () => undefined,
    );
  });
  return (await source.get(id)) ?? first;
}
