"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { type ReactNode, useState } from "react";
import {
  Badge,
  type BadgeTone,
  Button,
  EmptyState,
  ErrorAlert,
  Loading,
  Section,
  tableClass,
  tdClass,
  thClass,
} from "@/components/ui";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime, plural } from "@/lib/format";
import type { DeliveryView, NotificationChannelView, NotificationsView } from "@/lib/notification-types";
import { queryKeys } from "@/lib/query-keys";

/**
 * Under the calls family, so every live "call" event refreshes the log: a call's deliveries are
 * queued in the same transaction as the event that announces it. (Belongs in lib/query-keys.ts.)
 */
const NOTIFICATIONS_KEY = [...queryKeys.calls.all, "notifications"] as const;
/** Deliveries shown per channel before "Show all". */
const FIRST_DELIVERIES = 10;
/** A queued delivery is looked at again this long after its next try was due. */
const DUE_SLACK_MS = 1_000;

/**
 * While something is queued, the log is fetched again just after the earliest next try is due:
 * its outcome comes without any event of its own. Nothing queued, nothing scheduled.
 */
function untilNextTry(view: NotificationsView | undefined): number | false {
  let earliest = Number.POSITIVE_INFINITY;
  for (const channel of view?.channels ?? []) {
    for (const delivery of channel.deliveries) {
      if (delivery.status !== "queued" || !delivery.nextAttemptAt) continue;
      earliest = Math.min(earliest, Date.parse(delivery.nextAttemptAt));
    }
  }
  if (!Number.isFinite(earliest)) return false;
  return Math.max(DUE_SLACK_MS, earliest - Date.now() + DUE_SLACK_MS);
}

/**
 * Settings' "Notifications" (owners): each webhook and the email channel as configured (name,
 * where it goes without any secret, format, events, signed) and its last deliveries (status,
 * time, tries, the answer or error), from `GET /api/notifications`.
 */
export function NotificationsSection() {
  const query = useQuery({
    queryKey: NOTIFICATIONS_KEY,
    queryFn: ({ signal }) => endpoints.notifications.get({ signal }),
    refetchInterval: (q) => untilNextTry(q.state.data),
  });

  return (
    <Section
      title="Notifications"
      description="Where Gatehouse tells reviewers about calls, and how each message fared. Set in gatehouse.json."
    >
      {query.isPending ? (
        <Loading label="Loading notifications…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load notifications: {errorWithCode(query.error)}</ErrorAlert>
      ) : query.data.channels.length === 0 ? (
        <EmptyState title="No webhooks or email configured">
          Add a <code className="font-mono">notifications</code> section to gatehouse.json to reach reviewers
          in chat, by webhook or by email; the README's "Reaching reviewers" section shows how.
        </EmptyState>
      ) : (
        <div className="space-y-6">
          <PublicUrl url={query.data.publicUrl} />
          {query.data.channels.map((channel) => (
            <Channel key={`${channel.channel}:${channel.name}`} channel={channel} />
          ))}
        </div>
      )}
    </Section>
  );
}

function PublicUrl({ url }: { url: string | null }) {
  if (url) {
    return (
      <p className="break-all text-sm text-zinc-600">
        Links in messages start with <span className="font-mono text-zinc-800">{url}</span>.
      </p>
    );
  }
  return (
    <p role="note" className="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200">
      Messages carry no link to the call: set <code className="font-mono">notifications.publicUrl</code> (or
      the <code className="font-mono">GATEHOUSE_PUBLIC_ORIGIN</code> environment variable) to the address
      reviewers open Gatehouse at.
    </p>
  );
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <div className="flex min-w-0 flex-wrap items-baseline gap-x-2 gap-y-1">
      <dt className="text-zinc-500">{term}</dt>
      <dd className="min-w-0 text-zinc-800">{children}</dd>
    </div>
  );
}

