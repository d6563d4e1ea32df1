import "server-only";
import { childPath } from "./display";
import { writeRefs } from "./expand";
import type { Expander, Issues } from "./readers";
import { closestKey, reportingExpander, show, typeName } from "./readers";
import type { NotificationEvent, ValidateOptions } from "./types";
import { NOTIFICATION_EVENTS } from "./types";

/** What webhooks and email share: their event lists, and `${VAR}` references that must be set. */

/** Names people reach for that Gatehouse folds into one event. */
const EVENT_HINTS: Record<string, string> = {
  "call.approved": 'approvals, denials and refusals are all "call.decided"',
  "call.denied": 'approvals, denials and refusals are all "call.decided"',
  "call.refused": 'approvals, denials and refusals are all "call.decided"',
  "call.created": 'a call waiting for a reviewer is "call.pending"',
};

/** An expander for a value that is always used: an unset `${VAR}` is an error ending in `orElse`. */
export function strictExpander(opts: ValidateOptions, issues: Issues, orElse: string): Expander {
  return reportingExpander(opts.env, issues, (where, unset) => {
    issues.error(
      where,
      `refers to ${writeRefs(unset)}, which ${unset.length === 1 ? "is" : "are"} not set; set ${unset.join(", ")} in Gatehouse's environment ${orElse}`,
    );
  });
}

/** Which events one list may hold, and what its messages say. */
export interface EventRules {
  allowed: readonly NotificationEvent[];
  /** The fix for an empty list, e.g. "remove the webhook to send nothing". */
  orNone: string;
  /** Why a known event outside `allowed` is refused, e.g. "cannot be mailed; email sends call events only". */
  notAllowed: string;
}

/** `events`: a non-empty array of events from `rules.allowed`, each once; what is valid of it. */
export function readEvents(
  value: unknown,
  where: string,
  rules: EventRules,
  issues: Issues,
): NotificationEvent[] {
  const { allowed, orNone, notAllowed } = rules;
  const known = allowed.join(", ");
  if (!Array.isArray(value)) {
    const one = typeof value === "string" && (allowed as readonly string[]).includes(value);
    issues.error(
      where,
      `must be an array of events like ["call.pending"], not ${typeName(value)}${one ? `; write [${show(value)}]` : ""}`,
    );
    return [];
  }
  if (value.length === 0) {
    issues.error(where, `must list at least one event, e.g. ["call.pending"]; ${orNone}`);
    return [];
  }
  const events: NotificationEvent[] = [];
  value.forEach((event: unknown, i) => {
    const at = childPath(where, i);
    if (typeof event !== "string") {
      issues.error(at, `must be an event name like "call.pending", not ${typeName(event)}`);
    } else if (events.includes(event as NotificationEvent)) {
      issues.error(at, `${show(event)} is listed twice; remove one`);
    } else if ((allowed as readonly string[]).includes(event)) {
      events.push(event as NotificationEvent);
    } else if ((NOTIFICATION_EVENTS as readonly string[]).includes(event)) {
      issues.error(at, `${show(event)} ${notAllowed} (${known})`);
    } else {
      const hint = Object.hasOwn(EVENT_HINTS, event) ? EVENT_HINTS[event] : undefined;
      const close = closestKey(event, allowed);
      const fix = hint ?? (close !== null ? `did you mean ${show(close)}?` : "remove it");
      issues.error(at, `${show(event)} is not an event; ${fix} (known events: ${known})`);
    }
  });
  return events;
}
