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
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "use 1-64 letters, digits, '.', '_' or '-'");
export const password = z.string().min(10, "use at least 10 characters").max(1024);

export const SetupBody = z.object({ code: z.string().min(1), name: userName, password });
export const SignInBody = z.object({
  name: z.string().min(1).max(64),
  password: z.string().min(1).max(1024),
});
export const CreateUserBody = z.object({
  name: userName,
  password,
  roles: z.array(z.enum(roles)).min(1),
});
export const CreateTokenBody = z.object({ name: userName });
export const SetToolStatusBody = z.object({ status: z.enum(["enabled", "disabled"]) });
export const CallBody = z.object({
  tool: z.string().min(1).max(200),
  arguments: z.record(z.string(), z.unknown()).default({}),
});
export const DenyBody = z.object({ reason: z.string().trim().min(1, "give a reason").max(2000) });
export const WaitQuery = z.object({ wait: z.coerce.number().min(0).max(120).optional() });

export interface UserView {
  id: number;
  name: string;
  roles: Role[];
  createdAt: string;
}

export interface TokenView {
  name: string;
  createdAt: string;
  createdBy: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** `failed`: a crash loop stopped the retries until an owner presses Reconnect. */
export type ServerState = "dark" | "connecting" | "ready" | "backoff" | "failed" | "closed";

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
  tools: { listed: number; proposed: number; enabled: number; disabled: number; overCap: number };
  stderrTail: string[];
  /** Newest last. */
  history: { at: string; state: ServerState; detail: string | null }[];
}

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
  description: string;
  inputSchema: unknown;
  annotations: Record<string, unknown> | null;
  destructive: boolean;
  updatedAt: string;
}

export interface AgentToolView {
  name: string;
  description: string;
  inputSchema: unknown;
  annotations: Record<string, unknown> | null;
  destructive: boolean;
}

export type CallStatus =
  | "refused"
  | "pending"
  | "running"
  | "succeeded"
  | "failed"
  | "denied"
  | "expired"
  | "interrupted";

export const finalCallStatuses: readonly CallStatus[] = [
  "refused",
  "succeeded",
  "failed",
  "denied",
  "expired",
  "interrupted",
];

export interface CallView {
  id: string;
  tool: string;
  server: string;
  status: CallStatus;
  destructive: boolean;
  arguments: Record<string, unknown>;
  requester: { kind: "agent" | "user"; name: string };
  createdAt: string;
  expiresAt: string | null;
  decidedAt: string | null;
  decidedBy: string | null;
  reason: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  /** The MCP `CallToolResult`, when the tool ran. */
  result: unknown;
  resultTruncated: boolean;
  error: { code: string; message: string } | null;
}

/** Events on `GET /api/events` (server-sent events); each names what changed. */
export type LiveEvent =
  | { type: "call"; id: string; status: CallStatus }
  | { type: "catalogue"; server: string }
  | { type: "server"; name: string; state: ServerState };

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
