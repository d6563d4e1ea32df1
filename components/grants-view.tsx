"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useEffect, useState } from "react";
import { Age } from "@/components/age";
import { usesText } from "@/components/grant-text";
import { JsonView } from "@/components/json-view";
import { Button, cx, EmptyState, ErrorAlert, Loading, PageHeader, Section, thClass } from "@/components/ui";
import { useNow } from "@/components/use-now";
import type { GrantListView, GrantView } from "@/lib/api-types";
import { grantScopeText } from "@/lib/decision-text";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime, formatUntil } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

const tdClass = "px-3 py-2.5 align-top";

/**
 * `/grants`: what reviewers allowed in advance while approving. Live grants first (who, which
 * tool, with which arguments, made by whom, how long and how many calls are left, Revoke with a
 * confirmation), then ended ones with why they ended. Live "call" events refresh it: a covered
 * call adds a use, and may use a grant up.
 */
export function GrantsView() {
  const query = useQuery({
    queryKey: queryKeys.grants.list(),
    queryFn: ({ signal }) => endpoints.grants.list({ signal }),
  });
  const live = query.data?.grants.filter((grant) => grant.state === "live") ?? [];
  const ended = query.data?.grants.filter((grant) => grant.state === "ended") ?? [];
  useRefetchAtNextExpiry(live);

  return (
    <div className="space-y-10">
      <div>
        <PageHeader
          title="Grants"
          subtitle="Calls allowed in advance while approving one: until a grant ends, the same agent's matching calls run without review. The list updates live."
        />
        {query.isPending ? (
          <Loading label="Loading grants…" />
        ) : query.isError ? (
          <ErrorAlert>Could not load grants: {errorWithCode(query.error)}</ErrorAlert>
        ) : query.data.grants.length === 0 ? (
          <EmptyState title="No grants">
            <p className="mx-auto max-w-xl">
              Whoever approves a call can make one: tick{" "}
              <span className="font-medium text-zinc-700">“Approve and allow again…”</span> next to Approve to
              let the same agent call the same tool again without review — with those exact arguments or with
              any — for 15 minutes, an hour or a working day, optionally at most so many times. Grants end by
              themselves; any reviewer or owner can revoke one here.
            </p>
          </EmptyState>
        ) : (
          <Section
            title="Live grants"
            description="Newest first. Each covers calls until it expires, is used up or is revoked."
          >
            {live.length === 0 ? (
              <EmptyState title="No live grants">Every grant below has ended.</EmptyState>
            ) : (
              <GrantTable grants={live} label="Live grants" />
            )}
          </Section>
        )}
      </div>
      {ended.length > 0 ? (
        <Section title="Ended grants" description="Recently ended, with why. They cover nothing any more.">
          <GrantTable grants={ended} label="Ended grants" />
        </Section>
      ) : null}
    </div>
  );
}

