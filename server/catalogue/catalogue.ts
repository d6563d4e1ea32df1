import "server-only";

/**
 * The catalogue's public face, for callers outside this folder: rows and queries (`rows.ts`),
 * views (`views.ts`), owners' actions (`owner-actions.ts`), and the refresh — planned in
 * `sync-plan.ts`, written in `sync.ts`.
 */

export { type ApprovalInput, type ApprovalNeed, approvalNeed, vouchProblem } from "./approval";
export { availabilityOf } from "./callable";
export type { RecordedChange } from "./changes";
export { bulkSetToolStatus, setToolStatus, type UpdateToolParams, updateTool } from "./owner-actions";
export { getToolRow, parseDefinition, type ToolRow, toolCounts } from "./rows";
export { syncServerTools } from "./sync";
export { hasChanges, type SyncSummary } from "./sync-plan";
export { changeOf, listCatalogue, listEnabledTools, toCatalogueView } from "./views";
