/**
 * Shapes of the HTTP API, shared by route handlers (which validate bodies with these zod
 * schemas) and the browser's API client (which reads the response types).
 */
import { z } from "zod";

export const roles = ["owner", "reviewer"] as const;
export type Role = (typeof roles)[number];

export const userName = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "Use 1-64 letters, digits, '.', '_' or '-'.");
/**
 * A password being set (setup, a new user, the CLI). Control characters (C0 with tab and newline,
 * DEL, C1) and the line and paragraph separators are refused: such a password is usually a
 * mistake (`printf 'pw\npw'` into `user add`) and makes a login nobody can type in a form. That
 * check comes first, so it is the message shown even when the password is also too short.
 * Signing in takes any text: such a password simply never matches.
 */
export const password = z
  .string()
  .regex(/^[^\p{Cc}\u2028\u2029]*$/u, "Passwords cannot contain control characters such as a newline.")
  .min(10, "Use at least 10 characters.")
  .max(1024);

export const SetupBody = z.object({ code: z.string().min(1), name: userName, password });
export const SignInBody = z.object({
  name: z.string().min(1).max(64),
  password: z.string().min(1).max(1024),
});
/** An optional email address for notifications; "" clears it. */
export const userEmail = z
  .string()
  .trim()
  .max(254)
  .regex(/^$|^[^\s@<>(),;:"]+@[^\s@<>(),;:"]+\.[^\s@<>(),;:"]+$/, "Use an address like name@example.com.");
export const CreateUserBody = z.object({
  name: userName,
  password,
  roles: z.array(z.enum(roles)).min(1),
  email: userEmail.optional(),
});
/**
 * `PATCH /api/users/:name`: what an owner may change of a person after creating them — the
 * address ("" clears it), the roles, a new password (a reset: it ends all their sessions), or
 * several at once; at least one of them.
 */
export const UpdateUserBody = z
  .object({
    email: userEmail.optional(),
    roles: z.array(z.enum(roles)).min(1).optional(),
    password: password.optional(),
  })
  .refine((b) => b.email !== undefined || b.roles !== undefined || b.password !== undefined, {
    message: "Give email, roles or password.",
  });
/**
 * `POST /api/me/password`: the signed-in person changes their own password. `current` is checked
 * like a sign-in (any text; a wrong one counts against the throttle); `password` follows the
 * rules of a new one.
 */
export const ChangePasswordBody = z.object({ current: z.string().min(1).max(1024), password });
/** A `toolSets` name as the configuration allows it. */
export const toolSetName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "not a tool set name");
/** A new token, in a tool set (`null` or absent: every enabled tool). */
export const CreateTokenBody = z.object({ name: userName, toolSet: toolSetName.nullable().optional() });
/** Moves a token into another tool set (`null`: every enabled tool). */
export const UpdateTokenBody = z.strictObject({ toolSet: toolSetName.nullable() });
export const CallBody = z.object({
  tool: z.string().min(1).max(200),
  arguments: z.record(z.string(), z.unknown()).default({}),
});
/** How long a grant may last: from a quarter hour to a working day. */
export const GRANT_MAX_MINUTES = 480;
/** The choices the browser offers (15 minutes, an hour, a working day). */
export const grantMinuteChoices = [15, 60, 480] as const;
/** Most calls one grant may cover. */
export const GRANT_MAX_USES = 1000;
export const grantScopes = ["arguments", "tool"] as const;
export type GrantScope = (typeof grantScopes)[number];
/**
 * A grant made with an approval: the same requester may call the same tool — with these exact
 * arguments (`arguments`) or any (`tool`) — without review for `minutes`, at most `uses` more
 * times (absent: no count limit).
 */
export const GrantRequest = z
  .object({
    scope: z.enum(grantScopes),
    minutes: z.number().int().min(1).max(GRANT_MAX_MINUTES),
    uses: z.number().int().min(1).max(GRANT_MAX_USES).optional(),
  })
  // A misspelt key ("Uses") must not quietly make an unlimited grant.
  .strict();
export type GrantRequest = z.infer<typeof GrantRequest>;
/** `POST /api/calls/:id/approve`: an empty body approves; `grant` also allows what follows. */
export const ApproveBody = z.object({ grant: GrantRequest.optional() }).strict();
/** `POST /api/servers/:name/switch`: an owner's "Switch on" (`true`) or "Switch off" (`false`). */
export const SwitchServerBody = z.object({ on: z.boolean() }).strict();
export const DenyBody = z.object({ reason: z.string().trim().min(1, "Give a reason.").max(2000) });
export const WaitQuery = z.object({ wait: z.coerce.number().min(0).max(120).optional() });

export interface UserView {
  id: number;
  name: string;
  roles: Role[];
  /** Where this person's notifications go; null when none. Shown to owners only. */
  email: string | null;
  createdAt: string;
}

export interface TokenView {
  name: string;
  /** The token's tool set; null: every enabled tool. */
  toolSet: string | null;
  createdAt: string;
  createdBy: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** An agent token's recent activity (Settings). */
export interface TokenActivityView {
  callsLastHour: number;
  /** Its calls waiting for a reviewer now. */
  pendingNow: number;
  /** When a limit last refused it (to the minute); null: not on record. */
  lastLimitedAt: string | null;
}

/**
 * `failed`: a crash loop stopped the retries until an owner presses Reconnect. `needs_auth`: the
 * server asks for an OAuth sign-in (configured, or its own 401 naming its resource metadata) and
 * no usable grant is stored; nothing is dialled until an owner presses Connect.
 */
export const serverStates = [
  "dark",
  "connecting",
  "ready",
  "backoff",
  "failed",
  "needs_auth",
  "closed",
] as const;
export type ServerState = (typeof serverStates)[number];

/** An OAuth server's sign-in as owners see it. Tokens and client secrets are never part of it. */
export interface ServerAuthView {
  kind: "oauth";
  /** `config`: the entry's `auth`; `challenge`: the server answered 401 naming its resource metadata. */
  source: "config" | "challenge";
  /** A grant (tokens) is stored for this server. */
  connected: boolean;
  /** The authorization server the grant is bound to (its `issuer`); null before the first sign-in. */
  issuer: string | null;
  /** The scopes granted; before a sign-in, the ones the entry asks for ([] : what the server says it needs). */
  scopes: string[];
  connectedBy: string | null;
  connectedAt: string | null;
  /** When the access token held now expires; null when unknown or not connected. */
  expiresAt: string | null;
  /** How Gatehouse identifies itself: the configured client id, "registered dynamically", or the client ID metadata document's URL. */
  client: string | null;
  /** Why an owner must sign in (again), shown with `needs_auth`; null otherwise. */
  reason: string | null;
}

export interface ServerView {
  name: string;
  transport: "stdio" | "http" | "sse";
  /** Command name, or URL origin + path. Never arguments' secrets, env values or headers. */
  target: string;
  enabled: boolean;
  state: ServerState;
  lastError: string | null;
  nextRetryAt: string | null;
  readySince: string | null;
  serverInfo: { name: string; version: string } | null;
  /** The MCP revision the live connection speaks ("2026-07-28", or a 2025 one); null when not connected. */
  protocolVersion: string | null;
  tools: { listed: number; proposed: number; enabled: number; disabled: number; overCap: number };
  stderrTail: string[];
  /** Set while re-lists of this server are held back because its tool list changes too fast; null otherwise. */
  refreshNote: string | null;
  /**
   * The last state changes, newest last, earlier runs of Gatehouse included (kept in the store).
   * `started` is true on the first change of each run: Gatehouse (re)started there.
   */
  history: ServerHistoryEntry[];
  /** Null for a server that signs in with no OAuth (stdio, a static header, nothing). */
  auth: ServerAuthView | null;
  /**
   * Where the server's entry is in the config file Gatehouse loaded, and what it says of
   * `enabled` (why a dark server is dark); null when the config came from no file.
   */
  entry: ServerEntryView | null;
  /** Its `maxTools`, the tools it lists beyond it, and where to raise it. */
  cap: ServerCapView;
  /**
   * Switching it on from the Servers page, for an entry with no `enabled` key; null when the
   * entry says `"enabled"` (the file decides) or the config came from no file.
   */
  switch: ServerSwitchView | null;
  /**
   * Where an enabled stdio server runs when Gatehouse runs as several replicas (each runs on one
   * replica at a time): the label of the replica holding it (null: none holds it right now), and
   * whether that is the replica answering. Null with one process, and for HTTP servers, which
   * every replica dials.
   */
  replica: { label: string | null; here: boolean } | null;
}

/** A server's tool cap as the Servers page shows it. */
export interface ServerCapView {
  maxTools: number;
  /** Tools it listed beyond `maxTools` at the last refresh (no row, not offered), in name order. */
  overCapTools: string[];
  /** `<config file> line <n>` of its entry, where `maxTools` is raised; null without a file. */
  entryAt: string | null;
  /** What to do to offer an over-cap tool: the sentence agents calling one are told too. */
  hint: string;
  /** Set when more of its tools are enabled than `maxTools` allows (the cap was lowered). */
  warning: string | null;
}

/** An owner's switch for a server whose entry has no `enabled` key. */
export interface ServerSwitchView {
  /** Who switched it on from the page, and when; null while it is dark. */
  switchedOn: { by: string; at: string } | null;
  /** Why it cannot be switched on (an unset `${VAR}`, by path); null when it can, or is on. */
  refusal: string | null;
}

/** One state change of a server. */
export interface ServerHistoryEntry {
  at: string;
  state: ServerState;
  detail: string | null;
  /** Present (true) on the first change of a Gatehouse run. */
  started?: true;
}

/** A server's entry in gatehouse.json as the Servers page points to it. */
export interface ServerEntryView {
  /** The config file's path, relative to Gatehouse's working directory when inside it. */
  file: string;
  /** 1-based line of the entry's key (`"files": {`); null when it could not be found. */
  line: number | null;
  /** `enabled` as the entry writes it; null when the entry has no `enabled` key. */
  enabled: boolean | null;
}

/** How a sign-in that came back to `/oauth/callback` ended; the Servers page explains each. */
export const signInOutcomes = [
  "connected",
  "denied",
  "expired",
  "wrong_user",
  "issuer_mismatch",
  "refused_address",
  "failed",
] as const;
export type SignInOutcome = (typeof signInOutcomes)[number];

export type ToolStatus = "proposed" | "enabled" | "disabled";
/** `ok` tools can be called once enabled; the others cannot, whatever their status. */
export type ToolAvailability = "ok" | "changed" | "gone" | "unusable";

export interface CatalogueToolView {
  localName: string;
  server: string;
  remoteName: string;
  status: ToolStatus;
  availability: ToolAvailability;
  unusableReason: string | null;
  /**
   * The hash of the definition shown here (the current one). Enabling, accepting a change and
   * vouching send it back as `expectedHash`, so that what gets pinned is what the owner saw.
   */
  definitionHash: string;
  /** The tool's display name (MCP `title`), cleaned; null when its server gives none. */
  title: string | null;
  description: string;
  inputSchema: unknown;
  /** The schema of the tool's `structuredContent`, as listed; null when it has none. */
  outputSchema: unknown;
  annotations: Record<string, unknown> | null;
  /** The tool's icons that passed (see {@link ToolIconView}); empty when none did. */
  icons: ToolIconView[];
  /**
   * Whether a call waits for a reviewer, as `approvalNeed` (server/catalogue/approval.ts) decides:
   * destructive unless `readOnlyHint: true` or vouched; "Always confirm" makes any tool wait.
   */
  destructive: boolean;
  updatedAt: string;
  /** Why a call of this tool waits for a reviewer ("no readOnlyHint", ...); null when it runs at once. */
  approvalReason: string | null;
  /** What makes the tool read-only, if it is: its server's `readOnlyHint: true`, or an owner's vouch. */
  readOnlyBy: "annotation" | "vouch" | null;
  /** The owner wants every call confirmed, even if the tool is read-only. */
  alwaysConfirm: boolean;
  /** A vouch that holds for the current definition. */
  vouch: { by: string; at: string } | null;
  /** Why this tool cannot be vouched read-only; null when it can. */
  vouchProblem: string | null;
  /** Pinned definition vs current, when `availability` is "changed"; null otherwise. */
  change: ToolChangeView | null;
}

/** An enabled tool as `GET /api/tools` serves it; the optional fields are absent when the tool has none. */
export interface AgentToolView {
  name: string;
  /** The tool's display name (MCP `title`), cleaned and capped at 200 characters. */
  title?: string;
  description: string;
  inputSchema: unknown;
  /** The schema of the tool's `structuredContent`, as listed (cleaned like the input schema). */
  outputSchema?: unknown;
  annotations: Record<string, unknown> | null;
  /** The tool's icons that passed (see {@link ToolIconView}). */
  icons?: ToolIconView[];
  destructive: boolean;
}

/**
 * A tool's icon as Gatehouse passes it on: only a `data:` URI of a PNG, JPEG, GIF or WebP image
 * whose bytes are of that type, at most 16 KiB, never a URL on a tool server (which a browser or
 * agent would fetch); `mimeType` only when it names the URI's type, `sizes` only `WxH` or `any`.
 */
export interface ToolIconView {
  src: string;
  mimeType?: string;
  sizes?: string[];
  theme?: "light" | "dark";
}

/**
 * Every status a call can have, in the order of its life (the activity filter lists them so).
 * `withdrawn`: the requesting agent cancelled its held MCP request before anyone decided.
 */
export const callStatuses = [
  "pending",
  "running",
  "succeeded",
  "failed",
  "denied",
  "refused",
  "expired",
  "interrupted",
  "withdrawn",
] as const;
export const CallStatus = z.enum(callStatuses);
export type CallStatus = (typeof callStatuses)[number];

/** Still moving: waiting for a decision, or the tool is running. Every other status is final. */
const liveCallStatuses: readonly CallStatus[] = ["pending", "running"];
/** Statuses a call never leaves. */
export const finalCallStatuses: readonly CallStatus[] = callStatuses.filter(
  (s) => !liveCallStatuses.includes(s),
);

/** Whether `s` is a call status that never changes again. */
export function isFinalCallStatus(s: string): s is CallStatus {
  return (finalCallStatuses as readonly string[]).includes(s);
}

export interface CallView {
  id: string;
  tool: string;
  server: string;
  status: CallStatus;
  destructive: boolean;
  /** Why the call waits for a reviewer ("no readOnlyHint", ...), set at request time; null if it did not. */
  approvalReason: string | null;
  /** The tool's description as the catalogue has it now (capped, cleaned); null if the row is gone. */
  toolDescription: string | null;
  /** The tool's definition is no longer the one seen at request time: approving will be refused. */
  toolChanged: boolean;
  arguments: Record<string, unknown>;
  requester: { kind: "agent" | "user"; name: string };
  createdAt: string;
  expiresAt: string | null;
  decidedAt: string | null;
  decidedBy: string | null;
  reason: string | null;
  /** When Gatehouse let the call run; once the tool answered, when Gatehouse sent the call to it. */
  startedAt: string | null;
  /** When the call ended; for a tool that answered, when its answer came. */
  finishedAt: string | null;
  /** The MCP `CallToolResult`, when the tool ran. */
  result: unknown;
  resultTruncated: boolean;
  error: { code: string; message: string } | null;
  /**
   * The tool's run time: from when Gatehouse sent the call to when the answer came
   * (`finishedAt - startedAt`), the same figure as the outcome's audit row; null unless the call
   * succeeded or failed.
   */
  durationMs: number | null;
  /** The rule that decided the call (allowed, denied or held it), when one did. */
  rule: string | null;
  /** The grant that let it run without review, when one did. */
  grantId: string | null;
  /** Distinct reviewers the call needs before it runs (1 unless a rule asks for more). */
  approvalsNeeded: number;
  /** Reviewers who approved it so far, in order: "1 of 2" is `approvedBy.length` of `approvalsNeeded`. */
  approvedBy: string[];
}

/** A grant as reviewers and owners see it (`GET /api/grants`). */
export interface GrantView {
  id: string;
  /** Whose calls it covers. */
  requester: { kind: "agent" | "user"; name: string };
  tool: string;
  scope: GrantScope;
  /** For an `arguments` grant, the exact arguments it covers; null for a `tool` grant. */
  arguments: Record<string, unknown> | null;
  /** The approved call it was made with. */
  callId: string;
  createdBy: string;
  createdAt: string;
  expiresAt: string;
  /** Most calls it may cover; null: only time limits it. */
  usesAllowed: number | null;
  /** Calls it covered so far. */
  uses: number;
  lastUsedAt: string | null;
  /** `live` covers calls now; `ended` never will again. */
  state: "live" | "ended";
  /** Why it ended ("expired", "used up", "revoked by alice", "the tool's definition changed", ...); null while live. */
  endReason: string | null;
  /** When it ended (expiry time, last use, or the ending act); null while live. */
  endedAt: string | null;
}

/** `GET /api/grants`: live grants first (newest first), then recently ended ones. */
export interface GrantListView {
  grants: GrantView[];
}

/** One rule of `gatehouse.json` as the owner sees it (`GET /api/rules`). */
export interface RuleView {
  name: string;
  /** Globs on local tool names. */
  tools: string[];
  /** Token names; null: any requester. */
  agents: string[] | null;
  /** The CEL condition; null: always. */
  when: string | null;
  decision: "allow" | "deny" | "review";
  reason: string | null;
  /** Distinct reviewers a `review` rule needs (1 for the others). */
  approvals: number;
  /** Calls this rule decided, since the store began. */
  hits: number;
  lastHitAt: string | null;
  /** Enabled tools whose local name its globs match now. */
  matchingTools: string[];
}

/** `GET /api/rules`: the rules in the order they are tried. */
export interface RuleListView {
  rules: RuleView[];
  /** The tool set of each token a rule names that has one (token name → set). */
  toolSets: Record<string, string>;
}

/** Events on `GET /api/events` (server-sent events); each names what changed. */
export type LiveEvent =
  | { type: "call"; id: string; status: CallStatus }
  | { type: "catalogue"; server: string }
  | { type: "server"; name: string; state: ServerState }
  /** Grants changed other than by a call (revoked, or ended by a token's or a role's loss). */
  | { type: "grants" }
  /** An agent read a resource through `/mcp`, or was refused one: the list of reads grew. */
  | { type: "resources" }
  /**
   * A server's OAuth grant was stored or forgotten (a sign-in, a renewal, a refusal, a
   * Disconnect): the other replicas read it again, and the sign-in part of the server's view changed.
   */
  | { type: "oauth"; server: string }
  /** An owner moved agent token `name` into another tool set: its `/mcp` sessions are told. */
  | { type: "token"; name: string };

/** A server's resource, as the owner sees it (text cleaned and capped). */
export interface ResourceView {
  uri: string;
  name: string;
  description: string | null;
  mimeType: string | null;
}

export interface ResourceContentView {
  uri: string;
  contents: {
    mimeType: string | null;
    text: string | null;
    truncated: boolean;
    binaryBytes: number | null;
  }[];
}

export interface PromptView {
  name: string;
  description: string | null;
  arguments: { name: string; description: string | null; required: boolean }[];
}

export const ResourceReadQuery = z.object({ uri: z.string().min(1).max(2048) });

// Catalogue governance

/** A tool's `definitionHash` as `GET /api/catalogue` shows it (SHA-256, hex). */
export const definitionHash = z
  .string()
  .regex(/^[0-9a-f]{64}$/, "Give a definitionHash from GET /api/catalogue.");

/**
 * Body of `PATCH /api/catalogue/:name`: at least one of status, vouch and alwaysConfirm.
 * Enabling (which also accepts a change) and vouching bind to a definition, so they need
 * `expectedHash`, the tool's `definitionHash` as the owner reviewed it: a tool changed since is
 * refused (409 `tool_changed`) and nothing is changed. Disabling, withdrawing a vouch and
 * "always confirm" need none (disabling must work however often a server flips its tools).
 */
export const UpdateToolBody = z
  .object({
    status: z.enum(["enabled", "disabled"]).optional(),
    vouch: z.boolean().optional(),
    alwaysConfirm: z.boolean().optional(),
    expectedHash: definitionHash.optional(),
  })
  .strict()
  .refine((b) => b.status !== undefined || b.vouch !== undefined || b.alwaysConfirm !== undefined, {
    message: "Give at least one of status, vouch and alwaysConfirm.",
  })
  .refine((b) => b.expectedHash !== undefined || (b.status !== "enabled" && b.vouch !== true), {
    message: "To enable or vouch a tool, give expectedHash: its definitionHash as you reviewed it.",
    path: ["expectedHash"],
  });
export type UpdateToolBody = z.infer<typeof UpdateToolBody>;

/** Most tools one bulk request may change. */
export const BULK_MAX_TOOLS = 1000;
/**
 * Body of `POST /api/catalogue/bulk`: one status for many tools, in one transaction. Enabling
 * needs `expectedHashes`, each name's `definitionHash` as the owner reviewed it (see
 * {@link UpdateToolBody}); one tool changed since refuses the whole request.
 */
export const BulkToolStatusBody = z
  .object({
    names: z.array(z.string().min(1).max(200)).min(1).max(BULK_MAX_TOOLS),
    status: z.enum(["enabled", "disabled"]),
    expectedHashes: z.record(z.string(), definitionHash).optional(),
  })
  .strict()
  .refine(
    (b) =>
      b.status !== "enabled" || b.names.every((n) => b.expectedHashes && Object.hasOwn(b.expectedHashes, n)),
    {
      message: "To enable tools, give expectedHashes: each name's definitionHash as you reviewed it.",
      path: ["expectedHashes"],
    },
  );

export const ChangesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  /** Only changes with a smaller id (the next page of older changes). */
  before: z.coerce.number().int().min(1).optional(),
});
/** Body of `POST /api/changes/read`: everything up to this change id has been read. */
export const MarkChangesReadBody = z.object({ upTo: z.number().int().min(0) }).strict();

