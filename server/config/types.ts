/**
 * The shapes of a validated gatehouse.json (PRODUCT.md §2): what `validateConfig` (validate.ts)
 * returns, every default applied. The defaults and bounds of the numbers live in `LIMITS`
 * (readers.ts), the server name rule in `SERVER_NAME_PATTERN` (servers.ts).
 */

/** How Gatehouse talks to a server: a child process, streamable HTTP, or legacy HTTP+SSE. */
export type Transport = "stdio" | "http" | "sse";

/** One entry of `mcpServers`, validated, with defaults applied and `${VAR}` references expanded. */
export interface ServerConfig {
  /** The key in `mcpServers`; matches `SERVER_NAME_PATTERN`. */
  name: string;
  /** "stdio" when the entry has `command`; "http" when it has `url` ("sse" when `type: "sse"`). */
  transport: Transport;
  /** stdio only: the program to run (not run through a shell); null for HTTP servers. */
  command: string | null;
  /** stdio only: arguments, `${VAR}`-expanded; [] otherwise. */
  args: string[];
  /** stdio only: the child's environment, values `${VAR}`-expanded (secrets); {} otherwise. */
  env: Record<string, string>;
  /** stdio only: absolute working directory, resolved against the config file's folder (default: that folder); null for HTTP servers. */
  cwd: string | null;
  /** http/sse only: the absolute http(s) URL, `${VAR}`-expanded; null for stdio servers. */
  url: string | null;
  /** http/sse only: headers sent on every request, values `${VAR}`-expanded (secrets); {} otherwise. */
  headers: Record<string, string>;
  /** May the server's address be loopback / private / link-local. Default false. */
  allowPrivate: boolean;
  /** Only these remote tool names are ever considered; null (the default) = all. */
  allowTools: string[] | null;
  /** Most tools admitted to the catalogue. Default 12, integer 1..200. */
  maxTools: number;
  /** One request's deadline. Default 15000, integer 100..600000. */
  timeoutMs: number;
  /** Least gap between two requests. Default 0, integer 0..60000. */
  minIntervalMs: number;
  /** Largest single message accepted. Default 4 MiB, integer 1024..256 MiB. */
  maxFrameBytes: number;
  /** Dial this server at all. Default false: a described server stays dark until switched on. */
  enabled: boolean;
  /**
   * Where the entry is written and what it says of `enabled`, for telling an owner why a server
   * is dark. Set by `validateConfig`; absent on a config built by hand (tests).
   */
  source?: ServerEntrySource;
  /**
   * `resources`: which of the server's resources agents may read over `/mcp` beyond the ones it
   * lists; absent when the entry has none (agents then read only what the server listed).
   */
  resources?: ServerResourcesConfig;
  /**
   * `maxArgumentBytes`: the most bytes of JSON a call to any of this server's tools may send as
   * arguments, integer 1024..1048576; absent when the entry has none, and then the global 1 MiB
   * applies. It can only lower that bound (see `ARGUMENT_BYTES` in server-fields.ts).
   */
  maxArgumentBytes?: number;
  /**
   * `roots`: what Gatehouse answers when the server asks for its roots (`roots/list`), in the
   * file's order; absent when the entry has none, and then the server is told none. At most 50,
   * each an absolute `file://` URI, no URI twice (see `readRoots` in server-roots.ts).
   */
  roots?: ServerRoot[];
  /**
   * `auth`: how Gatehouse signs in to this HTTP (or SSE) server; absent when the entry has none
   * (the server then gets only its `headers`), never present on a stdio server. An entry with
   * `auth` has no `Authorization` header: the access token goes there. See `readAuth` in
   * server-auth.ts.
   */
  auth?: ServerAuthConfig;
}

/** Where one `mcpServers` entry is written. Nothing of it is secret: it is shown to owners. */
export interface ServerEntrySource {
  /** Absolute path of the config file read; "" when validated from an object. */
  file: string;
  /**
   * 1-based line of the entry's key inside `mcpServers` (`"files": {`); null when validated from
   * an object, or when the key was not found in the text.
   */
  line: number | null;
  /** `enabled` as the entry writes it; null when the entry has no `enabled` key (dark by default). */
  enabled: boolean | null;
  /**
   * Where the entry refers to unset `${VAR}`s: each field's path (`mcpServers.files.env.TOKEN`)
   * and the names it refers to (never values); absent when every reference is set. Such a server
   * stays dark.
   */
  unset?: { path: string; names: string[] }[];
}

/**
 * A server's `auth`, validated. Only OAuth 2.1 exists: the owner signs in at the server's
 * authorization server, found through the server's metadata.
 */
