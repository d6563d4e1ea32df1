import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
// Relative, not "@/…": drizzle-kit loads this file without the tsconfig path aliases.
import { callStatuses } from "../../lib/api-types";
import { now } from "./schema-now";

export { now } from "./schema-now";
// The tables without a reference to another, in a file of their own (the size of this one).
export * from "./schema-sqlite-shared";

export const users = sqliteTable("users", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  name: text("name").notNull().unique(),
  passwordHash: text("password_hash").notNull(),
  /** Comma-separated subset of owner,reviewer. */
  roles: text("roles").notNull(),
  /** Where notifications for this person go (optional); never shown to agents. */
  email: text("email"),
  createdAt: text("created_at").notNull().default(now),
});

export const sessions = sqliteTable(
  "sessions",
  {
    /** sha256 of the cookie value; the value itself is never stored. */
    idHash: text("id_hash").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull().default(now),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [index("sessions_user_idx").on(t.userId)],
);

export const setupCodes = sqliteTable("setup_codes", {
  /** sha256 of the one-time code printed on the console. */
  codeHash: text("code_hash").primaryKey(),
  createdAt: text("created_at").notNull().default(now),
});

export const agentTokens = sqliteTable("agent_tokens", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  name: text("name").notNull().unique(),
  tokenHash: text("token_hash").notNull().unique(),
  createdBy: text("created_by"),
  createdAt: text("created_at").notNull().default(now),
  lastUsedAt: text("last_used_at"),
  revokedAt: text("revoked_at"),
  /** The token's tool set (a `toolSets` name); null: every enabled tool. */
  toolSet: text("tool_set"),
});

export const tools = sqliteTable(
  "tools",
  {
    localName: text("local_name").primaryKey(),
    server: text("server").notNull(),
    remoteName: text("remote_name").notNull(),
    /** proposed | enabled | disabled: the owner's decision, never set by discovery alone. */
    status: text("status").notNull(),
    /** Whether the server listed the tool at the last refresh. */
    present: integer("present", { mode: "boolean" }).notNull(),
    /** The definition as last listed (name, description, inputSchema, outputSchema, annotations). */
    definition: text("definition").notNull(),
    definitionHash: text("definition_hash").notNull(),
    /** Hash of the definition the owner enabled; a mismatch means "changed". */
    pinnedHash: text("pinned_hash"),
    /** The definition (JSON) the owner enabled, kept for the before/after diff of a change. */
    pinnedDefinition: text("pinned_definition"),
    /**
     * Hash of the definition an owner vouched for as read-only (tools without annotations). A
     * vouch holds only while the definition hash still equals it.
     */
    vouchedHash: text("vouched_hash"),
    vouchedBy: text("vouched_by"),
    vouchedAt: text("vouched_at"),
    /** The owner wants every call confirmed, even if the tool is read-only. */
    alwaysConfirm: integer("always_confirm", { mode: "boolean" }).notNull().default(false),
    description: text("description").notNull(),
    readOnly: integer("read_only", { mode: "boolean" }).notNull(),
    unusableReason: text("unusable_reason"),
    /**
     * The server's `allowTools` leaves this tool out (set at each refresh): not listed to agents,
     * holds no `maxTools` slot, and a call is refused as excluded rather than gone.
     */
    excluded: integer("excluded", { mode: "boolean" }).notNull().default(false),
    firstSeenAt: text("first_seen_at").notNull().default(now),
    updatedAt: text("updated_at").notNull().default(now),
  },
  (t) => [uniqueIndex("tools_server_remote_idx").on(t.server, t.remoteName)],
);

/**
 * The catalogue change feed: one row per tool event of a refresh (added, over_cap, changed,
 * gone, returned, excluded), newest by id.
 */
export const catalogueChanges = sqliteTable(
  "catalogue_changes",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    at: text("at").notNull().default(now),
    server: text("server").notNull(),
    kind: text("kind").notNull(),
    /** Remote tool name as the server lists it. */
    tool: text("tool").notNull(),
    /** Local name, when the tool has a row. */
    localName: text("local_name"),
    /** JSON with what the kind needs (e.g. hashes before and after). */
    detail: text("detail"),
  },
  (t) => [index("changes_server_idx").on(t.server), index("changes_local_idx").on(t.localName)],
);