/** A tool definition exactly as its server listed it: untrusted, always rendered as text. */
export interface ToolDefinitionView {
  name: string;
  /** Absent when the tool has no title (so such a definition hashes as before titles were kept). */
  title?: string;
  description: string;
  inputSchema: unknown;
  outputSchema: unknown;
  annotations: Record<string, unknown> | null;
  /** Absent when no icon passed (see {@link ToolIconView}). */
  icons?: ToolIconView[];
}

/** One run of a text diff; concatenating the non-added runs gives the old text, the non-removed the new. */
export interface TextDiffPart {
  op: "same" | "added" | "removed";
  text: string;
}

/** One difference between two JSON schemas. `before` is absent for "added", `after` for "removed". */
export interface SchemaChange {
  /** Where, e.g. `properties.path.type` or `required`; "" for the schema as a whole. */
  path: string;
  kind: "added" | "removed" | "changed";
  before?: unknown;
  after?: unknown;
}

/** A changed annotation; an absent one is `null`. */
export interface AnnotationFlip {
  key: string;
  before: unknown;
  after: unknown;
  /** As people read it: `readOnlyHint: true → false`. */
  text: string;
  /** The tool now claims to be more dangerous (or less safe) than before. */
  riskier: boolean;
}

export interface DefinitionDiff {
  name: { before: string; after: string } | null;
  /** The title before and after (null: none); null when it did not change. */
  title: { before: string | null; after: string | null } | null;
  /** Word-level diff of the description; null when it did not change. */
  description: TextDiffPart[] | null;
  inputSchema: SchemaChange[];
  outputSchema: SchemaChange[];
  annotations: AnnotationFlip[];
  /** The icons differ (the before and after definitions hold them). */
  icons: boolean;
  /** What changed, in a few words each: ["description", "input schema", "readOnlyHint: true → false"]. */
  summary: string[];
  /** Any annotation flip is riskier. */
  riskier: boolean;
}

