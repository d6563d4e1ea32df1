import { type QueryClient, type QueryKey, useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import type { LiveEvent } from "@/lib/api-types";
import { queryKeys } from "@/lib/query-keys";

const EVENTS_PATH = "/api/events";
const EVENT_TYPES = [
  "call",
  "catalogue",
  "server",
  "grants",
  "resources",
  "oauth",
] as const satisfies readonly LiveEvent["type"][];
/** Used only when the browser gave up on the stream (HTTP error, wrong content type). */
const REOPEN_MIN_MS = 1_000;
const REOPEN_MAX_MS = 30_000;

/** How long refreshes of the slower lists (grants, rules with their hit counts) are gathered. */
const GATHER_MS = 1_000;

/**
 * How often, at most, `call` events refetch the calls after the first (which refetches at once).
 * Agents make thousands of calls a second, and each refetch of the pending queue or the recent
 * list also cancels the one in flight. The server already thins each stream's `call` events to
 * the same pace (`CALL_GATHER_MS`, server/events.ts); pacing here too keeps the page's bound from
 * depending on what the stream sends. With the same length the two do not add up: the server's
 * window-end event reaches the page as the page's own window ends, so it passes at once or after
 * the difference of two network delays, where a longer window here would hold it again. 500 ms
 * is how long a reviewer waits, at most, to see a new pending call during a burst; after a quiet
 * spell it shows at once.
 */
const CALLS_PACE_MS = 500;

/**
 * Which cached queries an event makes stale: `now`, refetched at once; `paced`, refetched at once
 * too but then at most once per window while events keep coming (the last of a burst is
 * refetched at the window's end; see {@link paceFor}): agents' calls come thousands a second, and
 * a server whose tools flap sends catalogue events in a stream; and `gathered`, refetched at most
 * once per {@link GATHER_MS} however many events arrive (a busy agent's calls each change a
 * grant's uses or a rule's hits, and the rule list counts over every call). A catalogue change
 * also changes a server's tool counts, may add to the change feed, may end grants and changes the
 * tools a rule matches. An agent reading resources sends one event a read, so the list of reads
 * is paced like the catalogue. Only the event's type counts: the server sends one `call` event
 * for a burst of many calls, so its `id` and `status` are not those of every call.
 */
function keysFor(type: LiveEvent["type"]): { now: QueryKey[]; paced: QueryKey[]; gathered: QueryKey[] } {
  const slow = [queryKeys.grants.all, queryKeys.rules.all];
  switch (type) {
    case "call":
      return { now: [], paced: [queryKeys.calls.all], gathered: slow };
    case "catalogue":
      return {
        now: [],
        paced: [queryKeys.catalogue.all, queryKeys.servers.all, queryKeys.changes.all],
        gathered: slow,
      };
    // A sign-in stored or forgotten changes the sign-in part of the server's view.
    case "server":
    case "oauth":
      return { now: [queryKeys.servers.all], paced: [], gathered: [] };
    // A revoke or an ending also adds to the story of the call the grant was made with.
    case "grants":
      return { now: [queryKeys.grants.all, queryKeys.calls.all], paced: [], gathered: [] };
    case "resources":
      return { now: [], paced: [queryKeys.resourceReads.all], gathered: [] };
    case "token":
      return { now: [queryKeys.tokens.all], paced: [], gathered: [] };
  }
}

/** A paced key's window: {@link CALLS_PACE_MS} for the calls, {@link GATHER_MS} for the rest. */
function paceFor(queryKey: QueryKey): number {
  return queryKey === queryKeys.calls.all ? CALLS_PACE_MS : GATHER_MS;
}

/**
 * Invalidation of keys at most once per window each: a key not asked for in the current window
 * is invalidated at once and opens a window; asked for again within it, it is invalidated once
 * more when the window ends (opening the next). `windowMs` is one length for every key, or each
 * key's own (default {@link GATHER_MS}). `stop` cancels what is pending.
 */
export function pacedInvalidation(
  client: QueryClient,
  windowMs: number | ((queryKey: QueryKey) => number) = GATHER_MS,
): { ask(keys: QueryKey[]): void; stop(): void } {
  const lengthOf = typeof windowMs === "number" ? () => windowMs : windowMs;
  const windows = new Map<string, { timer: ReturnType<typeof setTimeout>; again: boolean }>();
  const open = (id: string, queryKey: QueryKey) => {
    const timer = setTimeout(() => {
      const again = windows.get(id)?.again ?? false;
      windows.delete(id);
      if (!again) return;
      invalidate(client, [queryKey]);
      open(id, queryKey);
    }, lengthOf(queryKey));
    windows.set(id, { timer, again: false });
  };
  return {
    ask(keys) {
      for (const queryKey of keys) {
        const id = JSON.stringify(queryKey);
        const window = windows.get(id);
        if (window) {
          window.again = true;
          continue;
        }
        invalidate(client, [queryKey]);
        open(id, queryKey);
      }
    },
    stop() {
      for (const { timer } of windows.values()) clearTimeout(timer);
      windows.clear();
    },
  };
}

/**
 * Marks `keys` stale and refetches them. A fetch already in flight may carry an answer from before
 * the event, and react-query joins a query's first fetch instead of restarting it; so in-flight
 * fetches are cancelled first and the refetch starts after the event.
 */
export function invalidate(client: QueryClient, keys: QueryKey[]): void {
  for (const queryKey of keys) {
    void client.cancelQueries({ queryKey }).then(() => client.invalidateQueries({ queryKey }));
  }
}

/**
 * What live events do to `client`'s cache: `apply(type)` invalidates the queries an event of
 * that type makes stale, at once, paced or gathered as {@link keysFor} says; `stop` cancels what
 * is pending.
 */
export function liveEventInvalidation(client: QueryClient): {
  apply(type: LiveEvent["type"]): void;
  stop(): void;
} {
  const gathering = new Map<string, ReturnType<typeof setTimeout>>();
  const paced = pacedInvalidation(client, paceFor);
  return {
    apply(type) {
      const keys = keysFor(type);
      invalidate(client, keys.now);
      paced.ask(keys.paced);
      for (const queryKey of keys.gathered) {
        const id = JSON.stringify(queryKey);
        if (gathering.has(id)) continue;
        gathering.set(
          id,
          setTimeout(() => {
            gathering.delete(id);
            invalidate(client, [queryKey]);
          }, GATHER_MS),
        );
      }
    },
    stop() {
      for (const timer of gathering.values()) clearTimeout(timer);
      gathering.clear();
      paced.stop();
    },
  };
}

/** Longest a first fetch waits for the stream (see {@link afterLiveStreamOpened}). */
const FIRST_OPEN_WAIT_MS = 3_000;

let streamOpened = false;
const openWaiters = new Set<() => void>();

/** The stream opened (or failed to): whoever waits for it may fetch now. */
function releaseOpenWaiters(): void {
  streamOpened = true;
  for (const release of openWaiters) release();
  openWaiters.clear();
}

/**
 * Resolves once this page's live stream has opened the first time (at once after that), so a
 * query that awaits it in its `queryFn` fetches once: the stream's first opening refetches every
 * family (events before it are lost), which would otherwise ask again for what was just fetched,
 * or cancel it in flight and send it again. The server subscribes a stream before it answers, so
 * what is fetched after the opening misses no event. It also resolves when the stream fails (a
 * later reopening refetches everything anyway) and, at the latest, after
 * {@link FIRST_OPEN_WAIT_MS}; it rejects when `signal` aborts (the query was cancelled).
 */
export function afterLiveStreamOpened(signal?: AbortSignal): Promise<void> {
  if (streamOpened) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", abort);
      openWaiters.delete(done);
      resolve();
    };
    const abort = () => {
      clearTimeout(timer);
      openWaiters.delete(done);
      reject(signal?.reason ?? new DOMException("aborted", "AbortError"));
    };
    const timer = setTimeout(done, FIRST_OPEN_WAIT_MS);
    if (signal?.aborted) return abort();
    signal?.addEventListener("abort", abort, { once: true });
    openWaiters.add(done);
  });
}