function GrantTable({ grants, label }: { grants: GrantView[]; label: string }) {
  const live = grants[0]?.state === "live";
  return (
    <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
      <table aria-label={label} className="w-full min-w-[58rem] table-fixed text-left text-sm">
        <colgroup>
          <col className="w-[11rem]" />
          <col />
          <col className="w-[10rem]" />
          <col className={live ? "w-[9rem]" : "w-[15rem]"} />
          <col className="w-[7.5rem]" />
          {live ? <col className="w-[8.5rem]" /> : null}
        </colgroup>
        <thead className="border-b border-zinc-200 bg-zinc-50">
          <tr>
            <th scope="col" className={thClass}>
              Requester
            </th>
            <th scope="col" className={thClass}>
              Tool and arguments
            </th>
            <th scope="col" className={thClass}>
              Made by
            </th>
            <th scope="col" className={thClass}>
              {live ? "Expires" : "Ended"}
            </th>
            <th scope="col" className={thClass}>
              Uses
            </th>
            {live ? (
              <th scope="col" className={thClass}>
                <span className="sr-only">Action</span>
              </th>
            ) : null}
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-100">
          {grants.map((grant) => (
            <GrantRow key={grant.id} grant={grant} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function GrantRow({ grant }: { grant: GrantView }) {
  const live = grant.state === "live";
  return (
    <tr data-testid={`grant-${grant.id}`} className={live ? undefined : "text-zinc-600"}>
      <td className={tdClass}>
        <span className="block break-all font-medium text-zinc-900">{grant.requester.name}</span>
        <span className="block text-xs text-zinc-500">{grant.requester.kind}</span>
      </td>
      <td className={cx(tdClass, "min-w-0")}>
        <span className="block break-all font-mono text-[0.8125rem] font-medium text-zinc-900">
          {grant.tool}
        </span>
        <span className="block text-xs text-zinc-600">with {grantScopeText[grant.scope]}</span>
        {grant.scope === "arguments" && grant.arguments ? (
          <JsonView value={grant.arguments} className="mt-1.5 max-h-48" />
        ) : null}
      </td>
      <td className={tdClass}>
        <span className="block break-all text-zinc-800">{grant.createdBy}</span>
        <span className="block text-xs text-zinc-500">
          <Age at={grant.createdAt} /> ·{" "}
          <Link
            href={`/activity/${encodeURIComponent(grant.callId)}`}
            className="font-medium text-indigo-700 hover:underline"
            aria-label={`The approved call grant ${grant.id} was made with`}
          >
            the call
          </Link>
        </span>
      </td>
      <td className={tdClass}>
        {live ? (
          <ExpiresIn at={grant.expiresAt} />
        ) : (
          <>
            <span className="block break-words text-zinc-800">{grant.endReason ?? "ended"}</span>
            {grant.endedAt ? (
              <span className="block text-xs text-zinc-500">
                <time dateTime={grant.endedAt}>{formatDateTime(grant.endedAt)}</time>
              </span>
            ) : null}
          </>
        )}
      </td>
      <td className={tdClass}>
        <span className="block tabular-nums text-zinc-800">{usesText(grant)}</span>
        {grant.lastUsedAt ? (
          <span className="block text-xs text-zinc-500">
            last <Age at={grant.lastUsedAt} />
          </span>
        ) : null}
      </td>
      {live ? (
        <td className={cx(tdClass, "text-right")}>
          <RevokeButton grant={grant} />
        </td>
      ) : null}
    </tr>
  );
}

/**
 * Expiry ends a grant without any event: the list is fetched again the moment the first live one
 * expires, so it moves to "Ended" without a reload.
 */
function useRefetchAtNextExpiry(live: GrantView[]): void {
  const client = useQueryClient();
  const next = live.reduce<string | null>(
    (min, g) => (min === null || g.expiresAt < min ? g.expiresAt : min),
    null,
  );
  useEffect(() => {
    if (next === null) return;
    // A little after the moment, so the server sees it expired too; timers cap at about 24 days.
    const ms = Math.min(Math.max(Date.parse(next) - Date.now() + 500, 0), 2 ** 31 - 1);
    const timer = setTimeout(() => void client.invalidateQueries({ queryKey: queryKeys.grants.all }), ms);
    return () => clearTimeout(timer);
  }, [client, next]);
}

/** "in 54 min", ticking (in minutes, so every 15 s is enough), with the exact time in the tooltip. */
function ExpiresIn({ at }: { at: string }) {
  const now = useNow(15_000);
  const text = formatUntil(at, now);
  return (
    <span className="block">
      <time dateTime={at} title={`Expires at ${formatDateTime(at)}`} className="tabular-nums text-zinc-800">
        {text === "now" ? "expiring…" : text}
      </time>
      <span className="block text-xs text-zinc-500">{formatDateTime(at)}</span>
    </span>
  );
}

/** Revoke asks once more before it ends the grant; the list shows it ended at once. */
function RevokeButton({ grant }: { grant: GrantView }) {
  const client = useQueryClient();
  const [asking, setAsking] = useState(false);
  // After "Keep", focus goes back to Revoke rather than to the page.
  const [keptBack, setKeptBack] = useState(false);
  const revoke = useMutation({
    mutationFn: () => endpoints.grants.revoke(grant.id),
    onSuccess: ({ grant: ended }) => {
      client.setQueryData<GrantListView>(queryKeys.grants.list(), (old) =>
        old ? { grants: old.grants.map((g) => (g.id === ended.id ? ended : g)) } : old,
      );
      void client.invalidateQueries({ queryKey: queryKeys.grants.list() });
    },
  });

  if (!asking) {
    return (
      <Button
        variant="danger"
        className="px-2 py-0.5 text-xs"
        aria-label={`Revoke the grant for ${grant.requester.name} on ${grant.tool} with ${grantScopeText[grant.scope]}, made ${formatDateTime(grant.createdAt)}`}
        autoFocus={keptBack}
        onClick={() => setAsking(true)}
      >
        Revoke
      </Button>
    );
  }
  return (
    <fieldset className="space-y-1.5 text-left" aria-label="Confirm revoking">
      <p className="text-xs text-zinc-700">Their next such call waits for review again.</p>
      <div className="flex flex-wrap gap-1.5">
        <Button
          variant="danger"
          className="px-2 py-0.5 text-xs"
          disabled={revoke.isPending}
          autoFocus
          onClick={() => revoke.mutate()}
        >
          Yes, revoke
        </Button>
        <Button
          className="px-2 py-0.5 text-xs"
          disabled={revoke.isPending}
          onClick={() => {
            setAsking(false);
            setKeptBack(true);
          }}
        >
          Keep
        </Button>
      </div>
      {revoke.isError ? <ErrorAlert className="text-xs">{errorWithCode(revoke.error)}</ErrorAlert> : null}
    </fieldset>
  );
}