export interface ToolChangeView {
  /** The definition the owner enabled; null for a tool enabled before definitions were kept. */
  before: ToolDefinitionView | null;
  after: ToolDefinitionView;
  diff: DefinitionDiff | null;
}

export const changeKinds = [
  "added",
  "over_cap",
  "changed",
  "gone",
  "returned",
  "excluded",
  "vouch_dropped",
] as const;
export type ChangeKind = (typeof changeKinds)[number];

/** What a change row carries besides its kind; which fields are set depends on the kind. */
export interface ChangeDetail {
  /** The tool's status when the change was seen (added: "proposed"). */
  status?: string;
  /** changed: the definition hashes (first 12 hex digits). */
  fromHash?: string;
  toHash?: string;
  /** changed: what changed (see {@link DefinitionDiff.summary}). */
  summary?: string[];
  riskier?: boolean;
  /** changed: the tool is back at the definition the owner enabled. */
  restored?: boolean;
  /** added: why the tool cannot be used. */
  unusableReason?: string;
  /** excluded: the tool had a row before allowTools excluded it. */
  hadRow?: boolean;
  /** over_cap: the server's maxTools. */
  maxTools?: number;
  /** vouch_dropped: who vouched, and when. */
  vouchedBy?: string;
  vouchedAt?: string;
}