export interface ServerAuthConfig {
  type: "oauth";
  /**
   * The scopes to ask for, distinct RFC 6749 scope tokens in the file's order, 1..50 of at most
   * 256 characters each; [] when the entry names none (then ask for what the server says it needs).
   */
  scopes: string[];
  /**
   * A client registered in advance with the authorization server, `${VAR}`-expanded, at most 256
   * printable ASCII characters; null when the entry has none (the client is then registered or
   * described by Gatehouse). Shown to owners.
   */
  clientId: string | null;
  /**
   * That client's secret, from the one `${VAR}` reference the file must hold (never a literal); a
   * secret: never shown, logged or put in a message. Null for a public client. Only with `clientId`.
   */
  clientSecret: string | null;
  /**
   * The issuer (RFC 8414) of the authorization server `clientId` is registered with, as written;
   * required with `clientId`, null without. The configured client (and its secret) is used only
   * with that authorization server: a server whose metadata names another is refused before the
   * browser is sent anywhere, and its tokens are revoked and renewed only there.
   */
  issuer: string | null;
  /**
   * Whether the hosts of the sign-in other than the server's own URL (its authorization server's
   * metadata, registration, token and revocation endpoints) may be loopback, private or
   * link-local addresses. Default false: the server's `allowPrivate` covers its own origin only.
   */
  allowPrivate: boolean;
}

/** One entry of a server's `roots`: a folder (or file) the server is told it may work on. */
export interface ServerRoot {
  /** An absolute `file://` URI without host, query or fragment, `${VAR}`-expanded, as URL parsing gives it back. */
  uri: string;
  /** A name for the root, shown by servers that show one; absent when the entry has none. */
  name?: string;
}

/**
 * One server's `resources` section. Agents read a resource through `/mcp` only when the server
 * listed its URI in its latest `resources/list`, or when it matches one of these globs.
 */
export interface ServerResourcesConfig {
  /**
   * Globs on resource URIs (`*` any run of characters, `/` included; `?` exactly one), e.g.
   * `"file:///srv/docs/*"`; each starts with a lowercase URI scheme and is written as URL parsing
   * gives it back (no `..`, spaces as `%20`). Only a URI in that same canonical form can match.
   * At most 100, unique.
   */
  allow: string[];
}

/** The `approvals` section. */
export interface ApprovalsConfig {
  /** A pending call expires after this long. Default 900, integer 10..604800. */
  expireAfterSeconds: number;
  /** How long a held MCP call waits for a decision. Default 60, integer 0..3600. */
  waitSeconds: number;
  /** May a user approve a call they requested. Default false. */
  selfApproval: boolean;
}

/** The `catalogue` section. */
export interface CatalogueConfig {
  /** Tool descriptions are cut to this length. Default 1024, integer 64..65536. */
  descriptionMaxChars: number;
  /** Periodic refresh interval. Default 300; 0 disables, otherwise integer 10..86400. */
  refreshSeconds: number;
  /**
   * `catalogue.webhook`: an absolute http(s) URL each refresh's changes are POSTed to
   * as JSON, `${VAR}`-expanded; absent when the file has none. Its path and query may hold a
   * secret: never shown or logged, only its origin.
   */
  webhook?: string;
  /** May the webhook's address be loopback / private / link-local. Absent means false. */
  webhookAllowPrivate?: boolean;
}

/** The whole validated file. */
export interface GatehouseConfig {
  /** Absolute path of the file read; "" when validated from an object. */
  path: string;
  /** Every server, enabled or dark, sorted by name. */
  servers: ServerConfig[];
  approvals: ApprovalsConfig;
  catalogue: CatalogueConfig;
  /** `agentEndpoint`: extra Host/Origin values `/mcp` accepts; absent when the file has none. */
  agentEndpoint?: AgentEndpointConfig;
  /** `notifications`: where reviewers are told of calls; empty (no webhooks, no email) when absent. */
  notifications: NotificationsConfig;
  /** `rules`: tried in order, the first that matches decides a call; [] when absent. */
  rules: RuleConfig[];
  /** `metrics`: the scrape token of `/metrics`; absent when the file has none (owners only). */
  metrics?: MetricsConfig;
  /** `toolSets`: what a token given a set may see and call; [] when absent. Sorted by name. */
  toolSets: ToolSetConfig[];
  /** `agentLimits`: every token's limits, unless its set says otherwise; the defaults when absent. */
  agentLimits: AgentLimitsConfig;
}

/** One entry of `toolSets` (PRODUCT.md §16), validated. */
export interface ToolSetConfig {
  /** The key in `toolSets`; `^[a-z0-9][a-z0-9._-]{0,63}$`. Stored on tokens. */
  name: string;
  /** Globs on local tool names (`*`, `?`), as in rules; never empty. */
  tools: string[];
  /** The set's own limits, each over `agentLimits`'s; only those given. */
  limits: Partial<AgentLimitsConfig>;
}

/** Limits per agent token (PRODUCT.md §16); 0 turns one off. */
export interface AgentLimitsConfig {
  /** Calls a minute, as a token bucket that refills evenly (bursts up to the same number). Default 0: off. */
  callsPerMinute: number;
  /** Calls of the token waiting for a reviewer at once; the next that would wait is refused. Default 20. */
  maxPendingCalls: number;
  /**
   * Calls of the token running at once; the next that would run at once is refused (a call a
   * reviewer approved runs whatever the count). Default 0: off.
   */
  maxConcurrentCalls: number;
}

