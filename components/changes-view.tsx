"use client";

import { useInfiniteQuery, useMutation, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useMemo, useState } from "react";
import { changeKindLabel, changeKindTone, describeChange } from "@/components/change-text";
import { Badge, Button, cx, EmptyState, ErrorAlert, Loading, PageHeader } from "@/components/ui";
import { useNow } from "@/components/use-now";
import type { ChangeKind, ChangeView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatAge, formatDateTime, plural } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

const PAGE_SIZE = 100;
/** A refresh that adds this many tools of one kind at once is shown as one entry. */
const GROUP_FROM = 4;
/** Names shown in a collapsed group. */
const GROUP_PREVIEW = 6;

/** What a whole group of same-kind changes means, when their details may differ tool by tool. */
const groupText: Record<ChangeKind, string> = {
  added: "proposed; enable them on the Tools page to make them callable",
  over_cap: "listed beyond maxTools: not proposed",
  changed: "definitions changed; enabled ones are not callable until reviewed",
  gone: "no longer listed by their server",
  returned: "listed again, back to their previous status",
  excluded: "excluded by allowTools",
  vouch_dropped: "read-only vouches dropped: the definitions changed",
};

interface Entry {
  key: string;
  at: string;
  server: string;
  kind: ChangeKind;
  changes: ChangeView[];
  unread: boolean;
}

/** Consecutive changes of one refresh (same time, server and kind) become one entry when numerous. */
function entriesOf(changes: ChangeView[]): Entry[] {
  const runs: ChangeView[][] = [];
  for (const c of changes) {
    const run = runs[runs.length - 1];
    const head = run?.[0];
    if (run && head && head.at === c.at && head.server === c.server && head.kind === c.kind) run.push(c);
    else runs.push([c]);
  }
  return runs.flatMap((run) => {
    const head = run[0];
    if (!head) return [];
    const split = run.length < GROUP_FROM ? run.map((c) => [c]) : [run];
    return split.map((group) => ({
      key: group.map((c) => c.id).join("-"),
      at: head.at,
      server: head.server,
      kind: head.kind,
      changes: group,
      unread: group.some((c) => c.unread),
    }));
  });
}

export function ChangesView() {
  const client = useQueryClient();
  const now = useNow(30_000);
  const query = useInfiniteQuery({
    queryKey: queryKeys.changes.feed(),
    queryFn: ({ signal, pageParam }) =>
      endpoints.changes.page({ limit: PAGE_SIZE, before: pageParam || undefined }, { signal }),
    initialPageParam: 0,
    getNextPageParam: (last) => last.nextBefore ?? undefined,
  });
  const changes = useMemo(() => query.data?.pages.flatMap((p) => p.changes) ?? [], [query.data]);
  const entries = useMemo(() => entriesOf(changes), [changes]);
  const unread = query.data?.pages[0]?.unread ?? 0;
  const newest = changes[0]?.id ?? 0;

  const markRead = useMutation({
    mutationFn: (upTo: number) => endpoints.changes.markRead({ upTo }),
    onSuccess: () => void client.invalidateQueries({ queryKey: queryKeys.changes.all }),
  });

  return (
    <div>
      <PageHeader
        title="Changes"
        subtitle="What tool servers did to the catalogue, newest first: tools added, over the cap, changed, gone, returned or excluded."
        actions={
          <div className="flex items-center gap-3">
            <span className="text-sm text-zinc-600" aria-live="polite">
              {unread === 0 ? "All read" : `${plural(unread, "unread change")}`}
            </span>
            <Button
              variant="primary"
              disabled={unread === 0 || newest === 0 || markRead.isPending}
              onClick={() => markRead.mutate(newest)}
            >
              Mark all read
            </Button>
          </div>
        }
      />
      {markRead.isError ? (
        <ErrorAlert className="mb-3">
          Could not mark the changes read: {errorWithCode(markRead.error)}
        </ErrorAlert>
      ) : null}
      {query.isPending ? (
        <Loading label="Loading changes…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load the changes: {errorWithCode(query.error)}</ErrorAlert>
      ) : entries.length === 0 ? (
        <EmptyState title="No changes yet">
          When a server adds, changes or drops a tool, it shows up here. Set catalogue.webhook in
          gatehouse.json to also receive each change as JSON.
        </EmptyState>
      ) : (
        <div className="space-y-3">
          <ol
            aria-label="Catalogue changes"
            className="divide-y divide-zinc-100 rounded-lg border border-zinc-200 bg-white shadow-xs"
          >
            {entries.map((entry) => (
              <ChangeEntry key={entry.key} entry={entry} now={now} />
            ))}
          </ol>
          {query.hasNextPage ? (
            <Button disabled={query.isFetchingNextPage} onClick={() => void query.fetchNextPage()}>
              {query.isFetchingNextPage ? "Loading…" : "Load older changes"}
            </Button>
          ) : (
            <p className="text-sm text-zinc-500">That is everything: {plural(changes.length, "change")}.</p>
          )}
        </div>
      )}
    </div>
  );
}