export interface ChangeView {
  id: number;
  at: string;
  server: string;
  kind: ChangeKind;
  /** The remote name, as the server lists it. */
  tool: string;
  /** The local name, when the tool has a catalogue row. */
  localName: string | null;
  detail: ChangeDetail | null;
  /** Newer than what the caller marked read. */
  unread: boolean;
}

export interface ChangesPage {
  /** Newest first. */
  changes: ChangeView[];
  /** The caller's unread changes in the whole feed. */
  unread: number;
  lastSeenId: number;
  /** Pass as `before` for the next (older) page; null when there is none. */
  nextBefore: number | null;
}

/** An owner's action on a tool, from the audit log. */
export interface ToolActionView {
  id: number;
  at: string;
  actor: string;
  action: string;
  detail: string | null;
}

export interface ToolHistoryView {
  /** What its server did, newest first. */
  changes: ChangeView[];
  /** What owners did (enable, disable, vouch, always confirm), newest first. */
  actions: ToolActionView[];
}

// Confirm flow

const isoTime = z.iso.datetime({ offset: true }).transform((value) => new Date(value).toISOString());

/** Query of `GET /api/calls`: every filter narrows the list; newest first, paged with `before`. */
export const CallListQuery = z.object({
  status: CallStatus.optional(),
  /** A server's name, exactly. */
  server: z.string().trim().min(1).max(64).optional(),
  /** Part of the tool's local name, case-insensitive. */
  tool: z.string().trim().min(1).max(200).optional(),
  /** A requester's name (agent token or person), exactly. */
  requester: z.string().trim().min(1).max(64).optional(),
  /** Created at or after (ISO 8601). */
  from: isoTime.optional(),
  /** Created at or before (ISO 8601). */
  to: isoTime.optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  /** `nextBefore` of the previous page. */
  before: z
    .string()
    .max(200)
    .regex(/^\d{4}-\d{2}-\d{2}T[\d:.]+Z\|[\w-]+$/, "Not a page cursor.")
    .optional(),
});
export type CallListQuery = z.input<typeof CallListQuery>;