/** `metrics` (PRODUCT.md §15). */
export interface MetricsConfig {
  /** The expanded scrape token (a secret: registered for redaction, never shown). */
  token: string;
}

/** What a rule does with a call it matches. */
export type RuleDecision = "allow" | "deny" | "review";

/** One entry of `rules` (PRODUCT.md §11), validated. */
export interface RuleConfig {
  /** Unique among rules; `^[a-z0-9][a-z0-9._-]{0,63}$`. Named in audit rows, calls and hit counts. */
  name: string;
  /** Globs on local tool names (`*` any run, `?` one character); at least one. */
  tools: string[];
  /** Token names the rule applies to; null (absent) = any requester. */
  agents: string[] | null;
  /** A CEL expression over `args`, `tool`, `agent`; null (absent) = always. Already syntax-checked. */
  when: string | null;
  decision: RuleDecision;
  /** Shown to the requester (deny) or reviewers (review); null: a text naming the rule is used. */
  reason: string | null;
  /** Distinct reviewers a `review` rule needs, integer 1..5 (default 1); always 1 for allow/deny. */
  approvals: number;
}

/** What a notification can be about. */
export const NOTIFICATION_EVENTS = [
  "call.pending",
  "call.decided",
  "call.expired",
  "call.interrupted",
  "catalogue.changed",
] as const;
export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

/** One entry of `notifications.webhooks` (or the `catalogue.webhook` shorthand). */
export interface WebhookConfig {
  /** Unique among webhooks, `^[a-z][a-z0-9-]{0,30}$`; the shorthand is named "catalogue". */
  name: string;
  /** Absolute http(s) URL, `${VAR}`-expanded; a secret (never shown, logged or stored). */
  url: string;
  /** "json" (default) or "slack" (`{text, blocks}` for a chat incoming webhook). */
  format: "json" | "slack";
  /** The events sent here; at least one. */
  events: NotificationEvent[];
  /** HMAC-SHA256 key for `Gatehouse-Signature`, `${VAR}`-expanded (a secret); null: unsigned. */
  secret: string | null;
  /** Send argument values with call events. Default false: only their digest. */
  includeArguments: boolean;
  /** May the webhook's address be loopback / private / link-local. Default false. */
  allowPrivate: boolean;
}

/** `notifications.email`: reviewers with an email address receive its events. */
export interface EmailConfig {
  /** `smtp://` or `smtps://` URL, user and password included, `${VAR}`-expanded; a secret. */
  smtp: string;
  /** The From address. */
  from: string;
  /** The events mailed; default ["call.pending"]. Only call events. */
  events: NotificationEvent[];
  /** May the SMTP server's address be loopback / private / link-local. Default false. */
  allowPrivate: boolean;
}

/** The `notifications` section. */
export interface NotificationsConfig {
  /** `notifications.publicUrl` normalised to an origin; null when the file has none (links then use `GATEHOUSE_PUBLIC_ORIGIN`, see server/notify). */
  publicUrl: string | null;
  /** Every webhook, `catalogue.webhook` included as the one named "catalogue". */
  webhooks: WebhookConfig[];
  email: EmailConfig | null;
}

/**
 * The `agentEndpoint` section (named when only `/mcp` checked Host; it kept its name so existing
 * files keep working). Gatehouse always answers 127.0.0.1, localhost and [::1] on PORT, the
 * listen HOST and GATEHOUSE_PUBLIC_ORIGIN; these lists add names it is reached under
 * (DNS-rebinding protection refuses every other Host and Origin).
 */
export interface AgentEndpointConfig {
  /**
   * `Host` header values, `name[:port]`, e.g. "gatehouse.lan:3000": answered on every request,
   * the console's pages, the JSON API and `/mcp`.
   */
  allowedHosts: string[];
  /**
   * `Origin` header values, `http(s)://name[:port]`, e.g. "https://gatehouse.example.com", that
   * may call `/mcp` from a browser. The console's own state changes accept only their own origin
   * and GATEHOUSE_PUBLIC_ORIGIN (server/auth/access.ts `checkOrigin`).
   */
  allowedOrigins: string[];
}

/** One finding. `path` is a JSON path like "mcpServers.files.url" ("" for the file itself); `message` includes a fix. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** `config` is null whenever there is at least one error. Messages never contain secret values. */
export interface ConfigResult {
  config: GatehouseConfig | null;
  errors: ConfigIssue[];
  warnings: ConfigIssue[];
}

/** Options of `validateConfig`. */
export interface ValidateOptions {
  /** Where `${VAR}` references are looked up (usually process.env). */
  env: Record<string, string | undefined>;
  /** Folder a relative `cwd` is resolved against (the config file's folder). */
  baseDir: string;
  /** Absolute path of the file the object came from; "" (the default) when there is none. */
  path?: string;
  /**
   * 1-based line of each `mcpServers` key in the file's text, by server name (load.ts finds them
   * with its scanner); absent when there is no text, and then every entry's line is null.
   */
  serverLines?: ReadonlyMap<string, number>;
}