function ToolLink({ change }: { change: ChangeView }) {
  const name = change.localName ?? `${change.server}_${change.tool}`;
  return change.localName ? (
    <Link
      href={`/tools?tool=${encodeURIComponent(change.localName)}`}
      className="break-all font-mono text-[0.8125rem] text-indigo-700 hover:underline"
    >
      {name}
    </Link>
  ) : (
    // No catalogue row (over the cap, excluded): nothing to open; show the name as the server lists it.
    <span className="break-all font-mono text-[0.8125rem] text-zinc-800" title="not in the catalogue">
      {change.tool}
    </span>
  );
}

function ChangeEntry({ entry, now }: { entry: Entry; now: number }) {
  const [open, setOpen] = useState(false);
  const single = entry.changes.length === 1 ? entry.changes[0] : undefined;
  const shown = open ? entry.changes : entry.changes.slice(0, GROUP_PREVIEW);
  return (
    <li
      data-testid={`change-${entry.changes[0]?.id ?? entry.key}`}
      className={cx(
        "grid grid-cols-[1.25rem_9rem_8rem_8.5rem_minmax(0,1fr)] items-start gap-x-3 px-4 py-2.5 text-sm",
        entry.unread ? "bg-indigo-50/50" : "",
      )}
    >
      <span className="pt-1.5">
        {entry.unread ? (
          <>
            <span aria-hidden="true" className="block size-2 rounded-full bg-indigo-600" />
            <span className="sr-only">Unread</span>
          </>
        ) : null}
      </span>
      <time
        dateTime={entry.at}
        title={formatDateTime(entry.at)}
        className="pt-0.5 tabular-nums text-zinc-600"
      >
        {formatAge(entry.at, now)}
      </time>
      <span className="break-all pt-0.5 font-mono text-[0.8125rem] text-zinc-700">{entry.server}</span>
      <span className="flex flex-wrap gap-1">
        <Badge tone={changeKindTone[entry.kind]}>{changeKindLabel[entry.kind]}</Badge>
        {single?.detail?.riskier ? (
          <Badge tone="red" title="An annotation now reads as more dangerous">
            riskier
          </Badge>
        ) : null}
      </span>
      <div className="min-w-0 space-y-0.5">
        {single ? (
          <>
            <ToolLink change={single} />
            <p className="break-words text-zinc-700">{describeChange(single)}</p>
          </>
        ) : (
          <>
            <p className="text-zinc-800">
              <span className="font-medium">{plural(entry.changes.length, "tool")}</span>{" "}
              {groupText[entry.kind]}
            </p>
            <ul className="flex flex-wrap gap-x-3 gap-y-0.5">
              {shown.map((c) => (
                <li key={c.id}>
                  <ToolLink change={c} />
                </li>
              ))}
            </ul>
            {entry.changes.length > GROUP_PREVIEW ? (
              <button
                type="button"
                aria-expanded={open}
                onClick={() => setOpen((v) => !v)}
                className="text-xs font-medium text-indigo-700 hover:underline"
              >
                {open ? "Show fewer" : `Show all ${entry.changes.length}`}
              </button>
            ) : null}
          </>
        )}
      </div>
    </li>
  );
}
