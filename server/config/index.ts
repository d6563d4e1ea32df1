/**
 * The config room's public face: import from "../config" (or "@/server/config"), not from the
 * files behind it. load.ts reads the file, validate.ts and servers.ts check it, expand.ts owns
 * `${VAR}` references, display.ts shows issues, targets and a server's auth, types.ts holds the shapes.
 */
export type { AuthView } from "./display";
export {
  ConfigError,
  childPath,
  describeAuth,
  describeTarget,
  formatIssues,
  safeSmtpUrl,
  safeUrl,
  shownConfigPath,
} from "./display";
export type { Expansion } from "./expand";
export { CREDENTIAL_NAME, expandVars, substitutedValues, writeRefs } from "./expand";
export { configPathFromEnv, loadConfig, loadConfigFile, scanJson } from "./load";
export { closestKey, LIMITS } from "./readers";
export { authSecrets } from "./server-auth";
export { SERVER_NAME_PATTERN } from "./servers";
export type {
  AgentEndpointConfig,
  AgentLimitsConfig,
  ApprovalsConfig,
  CatalogueConfig,
  ConfigIssue,
  ConfigResult,
  EmailConfig,
  GatehouseConfig,
  NotificationEvent,
  NotificationsConfig,
  ServerAuthConfig,
  ServerConfig,
  ServerEntrySource,
  ToolSetConfig,
  Transport,
  ValidateOptions,
  WebhookConfig,
} from "./types";
export { NOTIFICATION_EVENTS } from "./types";
export { validateConfig } from "./validate";
