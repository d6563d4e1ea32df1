import "server-only";
import type { Client, ConnectOptions, Transport } from "@modelcontextprotocol/client";
import type { ServerConfig } from "../config";
import { STDIO_PROBE_TIMEOUT_MS } from "./client";
import { connectionClosed, negotiationFailed, refusedVersion, speaksModern } from "./failures";
import { BoundedStdioTransport, ProbeUnansweredError } from "./stdio-transport";

/**
 * Which protocol era one server is dialled in, kept across its reconnects. By default a dial
 * probes with `server/discover` (the SDK's `auto` negotiation: a 2026-07-28 server answers it, a
 * 2025 one gets `initialize` on the same connection). Once the server is known to speak 2025 only,
 * later dials skip the probe: a 2025 stdio server that ignores requests before `initialize` would
 * otherwise cost the probe's whole timeout on every dial. Legacy HTTP+SSE is a 2025 transport and
 * is never probed.
 *
 * Only an answer makes a server a 2025 one: a probe that went unanswered (a modern server slow to
 * start under load) is no verdict. A stdio probe unanswered within the short wait fails the dial
 * (backoff, and the next probe waits the server's whole `timeoutMs`); one unanswered even then
 * lets the 2025 `initialize` through for that connection (a 2025 server that ignores requests
 * before `initialize`), still without remembering the server as 2025.
 */
export class EraVerdict {
  private legacyOnly = false;

  constructor(private readonly transport: ServerConfig["transport"]) {}

  /** Whether the next dial skips the probe. */
  get legacy(): boolean {
    return this.legacyOnly || this.transport === "sse";
  }

  /** The `prior` of the next dial's `connect`, if any. */
  connectOptions(): Pick<ConnectOptions, "prior"> {
    return this.legacy ? { prior: { kind: "legacy" } } : {};
  }

  /**
   * The client options of the next stdio dial's probe: the short wait, or once {@link patient}
   * the server's whole `timeoutMs` (never less than the short wait).
   */
  probeOptions(timeoutMs: number): { stdioProbeTimeoutMs?: number } {
    return this.patient ? { stdioProbeTimeoutMs: Math.max(timeoutMs, STDIO_PROBE_TIMEOUT_MS) } : {};
  }

  /** Readies a dial's transport: a short stdio probe left unanswered fails the dial. */
  dialling(transport: Transport): void {
    if (transport instanceof BoundedStdioTransport && !this.patient) {
      transport.refuseAfterSilentProbe = STDIO_PROBE_TIMEOUT_MS;
    }
  }

  /**
   * A dial completed its handshake on `client` over `transport`. Returns, for the history, what
   * an unanswered probe meant for this connection; null otherwise.
   */
  connected(client: Client, transport: Transport): string | null {
    if (client.getProtocolEra() !== "legacy") return null;
    if (transport instanceof BoundedStdioTransport && transport.probe === "sent") {
      return "the server did not answer server/discover in time but answered initialize: it speaks 2025 on this connection, and is probed again at its next dial";
    }
    this.legacyOnly = true;
    return null;
  }

  /**
   * A dial failed with `err` (on `client` over `transport`). Returns `"probe-again"` when the
   * server, known as a 2025 one, now refuses 2025 (it was upgraded): the caller dials again at
   * once, probing. Otherwise learns what the failure says of the era: a stdio dial that sent
   * `initialize` (the probe said 2025) or whose child went away at the probe (some 2025 servers
   * exit on a request before `initialize`) is dialled as 2025 from now on; the failure itself still
   * counts as one (a server that dies at every start is a crash loop either way). A probe left
   * unanswered is no verdict: the next one waits longer.
   */
  failed(client: Client, transport: Transport, err: unknown): "probe-again" | null {
    if (err instanceof ProbeUnansweredError) {
      this.patient = true;
      return null;
    }
    if (this.legacyOnly && this.transport !== "sse" && refusedVersion(err)) {
      this.legacyOnly = false;
      return "probe-again";
    }
    if (speaksModern(err)) {
      // It refused 2025 naming 2026-07-28: the probe went unanswered in time (a server slow to
      // start), so the next one waits as long as any request may.
      this.patient = true;
      return null;
    }
    if (!(transport instanceof BoundedStdioTransport)) return null;
    const answered = transport.initializeSent && transport.probe !== "sent";
    if (answered || closedAtProbe(client, err)) this.legacyOnly = true;
    return null;
  }

  /**
   * Any failure of the connection (a refresh or a request, not only a dial) said by `err`: a
   * server that now refuses 2025 naming 2026-07-28 was upgraded under the connection, and is
   * probed at the next dial.
   */
  connectionFailed(err: unknown): void {
    if (this.transport !== "sse" && speaksModern(err)) {
      this.legacyOnly = false;
      this.patient = true;
    }
  }

  /**
   * Whether the next probe waits the server's whole `timeoutMs` rather than the short stdio
   * probe: set once a server left a short probe unanswered, or answered the 2025 handshake saying
   * it speaks 2026-07-28.
   */
  patient = false;

  /** The owner's Reconnect: probe again. */
  reset(): void {
    this.legacyOnly = false;
    this.patient = false;
  }
}

/**
 * Whether a dial failed because the connection went away during the era probe, before any era
 * was agreed: the SDK then says the negotiation failed, or that the connection closed.
 */
function closedAtProbe(client: Client, err: unknown): boolean {
  if (client.getProtocolEra() !== undefined) return false;
  return connectionClosed(err) || negotiationFailed(err);
}
