import "server-only";
import { randomUUID } from "node:crypto";
import type { Requester } from "../calls/call-row";
import type { ModernLegDeps, VerifiedAgent } from "./modern";
import { createAgentServer } from "./server";
import { type Session, type SessionTable, SessionTransport } from "./sessions";
import type { StoredSessions } from "./stored-sessions";

/** What every 2025 session of an endpoint is built with, and the endpoint's lists of them. */
export type SessionParts = Omit<ModernLegDeps, "jsonWindowMs"> & {
  sessions: SessionTable;
  stored: StoredSessions;
};

/**
 * A 2025 session of `agent`, not yet connected, counted busy with its `initialize` (`open` is
 * 1): a new one, or the stored session `restoring` to be brought back. It leaves `parts.sessions`
 * when its transport closes, and a DELETE deletes its row too.
 */
export function createSession(
  parts: SessionParts,
  agent: VerifiedAgent,
  req: Request,
  restoring?: string,
): Session {
  const baseUrl = (parts.publicOrigin ?? new URL(req.url).origin).replace(/\/$/, "");
  // Chosen here, so the session is in the table under its id before the transport runs.
  const id = restoring ?? randomUUID();
  const release = new AbortController();
  const transport = new SessionTransport({
    sessionIdGenerator: () => id,
    onsessioninitialized: () => {
      if (restoring) return;
      parts.log.info(`agent session opened`, {
        token: agent.name,
        sessions: parts.sessions.count(agent.name),
      });
    },
    // DELETE: answered once the row is gone, so that no replica brings the session back.
    onsessionclosed: async () => {
      session.closing = true;
      parts.sessions.remove(session);
      await parts.stored.forget(id);
    },
  });
  // The session's requester: the endpoint sets its tool set again on every request (a token moved
  // meanwhile is judged by its new set).
  const requester: Requester = { kind: "agent", name: agent.name, toolSet: agent.toolSet };
  const server = createAgentServer(
    {
      listed: parts.listed,
      ...(parts.toolSets ? { toolSets: parts.toolSets } : {}),
      db: parts.db,
      manager: parts.manager,
      log: parts.log,
      descriptionMaxChars: parts.descriptionMaxChars,
      bus: parts.bus,
      call: {
        broker: parts.broker,
        bus: parts.bus,
        log: parts.log,
        requester,
        waitSeconds: parts.waitSeconds,
        progressIntervalMs: parts.progressIntervalMs,
        baseUrl,
        closing: () => session.closing,
        holding: (delta) => {
          session.holding += delta;
        },
        endStream: (requestId) => transport.closeSSEStream(requestId),
        release: release.signal,
      },
    },
    "2025",
  );
  const session: Session = {
    id,
    tokenId: agent.id,
    tokenName: agent.name,
    requester,
    server,
    transport,
    lastActive: Date.now(),
    lastUse: 0,
    // A new session's row is written with its first use; a restored one's at its first request.
    storedUse: restoring ? 0 : Date.now(),
    open: 1,
    holding: 0,
    release,
    answering: new Set(),
    closing: false,
    closed: false,
  };
  // Runs before the SDK aborts the session's in-flight handlers, so a held call can tell a
  // teardown (the call stays pending) from the client's cancellation (the call is withdrawn).
  transport.onclose = () => {
    session.closing = true;
    parts.sessions.remove(session);
  };
  server.onerror = (err) => parts.log.debug(`agent session ${session.id}: ${err.message}`);
  return session;
}