export interface CallsPage {
  /** Newest first. */
  calls: CallView[];
  /** Pass as `before` for the next (older) page; null when this page is the last. */
  nextBefore: string | null;
}

/** One audit row of a call's life. */
export interface AuditEventView {
  id: number;
  at: string;
  /** Who acted: the requester, a reviewer, or "gatehouse" (expiry, restart). */
  actor: string;
  /** `call.pending`, `call.approved`, `call.succeeded`, ... */
  action: string;
  detail: string | null;
  /**
   * For an outcome (`call.succeeded`, `call.failed`), the tool's run time, as the call's own
   * `durationMs`; for a decision, how long the call had waited since it was requested.
   */
  durationMs: number | null;
}

/** `GET /api/calls/:id/story`: the call as stored (result capped) and its audit rows, oldest first. */
export interface CallStoryView {
  call: CallView;
  audit: AuditEventView[];
  /** The grant that let the call run, when one did (live or ended). */
  grant: GrantView | null;
}

// ---------------------------------------------------------------------------------------------
// Resource reads through /mcp, as owners and reviewers see them on the Activity page

/**
 * One `resources/read` an agent sent through `/mcp`, from its audit row. The URI is untrusted
 * text (an agent chose it): stored with hidden characters stripped, on one line, cut to 512
 * characters; render it as text.
 */
