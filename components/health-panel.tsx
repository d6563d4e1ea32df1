"use client";

import { useQuery } from "@tanstack/react-query";
import { ErrorAlert } from "@/components/ui";
import type { HealthPanelView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatCount, formatDuration } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

/** Servers shown with their own row of bars; the quieter ones are summed up below them. */
const SERVER_ROWS = 8;

/**
 * The health panel above the Servers page's cards: calls waiting, reviewers' decisions in the
 * last hour, failed deliveries, the time to a reviewer's decision per hour (p50 and p95) and
 * calls per server per hour over the last 24 hours. Live: every call event refetches it (under
 * `calls.all`, paced like the other call views).
 */
export function HealthPanel() {
  const query = useQuery({
    queryKey: queryKeys.calls.health(),
    queryFn: ({ signal }) => endpoints.servers.health({ signal }),
  });
  if (query.isError)
    return <ErrorAlert>Could not load the health panel: {errorWithCode(query.error)}</ErrorAlert>;
  const panel = query.data;
  return (
    <section
      aria-label="Health"
      data-testid="health-panel"
      className="mb-6 grid gap-4 rounded-lg border border-zinc-200 bg-white p-4 shadow-xs lg:grid-cols-[auto_1fr_1fr]"
    >
      <dl className="grid grid-cols-3 gap-4 lg:grid-cols-1">
        <Figure
          label="Waiting now"
          value={panel?.pendingNow}
          href="/approvals"
          warn={(panel?.pendingNow ?? 0) > 0}
        />
        <Figure label="Decided, last hour" value={panel?.decisionsLastHour} />
        <Figure
          label="Failed deliveries, 24 h"
          value={panel?.failedDeliveries}
          warn={(panel?.failedDeliveries ?? 0) > 0}
        />
      </dl>
      {panel ? (
        <>
          <DecisionChart panel={panel} />
          <CallsPerServer panel={panel} />
        </>
      ) : (
        <p className="text-sm text-zinc-500 lg:col-span-2">Loading…</p>
      )}
    </section>
  );
}

function Figure({
  label,
  value,
  href,
  warn,
}: {
  label: string;
  value: number | undefined;
  href?: string;
  warn?: boolean;
}) {
  const text = value === undefined ? "…" : formatCount(value);
  return (
    <div className="min-w-0">
      <dt className="text-xs font-medium uppercase tracking-wide text-zinc-500">{label}</dt>
      <dd className={`text-2xl font-semibold tabular-nums ${warn ? "text-amber-700" : "text-zinc-900"}`}>
        {href ? (
          <a href={href} className="hover:underline">
            {text}
          </a>
        ) : (
          text
        )}
      </dd>
    </div>
  );
}

/** The hour labels under a chart: the first, the middle and the last (local time). */
function HourAxis({ hours }: { hours: string[] }) {
  const label = (iso: string | undefined) =>
    iso ? new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "";
  return (
    <div className="mt-1 flex justify-between text-[11px] text-zinc-500">
      <span>{label(hours[0])}</span>
      <span>{label(hours[Math.floor(hours.length / 2)])}</span>
      <span>now</span>
    </div>
  );
}

