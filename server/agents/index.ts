/**
 * Agents as the product tells them apart (PRODUCT.md §16): which tools each token may see and call
 * (tool sets). Below calls, the agents' MCP endpoint and the REST routes; above config and rules.
 */
export { tokenActivity } from "./activity";
export { AgentLimits, REFUSALS_GATHERED_MS } from "./limits";
export { type CallRates, MemoryRates, StoreRates } from "./rates";
export { NO_TOOL_SETS, type SetHolder, ToolSets } from "./tool-sets";
export { enabledToolsFor } from "./views";
export { toolSetWarnings } from "./warnings";
