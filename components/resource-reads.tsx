"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import { Age } from "@/components/age";
import { Badge, Button, EmptyState, ErrorAlert, Loading, Section, thClass } from "@/components/ui";
import { VisibleText } from "@/components/visible-text";
import type { ResourceReadView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime, formatDuration } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

const PAGE_SIZE = 50;

/**
 * Agents' resource reads and prompt gets through `/mcp`, newest first, with "Load older reads"
 * paging: each read or get passed to its server and each refusal, as audited. Live: each read's event refreshes the
 * loaded pages (at most once a second). URIs and prompt names are an agent's text: shown as
 * text, hidden characters marked.
 */
export function ResourceReads() {
  const query = useInfiniteQuery({
    queryKey: queryKeys.resourceReads.list(),
    queryFn: ({ pageParam, signal }) =>
      endpoints.resourceReads.page({ limit: PAGE_SIZE, before: pageParam ?? undefined }, { signal }),
    initialPageParam: null as number | null,
    getNextPageParam: (last) => last.nextBefore,
  });
  const rows = query.data?.pages.flatMap((page) => page.reads) ?? [];

  return (
    <Section
      title="Resource reads"
      description="Resources agents read and prompts they got through /mcp, newest first: each one passed to its server and each refusal. The filters above are for calls only."
    >
      {query.isPending ? (
        <Loading label="Loading resource reads…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load resource reads: {errorWithCode(query.error)}</ErrorAlert>
      ) : rows.length === 0 ? (
        <EmptyState title="No resource reads yet">
          Agents read resources and get prompts through /mcp; each read, get and refusal is listed here.
        </EmptyState>
      ) : (
        <div className="space-y-3">
          <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
            <table aria-label="Resource reads" className="w-full min-w-[56rem] table-fixed text-left text-sm">
              <colgroup>
                <col className="w-[11rem]" />
                <col className="w-[9rem]" />
                <col className="w-[8rem]" />
                <col />
                <col className="w-[6.5rem]" />
                <col className="w-[15rem]" />
              </colgroup>
              <thead className="border-b border-zinc-200 bg-zinc-50">
                <tr>
                  <th scope="col" className={thClass}>
                    Time
                  </th>
                  <th scope="col" className={thClass}>
                    Agent
                  </th>
                  <th scope="col" className={thClass}>
                    Server
                  </th>
                  <th scope="col" className={thClass}>
                    URI or prompt
                  </th>
                  <th scope="col" className={thClass}>
                    Result
                  </th>
                  <th scope="col" className={thClass}>
                    Detail
                  </th>
                </tr>
              </thead>
              <tbody className="divide-y divide-zinc-100">
                {rows.map((read) => (
                  <ReadRow key={read.id} read={read} />
                ))}
              </tbody>
            </table>
          </div>
          {query.hasNextPage ? (
            <Button disabled={query.isFetchingNextPage} onClick={() => void query.fetchNextPage()}>
              {query.isFetchingNextPage ? "Loading…" : "Load older reads"}
            </Button>
          ) : null}
        </div>
      )}
    </Section>
  );
}

function ReadRow({ read }: { read: ResourceReadView }) {
  return (
    <tr data-testid={`resource-read-${read.id}`} className="hover:bg-zinc-50/60">
      <td className="px-3 py-2 align-top text-zinc-700">
        <span className="block tabular-nums">{formatDateTime(read.at)}</span>
        <span className="block text-xs text-zinc-500">
          <Age at={read.at} />
        </span>
      </td>
      <td className="px-3 py-2 align-top">
        <span className="block break-all text-zinc-800">{read.agent}</span>
      </td>
      <td className="px-3 py-2 align-top">
        {read.server ? (
          <span className="block break-all font-mono text-[0.8125rem] text-zinc-800">{read.server}</span>
        ) : (
          <span className="text-zinc-400" title="The URI named no server">
            —
          </span>
        )}
      </td>
      <td className="px-3 py-2 align-top">
        {read.kind === "prompt" ? <Badge tone="grey">prompt</Badge> : null}
        <span className="block whitespace-pre-wrap break-all font-mono text-[0.8125rem] text-zinc-800">
          <VisibleText text={read.uri} />
        </span>
      </td>
      <td className="px-3 py-2 align-top">
        {read.allowed ? (
          <Badge tone="green">{read.kind === "prompt" ? "got" : "read"}</Badge>
        ) : (
          <Badge tone="grey">refused</Badge>
        )}
      </td>
      <td className="px-3 py-2 align-top text-zinc-700">
        <span className="block break-words">{read.detail ?? "—"}</span>
        {read.durationMs !== null ? (
          <span className="block text-xs tabular-nums text-zinc-500">{formatDuration(read.durationMs)}</span>
        ) : null}
      </td>
    </tr>
  );
}