function DecisionChart({ panel }: { panel: HealthPanelView }) {
  const points = panel.timeToDecision;
  const decided = points.reduce((n, p) => n + p.decisions, 0);
  const top = Math.max(0, ...points.map((p) => p.p95 ?? 0));
  const width = 240;
  const height = 64;
  const x = (i: number) => (points.length <= 1 ? 0 : (i / (points.length - 1)) * width);
  const y = (s: number) => height - (top === 0 ? 0 : (s / top) * (height - 4)) - 2;
  const line = (pick: (p: (typeof points)[number]) => number | null) =>
    points.flatMap((p, i) => {
      const v = pick(p);
      return v === null ? [] : [`${x(i).toFixed(1)},${y(v).toFixed(1)}`];
    });
  const p50 = line((p) => p.p50);
  const p95 = line((p) => p.p95);
  const latest = [...points].reverse().find((p) => p.p50 !== null);
  return (
    <figure className="min-w-0">
      <figcaption className="text-xs font-medium uppercase tracking-wide text-zinc-500">
        Time to a reviewer's decision, 24 h
      </figcaption>
      {decided === 0 ? (
        <p className="mt-3 text-sm text-zinc-500">No reviewer decided a call in the last 24 hours.</p>
      ) : (
        <>
          <p className="text-sm text-zinc-700">
            {latest ? (
              <>
                latest hour with decisions: p50 <strong>{formatDuration((latest.p50 ?? 0) * 1000)}</strong>,
                p95 <strong>{formatDuration((latest.p95 ?? 0) * 1000)}</strong>
              </>
            ) : null}{" "}
            <span className="text-zinc-500">({formatCount(decided)} decided)</span>
          </p>
          <svg
            viewBox={`-4 -4 ${width + 8} ${height + 8}`}
            className="mt-1 h-20 w-full"
            role="img"
            aria-label={`p50 and p95 time to decision per hour; the highest p95 is ${formatDuration(top * 1000)}`}
            preserveAspectRatio="none"
          >
            <line x1={0} x2={width} y1={height} y2={height} className="stroke-zinc-200" strokeWidth={1} />
            <Series points={p95} className="stroke-amber-500" />
            <Series points={p50} className="stroke-indigo-600" />
          </svg>
          <HourAxis hours={panel.hours} />
          <p className="mt-1 flex gap-3 text-[11px] text-zinc-500">
            <span>
              <span className="mr-1 inline-block h-0.5 w-3 bg-indigo-600 align-middle" />
              p50
            </span>
            <span>
              <span className="mr-1 inline-block h-0.5 w-3 bg-amber-500 align-middle" />
              p95 (top: {formatDuration(top * 1000)})
            </span>
          </p>
        </>
      )}
    </figure>
  );
}

/**
 * A polyline; an hour that stands alone (a line needs two points) is a short dash, not a dot:
 * the chart stretches to its box, which would draw a dot as an ellipse.
 */
function Series({ points, className }: { points: string[]; className: string }) {
  if (points.length === 1) {
    const [x, y] = (points[0] ?? "0,0").split(",").map(Number);
    const at = Math.max(0, (x ?? 0) - 8);
    return (
      <line
        x1={at}
        x2={at + 8}
        y1={y}
        y2={y}
        className={className}
        strokeWidth={3}
        strokeLinecap="round"
        vectorEffect="non-scaling-stroke"
      />
    );
  }
  return (
    <polyline
      points={points.join(" ")}
      fill="none"
      className={className}
      strokeWidth={2}
      vectorEffect="non-scaling-stroke"
      strokeLinejoin="round"
    />
  );
}

function CallsPerServer({ panel }: { panel: HealthPanelView }) {
  const rows = panel.callsPerServer
    .map((s) => ({ ...s, total: s.counts.reduce((a, b) => a + b, 0) }))
    .sort((a, b) => b.total - a.total || a.server.localeCompare(b.server));
  const shown = rows.slice(0, SERVER_ROWS);
  const rest = rows.slice(SERVER_ROWS);
  const top = Math.max(1, ...shown.flatMap((r) => r.counts));
  return (
    <figure className="min-w-0">
      <figcaption className="text-xs font-medium uppercase tracking-wide text-zinc-500">
        Calls per server per hour, 24 h
      </figcaption>
      {rows.length === 0 ? (
        <p className="mt-3 text-sm text-zinc-500">No calls in the last 24 hours.</p>
      ) : (
        <ul className="mt-2 space-y-1.5">
          {shown.map((r) => (
            <li key={r.server} className="grid grid-cols-[minmax(0,8rem)_1fr_auto] items-end gap-2 text-xs">
              <span className="truncate font-mono text-zinc-800" title={r.server}>
                {r.server}
              </span>
              <span
                className="flex h-5 items-end gap-px"
                role="img"
                aria-label={`${r.server}: ${formatCount(r.total)} calls in 24 hours`}
              >
                {r.counts.map((n, i) => (
                  <span
                    // biome-ignore lint/suspicious/noArrayIndexKey: one bar per hour, in order.
                    key={i}
                    className={n === 0 ? "h-px flex-1 bg-zinc-200" : "flex-1 rounded-t-sm bg-indigo-500"}
                    style={n === 0 ? undefined : { height: `${Math.max(8, (n / top) * 100)}%` }}
                    title={`${formatCount(n)} calls`}
                  />
                ))}
              </span>
              <span className="tabular-nums text-zinc-600">{formatCount(r.total)}</span>
            </li>
          ))}
          {rest.length > 0 ? (
            <li className="text-xs text-zinc-500">
              and {rest.length} more servers: {formatCount(rest.reduce((n, r) => n + r.total, 0))} calls
            </li>
          ) : null}
        </ul>
      )}
      {rows.length > 0 ? <HourAxis hours={panel.hours} /> : null}
    </figure>
  );
}
