"use client";

import { useQuery } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { Age } from "@/components/age";
import { ruleDecisionTone } from "@/components/grant-text";
import { Badge, EmptyState, ErrorAlert, Loading, PageHeader } from "@/components/ui";
import type { RuleView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatCount, formatDateTime, plural } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

/** Enabled tools listed by name before the rest are only counted. */
const TOOLS_SHOWN = 12;

const decisionText: Record<RuleView["decision"], string> = {
  allow: "allow: runs at once",
  deny: "deny: refused",
  review: "review: waits for reviewers",
};

/**
 * `/rules`: the `rules` of gatehouse.json in the order they are tried, read-only (they change in the
 * file, checked at start). Each says what it matches — tool globs and the enabled tools they
 * match now, agents, the `when` condition — what it decides, and how often it has. Live "call"
 * events refresh the hit counts.
 */
export function RulesView() {
  const query = useQuery({
    queryKey: queryKeys.rules.list(),
    queryFn: ({ signal }) => endpoints.rules.list({ signal }),
  });

  return (
    <div>
      <PageHeader
        title="Rules"
        subtitle={
          <>
            Tried in order; the first rule that matches a call decides it. They come from the{" "}
            <code className="font-mono text-zinc-700">rules</code> key of gatehouse.json and change only
            there.
          </>
        }
      />
      {query.isPending ? (
        <Loading label="Loading rules…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load rules: {errorWithCode(query.error)}</ErrorAlert>
      ) : query.data.rules.length === 0 ? (
        <EmptyState title="No rules: every call follows the tool's default">
          <p className="mx-auto max-w-xl">
            A read-only tool runs at once; any other waits for a reviewer, unless an owner vouched for it. To
            allow, deny or hold calls by tool, agent and arguments, add a{" "}
            <code className="font-mono text-zinc-700">rules</code> list to gatehouse.json (see{" "}
            <code className="font-mono text-zinc-700">docs/RULES.md</code>) and restart Gatehouse.
          </p>
        </EmptyState>
      ) : (
        <ol aria-label="Rules" className="space-y-3">
          {query.data.rules.map((rule, index) => (
            <RuleCard key={rule.name} rule={rule} position={index + 1} toolSets={query.data.toolSets} />
          ))}
        </ol>
      )}
    </div>
  );
}

function RuleCard({
  rule,
  position,
  toolSets,
}: {
  rule: RuleView;
  position: number;
  /** Token name → its tool set, for the tokens this page's rules name that have one. */
  toolSets: Record<string, string>;
}) {
  const shown = rule.matchingTools.slice(0, TOOLS_SHOWN);
  const more = rule.matchingTools.length - shown.length;
  return (
    <li
      data-testid={`rule-${rule.name}`}
      aria-label={`Rule ${rule.name}`}
      className="rounded-lg border border-zinc-200 bg-white p-4 shadow-xs"
    >
      <div className="flex flex-wrap items-start justify-between gap-3">
        <div className="flex min-w-0 flex-wrap items-center gap-2">
          <span className="text-sm tabular-nums text-zinc-400">{position}.</span>
          <h2 className="break-all font-mono text-base font-semibold text-zinc-900">{rule.name}</h2>
          <Badge tone={ruleDecisionTone[rule.decision]}>{decisionText[rule.decision]}</Badge>
          {rule.decision === "review" ? (
            <Badge tone={rule.approvals >= 2 ? "violet" : "grey"}>{plural(rule.approvals, "approval")}</Badge>
          ) : null}
        </div>
        <p className="shrink-0 text-sm text-zinc-600" data-testid="rule-hits">
          {rule.hits === 0 ? (
            "never matched yet"
          ) : (
            <>
              <span className="font-medium tabular-nums text-zinc-900">{formatCount(rule.hits)}</span>{" "}
              {rule.hits === 1 ? "call" : "calls"}
              {rule.lastHitAt ? (
                <>
                  , last <Age at={rule.lastHitAt} />
                </>
              ) : null}
            </>
          )}
        </p>
      </div>
      {rule.reason ? <p className="mt-2 break-words text-sm text-zinc-700">{rule.reason}</p> : null}

      <dl className="mt-3 grid gap-x-6 gap-y-2 text-sm sm:grid-cols-[8rem_1fr]">
        <Fact term="Tools">
          <span className="flex flex-wrap gap-1.5">
            {rule.tools.map((glob) => (
              <code
                key={glob}
                className="break-all rounded bg-zinc-100 px-1.5 py-px font-mono text-[0.8125rem] text-zinc-800"
              >
                {glob}
              </code>
            ))}
          </span>
          {rule.matchingTools.length === 0 ? (
            <span className="mt-1 block text-amber-800">matches no enabled tool now</span>
          ) : (
            <span className="mt-1 block break-words text-zinc-600">
              matches {plural(rule.matchingTools.length, "enabled tool")}:{" "}
              <span className="font-mono text-[0.8125rem] text-zinc-700">{shown.join(", ")}</span>
              {more > 0 ? ` and ${formatCount(more)} more` : ""}
            </span>
          )}
        </Fact>
        <Fact term="Agents">
          {rule.agents === null ? (
            <span className="text-zinc-600">any requester</span>
          ) : (
            <span className="break-all">
              {rule.agents.map((agent, i) => (
                <span key={agent}>
                  {i > 0 ? ", " : ""}
                  <span className="font-mono text-[0.8125rem]">{agent}</span>
                  {toolSets[agent] ? (
                    <span className="text-zinc-600"> (tool set {toolSets[agent]})</span>
                  ) : null}
                </span>
              ))}
            </span>
          )}
        </Fact>
        <Fact term="When">
          {rule.when === null ? (
            <span className="text-zinc-600">always</span>
          ) : (
            <pre className="overflow-x-auto whitespace-pre-wrap break-all rounded-md bg-zinc-950 px-3 py-1.5 font-mono text-xs leading-5 text-zinc-100">
              {rule.when}
            </pre>
          )}
        </Fact>
        {rule.lastHitAt ? (
          <Fact term="Last matched">
            <time dateTime={rule.lastHitAt}>{formatDateTime(rule.lastHitAt)}</time>
          </Fact>
        ) : null}
      </dl>
    </li>
  );
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <>
      <dt className="font-medium text-zinc-500">{term}</dt>
      <dd className="min-w-0 text-zinc-800">{children}</dd>
    </>
  );
}
