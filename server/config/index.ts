export { configPathFromEnv, loadConfig, loadConfigFile, scanJson } from "./load";
export type {
  AgentEndpointConfig,
  ApprovalsConfig,
  CatalogueConfig,
  ConfigIssue,
  ConfigResult,
  Expansion,
  GatehouseConfig,
  ServerConfig,
  Transport,
  ValidateOptions,
} from "./schema";
export {
  ConfigError,
  childPath,
  closestKey,
  describeTarget,
  expandVars,
  formatIssues,
  LIMITS,
  SERVER_NAME_PATTERN,
  safeUrl,
  validateConfig,
} from "./schema";
