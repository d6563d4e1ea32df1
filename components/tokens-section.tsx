"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import {
  Badge,
  Button,
  EmptyState,
  ErrorAlert,
  inputClass,
  Loading,
  Section,
  TextField,
  tableClass,
  tdClass,
  thClass,
} from "@/components/ui";
import { CreateTokenBody, type TokenActivityView, type TokenView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime, plural } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

type TokensData = { tokens: TokenView[]; toolSets: string[]; activity: Record<string, TokenActivityView> };

function upsert(old: TokensData | undefined, token: TokenView): TokensData | undefined {
  return old ? { ...old, tokens: [...old.tokens.filter((t) => t.name !== token.name), token] } : old;
}

/** What a token without a tool set may use. */
const ALL_TOOLS = "All enabled tools";

export function TokensSection() {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: queryKeys.tokens.list(),
    queryFn: ({ signal }) => endpoints.tokens.list({ signal }),
    select: (data) => ({
      tokens: [...data.tokens].sort((a, b) => a.name.localeCompare(b.name)),
      toolSets: data.toolSets,
      activity: data.activity,
    }),
    // Activity moves with every call; a minute-old count is fresh enough for this page.
    refetchInterval: 60_000,
  });
  const move = useMutation({
    mutationFn: (v: { name: string; toolSet: string | null }) =>
      endpoints.tokens.update(v.name, { toolSet: v.toolSet }),
    onSuccess: ({ token }) => {
      client.setQueryData<TokensData>(queryKeys.tokens.list(), (old) => upsert(old, token));
      void client.invalidateQueries({ queryKey: queryKeys.tokens.all });
    },
  });
  const revoke = useMutation({
    mutationFn: (name: string) => endpoints.tokens.revoke(name),
    onSuccess: ({ token }) => {
      client.setQueryData<TokensData>(queryKeys.tokens.list(), (old) => upsert(old, token));
      void client.invalidateQueries({ queryKey: queryKeys.tokens.all });
    },
  });

  return (
    <Section
      title="Agent tokens"
      description="Bearer tokens for agents. An agent may list and call the enabled tools of its tool set (all of them without one), never approve."
    >
      {query.isPending ? (
        <Loading label="Loading tokens…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load tokens: {errorWithCode(query.error)}</ErrorAlert>
      ) : query.data.tokens.length === 0 ? (
        <EmptyState title="No agent tokens yet">Create one below and give it to your agent.</EmptyState>
      ) : (
        <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
          <table className={tableClass} aria-label="Agent tokens">
            <thead className="bg-zinc-50">
              <tr>
                <th scope="col" className={thClass}>
                  Name
                </th>
                <th scope="col" className={thClass}>
                  Tool set
                </th>
                <th scope="col" className={thClass}>
                  Created
                </th>
                <th scope="col" className={thClass}>
                  Last used
                </th>
                <th scope="col" className={thClass}>
                  Activity
                </th>
                <th scope="col" className={thClass}>
                  Status
                </th>
                <th scope="col" className={thClass}>
                  <span className="sr-only">Action</span>
                </th>
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100">
              {query.data.tokens.map((token) => (
                <tr key={token.name} data-testid={`token-${token.name}`}>
                  <td className={`${tdClass} break-all font-mono text-zinc-900`}>{token.name}</td>
                  <td className={`${tdClass} text-zinc-700`}>
                    <ToolSetCell
                      token={token}
                      toolSets={query.data.toolSets}
                      busy={move.isPending && move.variables?.name === token.name}
                      onMove={(toolSet) => move.mutate({ name: token.name, toolSet })}
                    />
                  </td>
                  <td className={`${tdClass} text-zinc-600`}>
                    <span className="whitespace-nowrap">{formatDateTime(token.createdAt)}</span>
                    {token.createdBy ? (
                      <span className="block text-xs text-zinc-500">by {token.createdBy}</span>
                    ) : null}
                  </td>
                  <td className={`${tdClass} whitespace-nowrap text-zinc-600`}>
                    {token.lastUsedAt ? formatDateTime(token.lastUsedAt) : "Never"}
                  </td>
                  <td className={`${tdClass} text-zinc-600`}>
                    <ActivityCell activity={query.data.activity[token.name]} />
                  </td>
                  <td className={`${tdClass} whitespace-nowrap`}>
                    {token.revokedAt ? (
                      <>
                        <Badge tone="red">revoked</Badge>{" "}
                        <span className="text-zinc-600">{formatDateTime(token.revokedAt)}</span>
                      </>
                    ) : (
                      <Badge tone="green">active</Badge>
                    )}
                  </td>
                  <td className={`${tdClass} text-right`}>
                    {token.revokedAt ? null : (
                      <Button
                        variant="danger"
                        disabled={revoke.isPending && revoke.variables === token.name}
                        onClick={() => revoke.mutate(token.name)}
                      >
                        Revoke
                      </Button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {move.isError ? (
        <ErrorAlert>
          Could not move {move.variables?.name}: {errorWithCode(move.error)}
        </ErrorAlert>
      ) : null}
      {revoke.isError ? (
        <ErrorAlert>
          Could not revoke {revoke.variables}: {errorWithCode(revoke.error)}
        </ErrorAlert>
      ) : null}
      <CreateTokenForm toolSets={query.data?.toolSets ?? []} />
    </Section>
  );
}

/**
 * A token's tool set: a choice among the configured sets for an active token, plain text for a
 * revoked one or when the configuration defines none; a set no longer configured is named and
 * marked (such a token may use no tool).
 */
function ToolSetCell({
  token,
  toolSets,
  busy,
  onMove,
}: {
  token: TokenView;
  toolSets: string[];
  busy: boolean;
  onMove: (toolSet: string | null) => void;
}) {
  const missing = token.toolSet !== null && !toolSets.includes(token.toolSet);
  if (token.revokedAt || toolSets.length === 0) {
    return (
      <span className="break-all">
        {token.toolSet ?? ALL_TOOLS}
        {missing ? (
          <>
            {" "}
            <Badge tone="red">not in config</Badge>
          </>
        ) : null}
      </span>
    );
  }
  return (
    <div className="space-y-1">
      <select
        aria-label={`Tool set of ${token.name}`}
        value={token.toolSet ?? ""}
        disabled={busy}
        onChange={(e) => onMove(e.target.value === "" ? null : e.target.value)}
        className={`${inputClass} min-w-40`}
      >
        <option value="">{ALL_TOOLS}</option>
        {toolSets.map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
        {missing ? <option value={token.toolSet ?? ""}>{token.toolSet} (not in config)</option> : null}
      </select>
      {missing ? (
        <p className="text-xs text-red-700">Not in the configuration: this token may use no tool.</p>
      ) : null}
    </div>
  );
}

/** Calls in the last hour, calls waiting now, and the last refusal by a limit. */
function ActivityCell({ activity }: { activity: TokenActivityView | undefined }) {
  if (!activity) return <span className="text-zinc-500">No calls in the last hour</span>;
  return (
    <span className="block text-xs leading-5" data-testid="token-activity">
      <span className="block whitespace-nowrap">
        {plural(activity.callsLastHour, "call")} in the last hour
      </span>
      <span className={`block whitespace-nowrap ${activity.pendingNow > 0 ? "text-amber-700" : ""}`}>
        {activity.pendingNow} waiting now
      </span>
      {activity.lastLimitedAt ? (
        <span className="block whitespace-nowrap text-red-700">
          Limited {formatDateTime(activity.lastLimitedAt)}
        </span>
      ) : null}
    </span>
  );
}

function CreateTokenForm({ toolSets }: { toolSets: string[] }) {
  const id = useId();
  const client = useQueryClient();
  const [formError, setFormError] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  // The secret lives only in this component's state: never in the query cache, gone on reload.
  const [created, setCreated] = useState<{ name: string; secret: string } | null>(null);
  const create = useMutation({
    mutationFn: (body: { name: string; toolSet: string | null }) => endpoints.tokens.create(body),
    onSuccess: ({ token }) => {
      client.setQueryData<TokensData>(queryKeys.tokens.list(), (old) => upsert(old, token));
      void client.invalidateQueries({ queryKey: queryKeys.tokens.all });
    },
  });

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = event.currentTarget;
    const data = new FormData(form);
    const toolSet = data.get("toolSet");
    const parsed = CreateTokenBody.safeParse({
      name: data.get("name"),
      toolSet: typeof toolSet === "string" && toolSet !== "" ? toolSet : null,
    });
    if (!parsed.success) {
      setFormError(`Token name: ${parsed.error.issues[0]?.message ?? "not valid"}`);
      return;
    }
    setFormError(null);
    setCreated(null);
    setCopied(false);
    create.mutate(
      { name: parsed.data.name, toolSet: parsed.data.toolSet ?? null },
      {
        onSuccess: ({ token, secret }) => {
          form.reset();
          setCreated({ name: token.name, secret });
        },
      },
    );
  }

  async function copy(secret: string) {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied(true);
    } catch {
      // Clipboard access refused (insecure context, permissions): the text stays selectable.
      setCopied(false);
    }
  }

  const error = formError ?? (create.isError ? errorWithCode(create.error) : null);

  return (
    <div className="space-y-4">
      {created ? (
        <div className="space-y-2 rounded-lg border border-emerald-300 bg-emerald-50 p-4">
          <p className="text-sm font-medium text-emerald-900">
            Token <span className="font-mono">{created.name}</span> created. Copy the secret now: it will not
            be shown again.
          </p>
          {/* The labelled element holds nothing but the secret, so its text is exactly the token. */}
          <figure aria-label="New token secret">
            <code className="block select-all break-all rounded-md bg-white px-3 py-2 font-mono text-sm text-zinc-900 ring-1 ring-emerald-300">
              {created.secret}
            </code>
          </figure>
          <div className="flex items-center gap-2">
            <Button onClick={() => void copy(created.secret)}>{copied ? "Copied" : "Copy"}</Button>
            <Button onClick={() => setCreated(null)}>Done</Button>
          </div>
        </div>
      ) : null}
      <form
        onSubmit={onSubmit}
        aria-labelledby={`${id}-title`}
        noValidate
        className="space-y-4 rounded-lg border border-zinc-200 bg-white p-4 shadow-xs"
      >
        <h3 id={`${id}-title`} className="font-medium text-zinc-900">
          Create token
        </h3>
        <div className="max-w-sm">
          <TextField
            id={`${id}-name`}
            name="name"
            label="Token name"
            autoComplete="off"
            autoCapitalize="none"
            required
          />
        </div>
        {toolSets.length > 0 ? (
          <div className="max-w-sm space-y-1">
            <label htmlFor={`${id}-tool-set`} className="block text-sm font-medium text-zinc-700">
              Tool set
            </label>
            <select id={`${id}-tool-set`} name="toolSet" defaultValue="" className={inputClass}>
              <option value="">{ALL_TOOLS}</option>
              {toolSets.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </div>
        ) : null}
        {error ? <ErrorAlert>{error}</ErrorAlert> : null}
        <Button type="submit" variant="primary" disabled={create.isPending}>
          Create token
        </Button>
      </form>
    </div>
  );
}