/** How far each owner has read the change feed (the newest change id seen). */
export const changeReads = sqliteTable("change_reads", {
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id, { onDelete: "cascade" }),
  lastSeenId: integer("last_seen_id").notNull(),
});

/** Tools a server listed beyond its maxTools: recorded, never proposed. */
export const overCapTools = sqliteTable(
  "over_cap_tools",
  {
    server: text("server").notNull(),
    remoteName: text("remote_name").notNull(),
    seenAt: text("seen_at").notNull().default(now),
    /** The server's `maxTools` when the tool was refused. */
    maxTools: integer("max_tools").notNull().default(0),
    /** Where to raise it: `<config file> line <n>` of the server's entry; null when unknown. */
    entryAt: text("entry_at"),
  },
  (t) => [uniqueIndex("over_cap_server_remote_idx").on(t.server, t.remoteName)],
);

/**
 * Servers an owner switched on from the Servers page: their entries have no `enabled` key, so
 * they would start dark. Remembered across restarts; "Switch off" deletes the row. An entry's
 * own `"enabled"` always wins over this.
 */
export const serverSwitches = sqliteTable("server_switches", {
  name: text("name").primaryKey(),
  switchedBy: text("switched_by").notNull(),
  switchedAt: text("switched_at").notNull().default(now),
});

export const calls = sqliteTable(
  "calls",
  {
    id: text("id").primaryKey(),
    tool: text("tool").notNull(),
    server: text("server").notNull(),
    remoteName: text("remote_name").notNull(),
    arguments: text("arguments").notNull(),
    argumentsDigest: text("arguments_digest").notNull(),
    definitionHash: text("definition_hash"),
    destructive: integer("destructive", { mode: "boolean" }).notNull(),
    /** Why the call needs approval, as shown to reviewers (e.g. "no readOnlyHint"). */
    approvalReason: text("approval_reason"),
    requesterKind: text("requester_kind").notNull(),
    requesterName: text("requester_name").notNull(),
    status: text("status", { enum: callStatuses }).notNull(),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at"),
    decidedAt: text("decided_at"),
    decidedBy: text("decided_by"),
    reason: text("reason"),
    startedAt: text("started_at"),
    finishedAt: text("finished_at"),
    result: text("result"),
    resultTruncated: integer("result_truncated", { mode: "boolean" }).notNull().default(false),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    /** The rule (by name) that decided the call, when one did; hit counts are counted from it. */
    rule: text("rule"),
    /** The grant that let the call run without review, when one did. */
    grantId: text("grant_id"),
    /** Distinct reviewers a held call needs (a rule's `approvals`); 1 otherwise. */
    approvalsNeeded: integer("approvals_needed").notNull().default(1),
    /** JSON array of the reviewers who approved so far, in order (distinct). */
    approvedBy: text("approved_by").notNull().default("[]"),
    /**
     * The replica (`replicas.id`) that committed the call `running` and asks its tool; null
     * before. Once that replica stops heartbeating, a survivor marks the call `interrupted`.
     */
    replica: text("replica"),
  },
  (t) => [
    index("calls_status_idx").on(t.status),
    index("calls_rule_idx").on(t.rule),
    index("calls_created_idx").on(t.createdAt),
    index("calls_requester_idx").on(t.requesterName),
    // An agent's waiting calls, counted at each birth that would wait (maxPendingCalls).
    index("calls_requester_status_idx").on(t.requesterName, t.status),
    index("calls_tool_idx").on(t.tool),
    index("calls_replica_idx").on(t.replica),
  ],
);

/** Append-only record of every call transition and every owner action. */
export const auditEvents = sqliteTable(
  "audit_events",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    at: text("at").notNull().default(now),
    actor: text("actor").notNull(),
    action: text("action").notNull(),
    subject: text("subject").notNull(),
    callId: text("call_id"),
    detail: text("detail"),
    durationMs: integer("duration_ms"),
  },
  (t) => [index("audit_call_idx").on(t.callId), index("audit_at_idx").on(t.at)],
);

