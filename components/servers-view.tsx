"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { HealthPanel } from "@/components/health-panel";
import { ServerCap } from "@/components/server-cap";
import { ServerInspector } from "@/components/server-inspector";
import { ServerSignIn, SignInBanner, signInShowsLastError } from "@/components/server-sign-in";
import { ServerStateBadge } from "@/components/server-state-badge";
import { ServerSwitch } from "@/components/server-switch";
import { Button, EmptyState, ErrorAlert, Loading, PageHeader } from "@/components/ui";
import { useNow } from "@/components/use-now";
import type { ServerEntryView, ServerHistoryEntry, ServerView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatAge, formatDateTime, formatUntil, plural } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

export function ServersView() {
  const query = useQuery({
    queryKey: queryKeys.servers.list(),
    queryFn: ({ signal }) => endpoints.servers.list({ signal }),
    select: (data) => [...data.servers].sort((a, b) => a.name.localeCompare(b.name)),
  });

  return (
    <div>
      <PageHeader
        title="Servers"
        subtitle="MCP servers from gatehouse.json and the state of each connection."
      />
      <HealthPanel />
      <SignInBanner servers={query.data} />
      {query.isPending ? (
        <Loading label="Loading servers…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load servers: {errorWithCode(query.error)}</ErrorAlert>
      ) : query.data.length === 0 ? (
        <EmptyState title="No MCP servers are configured">
          Add servers to the <code className="font-mono">mcpServers</code> map in{" "}
          <code className="font-mono">gatehouse.json</code> and restart Gatehouse.
        </EmptyState>
      ) : (
        <ul className="grid gap-4 lg:grid-cols-2">
          {query.data.map((server) => (
            <li key={server.name} className="min-w-0">
              <ServerCard server={server} />
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function ServerCard({ server }: { server: ServerView }) {
  const client = useQueryClient();
  const now = useNow(1_000);
  const applyUpdate = (updated: ServerView) => {
    client.setQueryData<{ servers: ServerView[] }>(queryKeys.servers.list(), (old) =>
      old ? { servers: old.servers.map((s) => (s.name === updated.name ? updated : s)) } : old,
    );
    void client.invalidateQueries({ queryKey: queryKeys.servers.all });
  };
  const reconnect = useMutation({
    mutationFn: () => endpoints.servers.reconnect(server.name),
    onSuccess: ({ server: updated }) => applyUpdate(updated),
  });
  const { tools } = server;
  const titleId = `server-${server.name}-title`;

  return (
    <article
      id={`server-${server.name}`}
      data-testid={`server-${server.name}`}
      aria-labelledby={titleId}
      // A link to #server-<name> (the first-run steps) outlines the card it lands on.
      className="flex h-full scroll-mt-6 flex-col gap-3 rounded-lg border border-zinc-200 bg-white p-4 shadow-xs target:ring-2 target:ring-indigo-400"
    >
      <div className="flex items-start justify-between gap-3">
        <div className="min-w-0">
          <h2 id={titleId} className="break-all font-mono text-base font-semibold text-zinc-900">
            {server.name}
          </h2>
          <p className="mt-0.5 break-all text-sm text-zinc-500">
            <span className="font-medium text-zinc-700">{server.transport}</span>{" "}
            <span className="font-mono">{server.target}</span>
          </p>
        </div>
        <ServerStateBadge state={server.state} />
      </div>

      <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1 text-sm">
        {server.serverInfo ? (
          <>
            <dt className="text-zinc-500">Reports as</dt>
            <dd className="break-all">
              {server.serverInfo.name} {server.serverInfo.version}
            </dd>
          </>
        ) : null}
        {server.replica ? (
          <>
            <dt className="text-zinc-500">Runs on</dt>
            <dd className="break-all" data-testid="server-replica">
              {server.replica.label === null ? (
                <span className="text-amber-700">no replica right now: one takes it over within seconds</span>
              ) : (
                <>
                  replica <span className="font-mono">{server.replica.label}</span>
                  {server.replica.here ? " (this one)" : ""}
                </>
              )}
            </dd>
          </>
        ) : null}
        {server.protocolVersion ? (
          <>
            <dt className="text-zinc-500">Protocol</dt>
            <dd>
              MCP {server.protocolVersion}
              {server.protocolVersion >= "2026" ? " (stateless)" : ""}
            </dd>
          </>
        ) : null}
        {server.state === "ready" && server.readySince ? (
          <>
            <dt className="text-zinc-500">Ready since</dt>
            <dd>
              {formatDateTime(server.readySince)} ({formatAge(server.readySince, now)})
            </dd>
          </>
        ) : null}
        {server.nextRetryAt ? (
          <>
            <dt className="text-zinc-500">Next retry</dt>
            <dd>
              {formatUntil(server.nextRetryAt, now)} ({formatDateTime(server.nextRetryAt)})
            </dd>
          </>
        ) : null}
        <dt className="text-zinc-500">Tools</dt>
        <dd>
          {tools.listed} listed · {tools.enabled} enabled · {tools.proposed} proposed · {tools.disabled}{" "}
          disabled
          {tools.overCap > 0 ? ` · ${tools.overCap} over the cap` : ""}
        </dd>
      </dl>

      {!server.enabled ? <DarkNote name={server.name} entry={server.entry} /> : null}
      <ServerSwitch server={server} onUpdated={applyUpdate} />
      <ServerCap name={server.name} cap={server.cap} line={server.entry?.line ?? null} />

      <ServerSignIn server={server} now={now} onUpdated={applyUpdate} />

      {server.lastError && !signInShowsLastError(server) ? (
        <div className="rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm">
          <p className="font-medium text-rose-800">Last error</p>
          <p className="mt-0.5 whitespace-pre-wrap break-words text-rose-900">{server.lastError}</p>
        </div>
      ) : null}

      {server.refreshNote ? (
        <div className="rounded-md border border-amber-200 bg-amber-50 px-3 py-2 text-sm">
          <p className="font-medium text-amber-800">Re-listing paced</p>
          <p className="mt-0.5 break-words text-amber-900">
            {server.refreshNote}. The catalogue shows the latest list Gatehouse fetched.
          </p>
        </div>
      ) : null}

      {server.state === "failed" ? (
        <p className="text-sm text-rose-800">
          Gatehouse stopped retrying: this server crashed repeatedly, or refused in a way no retry can fix
          (see the last error). Fix the cause, then press Reconnect.
        </p>
      ) : null}

      {server.history.length > 0 ? (
        <details className="rounded-md border border-zinc-200 bg-zinc-50">
          <summary className="cursor-pointer select-none px-3 py-1.5 text-sm font-medium text-zinc-700">
            History ({plural(server.history.length, "change")})
          </summary>
          <HistoryList history={server.history} />
        </details>
      ) : null}

      {server.state === "ready" ? <ServerInspector name={server.name} /> : null}

      {server.stderrTail.length > 0 ? (
        <details className="group rounded-md border border-zinc-200 bg-zinc-50">
          <summary className="cursor-pointer select-none px-3 py-1.5 text-sm font-medium text-zinc-700">
            stderr ({plural(server.stderrTail.length, "line")})
          </summary>
          <pre className="max-h-64 overflow-auto whitespace-pre-wrap break-all border-t border-zinc-200 px-3 py-2 font-mono text-xs text-zinc-800">
            {server.stderrTail.join("\n")}
          </pre>
        </details>
      ) : null}

      <div className="mt-auto flex flex-wrap items-center gap-3 pt-1">
        {/* A server waiting for a sign-in has Connect: Reconnect would only find it waiting again. */}
        {signInShowsLastError(server) ? null : (
          <Button
            onClick={() => reconnect.mutate()}
            disabled={reconnect.isPending || !server.enabled}
            title={
              server.enabled
                ? "Drop the connection and dial again now"
                : "This server is not switched on in gatehouse.json"
            }
          >
            Reconnect
          </Button>
        )}
        {reconnect.isError ? (
          <ErrorAlert className="flex-1">{errorWithCode(reconnect.error)}</ErrorAlert>
        ) : null}
      </div>
    </article>
  );
}

/**
 * Why a server is dark, in the file's own terms: an entry without `enabled` (every entry pasted
 * from a desktop client's config) is off by default, one with `"enabled": false` is off on
 * purpose; with the place to change it, `<file> line <n>: "<name>": {`. The line shown is
 * rebuilt from the name, never read from the file: an entry written on one line may hold secrets.
 */
function DarkNote({ name, entry }: { name: string; entry: ServerEntryView | null }) {
  const code = (text: string) => <code className="font-mono">{text}</code>;
  if (entry === null) {
    return (
      <p className="text-sm text-zinc-600">
        Not switched on: its entry in gatehouse.json has no {code('"enabled": true')}.
      </p>
    );
  }
  const fileName = entry.file.split(/[\\/]/).pop() || entry.file;
  const place =
    entry.line === null ? `the ${JSON.stringify(name)} entry in ${entry.file}` : `this entry in ${fileName}`;
  return (
    <div className="text-sm text-zinc-600">
      {entry.enabled === false ? (
        <p>
          Switched off: {place} says {code('"enabled": false')}. Change it to {code("true")} for Gatehouse to
          dial this server.
        </p>
      ) : (
        <p>
          Not switched on: add {code('"enabled": true')} to {place}.
        </p>
      )}
      {entry.line === null ? null : (
        <p className="mt-1 break-all font-mono text-xs text-zinc-700">
          {entry.file} line {entry.line}: {JSON.stringify(name)}: {"{"}
        </p>
      )}
    </div>
  );
}

/**
 * State changes newest first. The first change of each Gatehouse run says "Gatehouse started",
 * and a divider sets the runs before it apart: the history is kept across restarts.
 */
function HistoryList({ history }: { history: ServerHistoryEntry[] }) {
  const newestFirst = [...history].reverse();
  return (
    <ol className="max-h-64 overflow-auto border-t border-zinc-200 px-3 py-2 text-xs">
      {newestFirst.flatMap((h, i) => {
        // An append-only log: equal entries can share a millisecond, so the index is in the key.
        const key = `${h.at}-${i}`;
        const row = (
          <li key={key} className="flex gap-2 py-0.5">
            <span className="shrink-0 tabular-nums text-zinc-500">{formatDateTime(h.at)}</span>
            <span className="shrink-0 font-medium text-zinc-800">{h.state}</span>
            {h.started ? <span className="shrink-0 font-medium text-sky-800">Gatehouse started</span> : null}
            {h.detail ? <span className="min-w-0 break-words text-zinc-600">{h.detail}</span> : null}
          </li>
        );
        if (!h.started || i === newestFirst.length - 1) return [row];
        return [
          row,
          <li
            key={`${key}-earlier`}
            className="mt-1 border-t border-dashed border-zinc-300 pt-1 text-zinc-500"
          >
            Earlier run
          </li>,
        ];
      })}
    </ol>
  );
}