export interface ResourceReadView {
  id: number;
  at: string;
  /** The agent token's name. */
  agent: string;
  /** A `resources/read`, or a `prompts/get`. */
  kind: "resource" | "prompt";
  /**
   * The server the URI (or prompt name) named; null when it was not a `gatehouse://<server>/<uri>`
   * URI (or `<server>_<prompt>` name) at all.
   */
  server: string | null;
  /** The server's own URI, or for a prompt its own name (the whole URI or name sent when it named no server). */
  uri: string;
  /** Passed to its server (even if the server then failed); false: refused by Gatehouse. */
  allowed: boolean;
  /**
   * Why it was allowed or refused, and for a read the bytes returned, any cut, or the server's
   * failure (for a get: the number of arguments, never their values, and the messages returned).
   */
  detail: string | null;
  /** How long the server took; null for a refusal. */
  durationMs: number | null;
}

/** Query of `GET /api/resource-reads`. */
export const ResourceReadsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  /** `nextBefore` of the previous page: only reads with a smaller id. */
  before: z.coerce.number().int().min(1).optional(),
});

/** `GET /api/resource-reads`: newest first. */
export interface ResourceReadsPage {
  reads: ResourceReadView[];
  /** Pass as `before` for the next (older) page; null when this page is the last. */
  nextBefore: number | null;
}

/** The Servers page's health panel (`GET /api/health`), read from the store: the same on every replica. */
export interface HealthPanelView {
  /** When it was read (ISO 8601). */
  at: string;
  pendingNow: number;
  /** Reviewers' decisions (approve or deny) in the last hour. */
  decisionsLastHour: number;
  /** The starts of the UTC hours the charts cover, oldest first; the current hour last. */
  hours: string[];
  /** Per hour: reviewers' decisions, and the time from request to decision (s; null without any). */
  timeToDecision: { decisions: number; p50: number | null; p95: number | null }[];
  /** Calls made per hour, per server (by name, sorted). */
  callsPerServer: { server: string; counts: number[] }[];
  /** Notification deliveries given up on, over the same hours. */
  failedDeliveries: number;
}