/**
 * The notification outbox: one row per message to one destination (a webhook, or one person's
 * email address). A call's row and its notification rows are written in the same transaction, so a
 * crash between the call and the delivery loses nothing; the dispatcher sends what is due, retries
 * with backoff, and records the outcome on the row, which is also the delivery log.
 */
export const notificationDeliveries = sqliteTable(
  "notification_deliveries",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** Random id sent with the message (`deliveryId`), so a receiver can drop a repeat. */
    deliveryId: text("delivery_id").notNull().unique(),
    /** `webhook` or `email`. */
    channel: text("channel", { enum: ["webhook", "email"] }).notNull(),
    /** The webhook's name, or the user name an email goes to. */
    target: text("target").notNull(),
    /** `call.pending`, `call.decided`, `call.expired`, `call.interrupted` or `catalogue.changed`. */
    event: text("event").notNull(),
    callId: text("call_id"),
    /**
     * Who asked for the call the message is about (`agent:<name>` or `user:<name>`); null for
     * catalogue changes. Due rows of one destination are sent in turn per requester.
     */
    requester: text("requester"),
    /** The event's facts as JSON, as they were when it happened; the message is built from them at send time. */
    payload: text("payload").notNull(),
    /** queued (due at `nextAttemptAt`), delivered, or failed (given up). */
    status: text("status", { enum: ["queued", "delivered", "failed"] }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: text("next_attempt_at").notNull(),
    /**
     * While a dispatcher tries the row: the end of its lease (ISO 8601), else null. A process that
     * dies mid-try leaves it set; the row is due again once it has passed.
     */
    claimedUntil: text("claimed_until"),
    /** The replica that claimed it: a survivor gives a dead one's claims back at once. */
    claimedBy: text("claimed_by"),
    /** No try after this time (a call's expiry); null: the retry limit alone ends it. */
    deadline: text("deadline"),
    /** The last try's HTTP status, when there was an answer. */
    lastStatus: integer("last_status"),
    /** The last try's failure in words that carry no secret (no URL path or query). */
    lastError: text("last_error"),
    createdAt: text("created_at").notNull().default(now),
    /** When it was delivered or given up. */
    finishedAt: text("finished_at"),
  },
  (t) => [
    index("notification_due_idx").on(t.status, t.nextAttemptAt),
    index("notification_target_idx").on(t.channel, t.target, t.id),
  ],
);

/**
 * Grants: a reviewer's "and allow the same agent this tool (with these arguments, or any) for a
 * while, at most N more times". A grant is pinned to the tool's definition hash; it is live only
 * while it has not ended (`endedAt`), has not expired, has uses left, and its requester's token
 * and its reviewer's role still stand. `uses` counts the calls it covered (the approved call is
 * not one of them).
 */
export const grants = sqliteTable(
  "grants",
  {
    id: text("id").primaryKey(),
    /** `agent` (a token's name) or `user`: whose calls it covers. */
    requesterKind: text("requester_kind").notNull(),
    requesterName: text("requester_name").notNull(),
    /** Local tool name. */
    tool: text("tool").notNull(),
    /** The tool definition the approved call was bound to; any other definition is not covered. */
    definitionHash: text("definition_hash").notNull(),
    /** `arguments`: only these exact arguments; `tool`: any arguments. */
    scope: text("scope", { enum: ["arguments", "tool"] }).notNull(),
    /** For `arguments` grants: the digest of the approved call's arguments. */
    argumentsDigest: text("arguments_digest"),
    /** The approved call the grant was made with. */
    callId: text("call_id").notNull(),
    createdBy: text("created_by").notNull(),
    /**
     * The role that let `createdBy` approve and grant: `reviewer` when they held it, else `owner`
     * (owners may approve too). The grant stands only while they still hold that role.
     */
    madeAs: text("made_as", { enum: ["reviewer", "owner"] }).notNull(),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    /** Most calls it may cover; null: no limit but time. */
    usesAllowed: integer("uses_allowed"),
    uses: integer("uses").notNull().default(0),
    lastUsedAt: text("last_used_at"),
    /** Set when something other than time or use ended it (revoked, definition changed, ...). */
    endedAt: text("ended_at"),
    /** Why it ended, as people read it: "revoked by alice", "the tool's definition changed", ... */
    endReason: text("end_reason"),
  },
  (t) => [index("grants_cover_idx").on(t.tool, t.requesterName), index("grants_created_idx").on(t.createdAt)],
);