/**
 * Opens one EventSource on `/api/events` for as long as the calling component is mounted and
 * turns each event into react-query invalidations; nothing polls. The browser reconnects a
 * dropped stream by itself; when it gives up for good (readyState CLOSED, e.g. a 5xx answer),
 * the stream is reopened with capped exponential backoff. When the stream first opens, and after
 * any reconnect, every family is invalidated, because events sent before or while it was not
 * connected are lost.
 */
export function useLiveEvents(): void {
  const client = useQueryClient();

  useEffect(() => {
    let source: EventSource | null = null;
    let reopenTimer: ReturnType<typeof setTimeout> | null = null;
    let reopenDelay = REOPEN_MIN_MS;
    let hadError = false;
    let stopped = false;

    const invalidation = liveEventInvalidation(client);
    const apply = invalidation.apply;
    const onEvent = (type: LiveEvent["type"]) => () => apply(type);
    const handlers = EVENT_TYPES.map((type) => [type, onEvent(type)] as const);
    // A message without an `event:` line still carries its type in the JSON.
    const onMessage = (message: MessageEvent<string>) => {
      try {
        const event = JSON.parse(message.data) as Partial<LiveEvent>;
        if (event.type && (EVENT_TYPES as readonly string[]).includes(event.type)) {
          apply(event.type);
        }
      } catch {
        // Not JSON (a comment or keep-alive): nothing to invalidate.
      }
    };
    // A page's first fetch can precede the stream's opening, and an event
    // in between (a new pending call) would be lost; so the first open refreshes too.
    let opened = false;
    const onOpen = () => {
      reopenDelay = REOPEN_MIN_MS;
      if (hadError || !opened) {
        opened = true;
        hadError = false;
        invalidate(client, [
          queryKeys.calls.all,
          queryKeys.catalogue.all,
          queryKeys.servers.all,
          queryKeys.changes.all,
          queryKeys.grants.all,
          queryKeys.rules.all,
          queryKeys.resourceReads.all,
        ]);
      }
      // After the invalidation, so a query that waited is not asked for again.
      releaseOpenWaiters();
    };
    const onError = () => {
      hadError = true;
      releaseOpenWaiters();
      if (source?.readyState === EventSource.CLOSED && !stopped) {
        close();
        reopenTimer = setTimeout(open, reopenDelay);
        reopenDelay = Math.min(reopenDelay * 2, REOPEN_MAX_MS);
      }
    };

    function open(): void {
      reopenTimer = null;
      if (stopped) return;
      source = new EventSource(EVENTS_PATH);
      for (const [type, handler] of handlers) source.addEventListener(type, handler);
      source.addEventListener("message", onMessage);
      source.addEventListener("open", onOpen);
      source.addEventListener("error", onError);
    }

    function close(): void {
      if (!source) return;
      for (const [type, handler] of handlers) source.removeEventListener(type, handler);
      source.removeEventListener("message", onMessage);
      source.removeEventListener("open", onOpen);
      source.removeEventListener("error", onError);
      source.close();
      source = null;
    }

    open();
    return () => {
      stopped = true;
      if (reopenTimer) clearTimeout(reopenTimer);
      invalidation.stop();
      close();
    };
  }, [client]);
}
