"use client";

import { useId } from "react";
import { grantMinuteLabels, grantSentence } from "@/components/grant-text";
import { cx } from "@/components/ui";
import {
  type CallView,
  GRANT_MAX_USES,
  type GrantScope,
  grantMinuteChoices,
  grantScopes,
} from "@/lib/api-types";
import { grantScopeText } from "@/lib/decision-text";

/** What the reviewer has chosen so far; `uses` is the field's text, checked on approve. */
export interface GrantDraft {
  on: boolean;
  scope: GrantScope;
  minutes: number;
  limitUses: boolean;
  uses: string;
}

/** Off; once turned on, the narrowest grant: these exact arguments, for the shortest time. */
export const emptyGrantDraft: GrantDraft = {
  on: false,
  scope: "arguments",
  minutes: grantMinuteChoices[0],
  limitUses: false,
  uses: "10",
};

/**
 * The grant a draft asks for: null when "Approve and allow again…" is off; an error text when the count is not
 * a whole number from 1 to {@link GRANT_MAX_USES}.
 */
export function grantOf(
  draft: GrantDraft,
): { grant: { scope: GrantScope; minutes: number; uses?: number } | null } | { error: string } {
  if (!draft.on) return { grant: null };
  if (!draft.limitUses) return { grant: { scope: draft.scope, minutes: draft.minutes } };
  const uses = Number(draft.uses.trim());
  if (!Number.isInteger(uses) || uses < 1 || uses > GRANT_MAX_USES) {
    return { error: `The number of calls must be a whole number from 1 to ${GRANT_MAX_USES}.` };
  }
  return { grant: { scope: draft.scope, minutes: draft.minutes, uses } };
}

/** The house input, sized for a number of up to four digits. */
const usesInputClass =
  "block w-20 rounded-md border-0 bg-white px-2 py-1 text-sm text-zinc-900 shadow-xs ring-1 ring-inset ring-zinc-300 focus:ring-2 focus:ring-inset focus:ring-indigo-600 disabled:bg-zinc-50 disabled:text-zinc-400";

const legendClass = "mb-1 text-sm text-zinc-600 wrap-anywhere";

const pill =
  "relative cursor-pointer rounded-md px-2.5 py-1 text-sm ring-1 ring-inset ring-zinc-300 has-[:checked]:bg-indigo-50 has-[:checked]:font-medium has-[:checked]:text-indigo-800 has-[:checked]:ring-indigo-400 has-[:focus-visible]:outline-2 has-[:focus-visible]:outline-offset-2 has-[:focus-visible]:outline-indigo-600";

/**
 * "Approve and allow again…" next to Approve: off by default; on, the reviewer picks these exact arguments or any
 * arguments of this tool, for 15 minutes, an hour or a working day, and optionally at most N more
 * calls, and reads the sentence that will be granted.
 */
export function GrantChoice({
  call,
  draft,
  disabled,
  onChange,
}: {
  call: Pick<CallView, "tool" | "requester">;
  draft: GrantDraft;
  disabled?: boolean;
  onChange: (draft: GrantDraft) => void;
}) {
  const id = useId();
  const set = (patch: Partial<GrantDraft>) => onChange({ ...draft, ...patch });
  const chosen = grantOf(draft);

  return (
    <div className="space-y-3">
      <label className="flex w-fit cursor-pointer items-center gap-2 text-sm text-zinc-800">
        <input
          type="checkbox"
          checked={draft.on}
          disabled={disabled}
          onChange={(event) => set({ on: event.currentTarget.checked })}
          aria-controls={`${id}-options`}
          className="size-4 rounded border-zinc-300 text-indigo-600 focus:ring-indigo-600"
        />
        Approve and allow again…
        <span className="text-zinc-500">later calls like this one run without review, for a while</span>
      </label>
      {draft.on ? (
        <div
          id={`${id}-options`}
          className="space-y-3 rounded-md border border-indigo-100 bg-indigo-50/40 px-3 py-3"
        >
          <fieldset disabled={disabled}>
            <legend className={legendClass}>
              Later calls of <span className="break-all font-mono text-zinc-800">{call.tool}</span> by{" "}
              <span className="font-medium text-zinc-800">{call.requester.name}</span> with
            </legend>
            <div className="flex flex-wrap gap-2">
              {grantScopes.map((scope) => (
                <label key={scope} className={cx(pill, "bg-white text-zinc-700")}>
                  <input
                    type="radio"
                    name={`${id}-scope`}
                    value={scope}
                    checked={draft.scope === scope}
                    onChange={() => set({ scope })}
                    // Laid over its pill, so a click anywhere on it lands on the radio itself.
                    className="absolute inset-0 cursor-pointer appearance-none opacity-0"
                  />
                  {grantScopeText[scope]}
                </label>
              ))}
            </div>
          </fieldset>
          <fieldset disabled={disabled}>
            <legend className={legendClass}>For</legend>
            <div className="flex flex-wrap gap-2">
              {grantMinuteChoices.map((minutes) => (
                <label key={minutes} className={cx(pill, "bg-white text-zinc-700")}>
                  <input
                    type="radio"
                    name={`${id}-minutes`}
                    value={minutes}
                    checked={draft.minutes === minutes}
                    onChange={() => set({ minutes })}
                    // Laid over its pill, so a click anywhere on it lands on the radio itself.
                    className="absolute inset-0 cursor-pointer appearance-none opacity-0"
                  />
                  {grantMinuteLabels[minutes]}
                </label>
              ))}
            </div>
          </fieldset>
          <div className="flex flex-wrap items-center gap-2 text-sm text-zinc-800">
            <label className="flex cursor-pointer items-center gap-2">
              <input
                type="checkbox"
                checked={draft.limitUses}
                disabled={disabled}
                onChange={(event) => set({ limitUses: event.currentTarget.checked })}
                className="size-4 rounded border-zinc-300 text-indigo-600 focus:ring-indigo-600"
              />
              at most
            </label>
            <label htmlFor={`${id}-uses`} className="sr-only">
              Number of calls
            </label>
            <input
              id={`${id}-uses`}
              type="number"
              inputMode="numeric"
              min={1}
              max={GRANT_MAX_USES}
              value={draft.uses}
              disabled={disabled || !draft.limitUses}
              onChange={(event) => set({ uses: event.currentTarget.value })}
              aria-invalid={"error" in chosen ? true : undefined}
              className={usesInputClass}
            />
            <span className={draft.limitUses ? "" : "text-zinc-400"}>more calls</span>
          </div>
          <p
            className="text-sm text-indigo-950 wrap-anywhere"
            data-testid="grant-sentence"
            aria-live="polite"
          >
            {"error" in chosen ? (
              <span className="text-rose-700">{chosen.error}</span>
            ) : chosen.grant ? (
              grantSentence(call, chosen.grant)
            ) : null}
          </p>
        </div>
      ) : null}
    </div>
  );
}