/**
 * One OAuth sign-in to a remote server (PRODUCT.md §12): what Gatehouse holds to reach it. The
 * tokens and the client's registration are in `sealed` (SecretBox, context
 * `oauth:<server>:grant`), never in clear; the other columns say what an owner may see.
 */
export const serverOauth = sqliteTable("server_oauth", {
  /** The server's config name. */
  server: text("server").primaryKey(),
  /** The MCP server URL (the RFC 8707 resource) the grant is for: a changed URL is a new sign-in. */
  resource: text("resource").notNull(),
  /** SecretBox-sealed JSON: the registered client, the tokens, the discovery state. */
  sealed: text("sealed").notNull(),
  /** The authorization server that issued the tokens; tokens are used only with it. */
  issuer: text("issuer"),
  /** The scopes granted, space-separated (RFC 6749 §3.3); null when the server did not say. */
  scope: text("scope"),
  /** When the access token held now expires; null when unknown or none is held. */
  accessExpiresAt: text("access_expires_at"),
  connectedBy: text("connected_by"),
  connectedAt: text("connected_at"),
  refreshedAt: text("refreshed_at"),
  /** Why an owner must sign in again (a refused refresh, say); null while the grant is usable. */
  problem: text("problem"),
  updatedAt: text("updated_at").notNull().default(now),
});

/**
 * A sign-in an owner started and the authorization server has not yet sent back: found by the
 * hash of its `state`, bound to the starting browser by the hash of a cookie, and used once.
 */
export const oauthPending = sqliteTable(
  "oauth_pending",
  {
    /** sha256 of the `state` sent to the authorization server. */
    stateHash: text("state_hash").primaryKey(),
    server: text("server").notNull(),
    /** sha256 of the value of the sign-in cookie set on the browser that pressed Connect. */
    bindingHash: text("binding_hash").notNull(),
    /** The owner who pressed Connect. */
    startedBy: text("started_by").notNull(),
    /** SecretBox-sealed JSON (context `oauth:<server>:pending`): PKCE verifier, discovery, client, redirect URI, scope. */
    sealed: text("sealed").notNull(),
    createdAt: text("created_at").notNull().default(now),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [index("oauth_pending_server_idx").on(t.server)],
);

/**
 * The last state changes of each configured server (`HISTORY_LENGTH`, 50, per server; older rows
 * are deleted in the transaction that adds one), so the Servers page's history outlives a
 * restart. `detail` is stored redacted: it may quote what a server echoed of a credential.
 */
export const serverHistory = sqliteTable(
  "server_history",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** The server's config name. */
    server: text("server").notNull(),
    at: text("at").notNull(),
    /** A `ServerState`. */
    state: text("state").notNull(),
    detail: text("detail"),
    /** The first change of a Gatehouse run: the process (re)started here. */
    started: integer("started", { mode: "boolean" }).notNull().default(false),
  },
  (t) => [index("server_history_server_idx").on(t.server, t.id)],
);

/** `/mcp` 2025 sessions: what `initialize` settled, so any replica serves one (stored-sessions.ts). */
export const mcpSessions = sqliteTable(
  "mcp_sessions",
  {
    id: text("id").primaryKey(),
    tokenId: integer("token_id")
      .notNull()
      .references(() => agentTokens.id, { onDelete: "cascade" }),
    protocolVersion: text("protocol_version").notNull(),
    /** JSON of the client's `initialize` params (capabilities, clientInfo). */
    client: text("client").notNull(),
    createdAt: text("created_at").notNull().default(now),
    lastActiveAt: text("last_active_at").notNull().default(now),
  },
  (t) => [index("mcp_sessions_token_idx").on(t.tokenId)],
);
