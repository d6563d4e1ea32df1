"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useCallback, useSyncExternalStore } from "react";
import { cx } from "@/components/ui";
import type { CatalogueToolView, ServerView, UserView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { queryKeys } from "@/lib/query-keys";
import { ADD_REVIEWER_HREF } from "@/lib/viewer";

/** One step of the first run, as the panel shows it. */
export interface NextStep {
  key: "look" | "enable" | "reviewer";
  title: string;
  detail: string;
  href: string;
  action: string;
  done: boolean;
}

/**
 * The three things a new owner does before the loop works end to end: look at the first server
 * (the demo server where there is one), enable its tools, and add a second person who may
 * approve (done too when `selfApproval` lets them approve their own calls). `looked` is whether
 * they followed the first step's link (kept in the browser); the other two are read from the
 * catalogue and the people. Null when there is no server to start
 * from.
 */
export function nextSteps(input: {
  me: string;
  servers: readonly Pick<ServerView, "name">[];
  tools: readonly Pick<CatalogueToolView, "server" | "status">[];
  users: readonly Pick<UserView, "name" | "roles">[];
  looked: boolean;
  /** The config's `approvals.selfApproval`: with it on, a lone owner's loop is complete. */
  selfApproval: boolean;
}): NextStep[] | null {
  const first = input.servers.find((s) => s.name === "demo") ?? input.servers[0];
  if (!first) return null;
  const name = first.name;
  const enabled = input.tools.some((t) => t.server === name && t.status === "enabled");
  const reviewers = input.users.filter(
    (u) => u.name !== input.me && u.roles.some((r) => r === "owner" || r === "reviewer"),
  ).length;
  return [
    {
      key: "look",
      title: `Look at the ${name} server`,
      detail: "Its connection state, the tools it lists, and its history (open it on the card).",
      href: `/servers#server-${encodeURIComponent(name)}`,
      action: "Show it",
      done: input.looked,
    },
    {
      key: "enable",
      title: `Enable its tools`,
      detail:
        "Nothing is callable until you enable it. Read-only tools then run at once; the others wait for a reviewer.",
      href: `/tools?server=${encodeURIComponent(name)}`,
      action: "Go to Tools",
      done: enabled,
    },
    {
      key: "reviewer",
      title: "Add a reviewer",
      detail: input.selfApproval
        ? "approvals.selfApproval is on, so you may approve calls you asked for; a reviewer is a second pair of eyes."
        : "A call that changes things has to be approved by someone other than whoever asked for it: you, or an agent whose token you created.",
      href: ADD_REVIEWER_HREF,
      action: "Add a reviewer",
      done: reviewers > 0 || input.selfApproval,
    },
  ];
}

const LOOKED_KEY = "gatehouse.next-steps.looked";
const HIDDEN_KEY = "gatehouse.next-steps.hidden";

/** A flag in localStorage, per signed-in person, that re-renders its readers when set. */
function useStoredFlag(key: string): [boolean, () => void] {
  const subscribe = useCallback((changed: () => void) => {
    window.addEventListener("storage", changed);
    window.addEventListener(FLAG_EVENT, changed);
    return () => {
      window.removeEventListener("storage", changed);
      window.removeEventListener(FLAG_EVENT, changed);
    };
  }, []);
  const value = useSyncExternalStore(
    subscribe,
    () => readFlag(key),
    () => false,
  );
  const set = useCallback(() => {
    try {
      window.localStorage.setItem(key, "1");
    } catch {
      // Storage refused (private mode, quota): the step just stays unticked.
    }
    window.dispatchEvent(new Event(FLAG_EVENT));
  }, [key]);
  return [value, set];
}

const FLAG_EVENT = "gatehouse:next-steps";

function readFlag(key: string): boolean {
  try {
    return window.localStorage.getItem(key) === "1";
  } catch {
    return false;
  }
}

/**
 * "Get started": the first-run steps on the owner's first screens (Servers, Tools), each with a
 * link to where it is done and a tick once it is. It goes away when all three are done, or when
 * the owner hides it. Renders nothing while its data loads.
 */
export function NextSteps({ me, selfApproval }: { me: string; selfApproval: boolean }) {
  const [looked, markLooked] = useStoredFlag(`${LOOKED_KEY}.${me}`);
  const [hidden, hide] = useStoredFlag(`${HIDDEN_KEY}.${me}`);
  const servers = useQuery({
    queryKey: queryKeys.servers.list(),
    queryFn: ({ signal }) => endpoints.servers.list({ signal }),
    enabled: !hidden,
  });
  const tools = useQuery({
    queryKey: queryKeys.catalogue.list(),
    queryFn: ({ signal }) => endpoints.catalogue.list({ signal }),
    enabled: !hidden,
  });
  const users = useQuery({
    queryKey: queryKeys.users.list(),
    queryFn: ({ signal }) => endpoints.users.list({ signal }),
    enabled: !hidden,
  });
  if (hidden || !servers.data || !tools.data || !users.data) return null;
  const steps = nextSteps({
    me,
    servers: servers.data.servers,
    tools: tools.data.tools,
    users: users.data.users,
    looked,
    selfApproval,
  });
  if (!steps || steps.every((s) => s.done)) return null;
  const left = steps.filter((s) => !s.done).length;

  return (
    <section
      aria-labelledby="next-steps-title"
      data-testid="next-steps"
      className="mb-6 rounded-lg border border-indigo-200 bg-indigo-50/60 p-4"
    >
      <div className="flex flex-wrap items-baseline justify-between gap-2">
        <h2 id="next-steps-title" className="text-base font-semibold text-zinc-900">
          Get started
          <span className="ml-2 text-sm font-normal text-zinc-600">
            {left === 1 ? "1 step left" : `${left} steps left`}
          </span>
        </h2>
        <button type="button" onClick={hide} className="text-xs font-medium text-indigo-700 hover:underline">
          Hide these steps
        </button>
      </div>
      <ol className="mt-3 grid gap-3 md:grid-cols-3">
        {steps.map((step, i) => (
          <li
            key={step.key}
            data-testid={`next-step-${step.key}`}
            data-done={step.done ? "true" : "false"}
            className={cx(
              "flex gap-3 rounded-md bg-white p-3 ring-1",
              step.done ? "ring-emerald-200" : "ring-indigo-200",
            )}
          >
            <span
              aria-hidden="true"
              className={cx(
                "flex size-6 shrink-0 items-center justify-center rounded-full text-xs font-semibold",
                step.done ? "bg-emerald-600 text-white" : "bg-indigo-100 text-indigo-800",
              )}
            >
              {step.done ? "✓" : i + 1}
            </span>
            <div className="min-w-0 text-sm">
              <p className={cx("font-medium", step.done ? "text-zinc-500 line-through" : "text-zinc-900")}>
                {step.title}
                {step.done ? <span className="sr-only"> (done)</span> : null}
              </p>
              <p className="mt-0.5 text-zinc-600">{step.detail}</p>
              {step.done ? null : (
                <Link
                  href={step.href}
                  prefetch={false}
                  onClick={step.key === "look" ? () => markLooked() : undefined}
                  className="mt-1 inline-block font-medium text-indigo-700 hover:underline"
                >
                  {step.action}
                </Link>
              )}
            </div>
          </li>
        ))}
      </ol>
    </section>
  );
}
