import { createContext, useContext } from "react";
import type { CatalogueToolView } from "@/lib/api-types";
import { namesText } from "@/lib/decision-text";
import { plural } from "@/lib/format";

/** Whether a call of this tool waits for a reviewer by the tool's own kind (rules aside). */
export function waitsForReview(tool: Pick<CatalogueToolView, "destructive" | "alwaysConfirm">): boolean {
  return tool.destructive || tool.alwaysConfirm;
}

/**
 * What enabling these tools means for their calls, said once they are enabled: which now run at
 * once, and which wait on Approvals for a reviewer. Null for none (nothing was enabled).
 */
export function enabledNoticeText(
  tools: readonly Pick<CatalogueToolView, "localName" | "destructive" | "alwaysConfirm">[],
): string | null {
  const first = tools[0];
  if (!first) return null;
  if (tools.length === 1) {
    return waitsForReview(first)
      ? `${first.localName} is enabled. ${first.destructive ? "It can change things, so every" : "Every"} call waits on Approvals until a reviewer approves it.`
      : `${first.localName} is enabled. It is read-only: agents' calls run at once, without approval.`;
  }
  const held = tools.filter(waitsForReview).map((t) => t.localName);
  const start = `Enabled ${plural(tools.length, "tool")}.`;
  if (held.length === 0) return `${start} All are read-only: their calls run at once, without approval.`;
  if (held.length === tools.length)
    return `${start} Every call of them waits on Approvals until a reviewer approves it.`;
  const which = held.length <= 3 ? namesText(held) : `${held.length} of them`;
  return `${start} Calls of ${which} wait on Approvals until a reviewer approves them; the others run at once.`;
}

/** Tells the tools page which tools were just enabled (one row's Enable, or the bulk enable). */
export const AnnounceEnabled = createContext<(tools: CatalogueToolView[]) => void>(() => {});

export function useAnnounceEnabled(): (tools: CatalogueToolView[]) => void {
  return useContext(AnnounceEnabled);
}
