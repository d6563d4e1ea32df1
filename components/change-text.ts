/** Words for the change feed and a tool's history, shared by /changes and /tools. */
import type { BadgeTone } from "@/components/ui";
import type { ChangeKind, ChangeView, ToolActionView } from "@/lib/api-types";

export const changeKindLabel: Record<ChangeKind, string> = {
  added: "added",
  over_cap: "over the cap",
  changed: "changed",
  gone: "gone",
  returned: "returned",
  excluded: "excluded",
  vouch_dropped: "vouch dropped",
};

export const changeKindTone: Record<ChangeKind, BadgeTone> = {
  added: "green",
  over_cap: "violet",
  changed: "amber",
  gone: "grey",
  returned: "blue",
  excluded: "slate",
  vouch_dropped: "amber",
};

/** One line saying what a change means for the owner. */
export function describeChange(change: ChangeView): string {
  const d = change.detail ?? {};
  switch (change.kind) {
    case "added":
      return d.unusableReason
        ? `proposed, but unusable: ${d.unusableReason}`
        : "proposed; enable it to make it callable";
    case "over_cap":
      return `listed beyond maxTools${d.maxTools ? ` (${d.maxTools})` : ""}: not proposed`;
    case "changed": {
      const what = d.summary && d.summary.length > 0 ? d.summary.join(", ") : "its definition";
      if (d.restored) return `changed back to the definition you enabled (${what})`;
      return d.status === "enabled"
        ? `changed: ${what}; not callable until you review it`
        : `changed: ${what}`;
    }
    case "gone":
      return d.status === "enabled"
        ? "no longer listed by its server; calls are refused"
        : "no longer listed by its server";
    case "returned":
      return d.status ? `listed again; back to ${d.status}` : "listed again";
    case "excluded":
      return d.hadRow
        ? "now excluded by allowTools; calls are refused"
        : "listed by its server, excluded by allowTools";
    case "vouch_dropped":
      return `${d.vouchedBy ? `${d.vouchedBy}'s` : "the"} read-only vouch was dropped: the definition changed`;
  }
}

const ACTIONS: Record<string, string> = {
  "tool.enable": "enabled",
  "tool.disable": "disabled",
  "tool.vouch": "vouched it read-only",
  "tool.unvouch": "withdrew the read-only vouch",
  "tool.vouch_dropped": "vouch dropped (definition changed)",
};

/** One line for an owner's action on a tool, from the audit log. */
export function describeAction(action: ToolActionView): string {
  if (action.action === "tool.always_confirm") {
    return action.detail === "on" ? "turned always confirm on" : "turned always confirm off";
  }
  return ACTIONS[action.action] ?? action.action;
}