function Channel({ channel }: { channel: NotificationChannelView }) {
  const [all, setAll] = useState(false);
  const shown = all ? channel.deliveries : channel.deliveries.slice(0, FIRST_DELIVERIES);
  const label = channel.channel === "email" ? "Email" : `Webhook ${channel.name}`;
  return (
    <article
      aria-label={label}
      data-testid={`channel-${channel.channel}-${channel.name}`}
      className="rounded-lg border border-zinc-200 bg-white shadow-xs"
    >
      <div className="space-y-2 border-b border-zinc-100 px-4 py-3">
        <div className="flex flex-wrap items-center gap-2">
          <h3 className="min-w-0 break-all font-mono text-base font-semibold text-zinc-900">
            {channel.channel === "email" ? "Email to reviewers" : channel.name}
          </h3>
          {channel.channel === "webhook" ? <Badge tone="slate">webhook</Badge> : null}
          {channel.channel === "webhook" ? (
            channel.signed ? (
              <Badge tone="green" title="Each delivery carries a Gatehouse-Signature header">
                signed
              </Badge>
            ) : (
              <Badge tone="grey" title="No secret: receivers cannot check where a delivery came from">
                unsigned
              </Badge>
            )
          ) : null}
        </div>
        <dl className="grid gap-x-6 gap-y-1 text-sm sm:grid-cols-[auto_auto_1fr]">
          <Fact term="Target">
            <span className="break-all font-mono">{channel.target}</span>
          </Fact>
          <Fact term="Format">
            <span className="font-mono">{channel.format}</span>
          </Fact>
          <Fact term="Events">
            <span className="flex flex-wrap gap-1">
              {channel.events.map((event) => (
                <code key={event} className="rounded bg-zinc-100 px-1 py-px font-mono text-xs text-zinc-700">
                  {event}
                </code>
              ))}
            </span>
          </Fact>
        </dl>
      </div>
      {channel.deliveries.length === 0 ? (
        <p className="px-4 py-3 text-sm text-zinc-500">Nothing sent yet.</p>
      ) : (
        <div className="overflow-x-auto">
          <table className={tableClass} aria-label={`Last deliveries to ${channel.name}`}>
            <thead className="bg-zinc-50">
              <tr>
                <th scope="col" className={thClass}>
                  Status
                </th>
                <th scope="col" className={thClass}>
                  Event
                </th>
                <th scope="col" className={thClass}>
                  Queued
                </th>
                <th scope="col" className={thClass}>
                  Tries
                </th>
                <th scope="col" className={thClass}>
                  Outcome
                </th>
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100">
              {shown.map((delivery) => (
                <DeliveryRow key={delivery.id} delivery={delivery} />
              ))}
            </tbody>
          </table>
          {channel.deliveries.length > FIRST_DELIVERIES ? (
            <div className="border-t border-zinc-100 px-4 py-2">
              <Button
                className="px-2 py-0.5 text-xs"
                onClick={() => setAll((open) => !open)}
                aria-expanded={all}
              >
                {all ? `Show the last ${FIRST_DELIVERIES}` : `Show all ${channel.deliveries.length}`}
              </Button>
            </div>
          ) : null}
        </div>
      )}
    </article>
  );
}

const STATUS_TONES: Record<DeliveryView["status"], BadgeTone> = {
  queued: "blue",
  delivered: "green",
  failed: "red",
};

/** "HTTP 204 at …", "gave up at …: timed out after 5 s", "next try at … (last: HTTP 503)". */
function outcomeText(delivery: DeliveryView): string {
  const answer = delivery.lastStatus !== null ? `HTTP ${delivery.lastStatus}` : null;
  const at = delivery.finishedAt ? ` at ${formatDateTime(delivery.finishedAt)}` : "";
  const why = delivery.lastError ?? answer;
  switch (delivery.status) {
    case "delivered":
      return `${answer ?? "delivered"}${at}`;
    case "failed":
      return `gave up${at}${why ? `: ${why}` : ""}`;
    case "queued":
      return `${delivery.nextAttemptAt ? `next try at ${formatDateTime(delivery.nextAttemptAt)}` : "waiting"}${
        why ? ` (last: ${why})` : ""
      }`;
  }
}

function DeliveryRow({ delivery }: { delivery: DeliveryView }) {
  return (
    <tr data-testid={`delivery-${delivery.deliveryId}`}>
      <td className={tdClass}>
        <Badge tone={STATUS_TONES[delivery.status]}>{delivery.status}</Badge>
      </td>
      <td className={`${tdClass} whitespace-nowrap`}>
        <span className="font-mono text-xs text-zinc-800">{delivery.event}</span>
        {delivery.recipient ? (
          <span className="break-all text-xs text-zinc-600"> to {delivery.recipient}</span>
        ) : null}
        {delivery.digestOf ? (
          <span className="break-all text-xs text-zinc-600">
            {" "}
            · digest of {delivery.digestOf}&apos;s calls
          </span>
        ) : null}
        {delivery.callId ? (
          <>
            {" "}
            <Link
              href={`/activity/${encodeURIComponent(delivery.callId)}`}
              className="text-xs font-medium text-indigo-700 hover:underline"
              aria-label={`Story of call ${delivery.callId}`}
            >
              its call
            </Link>
          </>
        ) : null}
      </td>
      <td className={`${tdClass} whitespace-nowrap tabular-nums text-zinc-600`}>
        {formatDateTime(delivery.createdAt)}
      </td>
      <td className={`${tdClass} tabular-nums text-zinc-600`}>{plural(delivery.attempts, "try", "tries")}</td>
      <td className={`${tdClass} min-w-64 break-words text-zinc-700`}>{outcomeText(delivery)}</td>
    </tr>
  );
}
