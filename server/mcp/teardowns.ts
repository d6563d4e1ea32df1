/**
 * The connections a {@link ServerSupervisor} has let go of, while they close. A supervisor drops
 * a connection at once (a failure, a Reconnect, a dial a newer one overtook) and dials again
 * without waiting; the old connection's close (a stdio child's staged stop) runs on here, and
 * `settled()` lets `stop()` wait for every one of them, so no child outlives Gatehouse's stop.
 *
 * @see ServerSupervisor in ./supervisor.ts, the one user.
 */
import "server-only";
import type { Client, Transport } from "@modelcontextprotocol/client";

export class Teardowns {
  /** Closes still under way; each removes itself once settled. */
  private readonly pending = new Set<Promise<void>>();

  /** `onCloseError` hears a close that failed (it is only worth a debug line). */
  constructor(private readonly onCloseError: (err: unknown) => void) {}

  /**
   * Closes `client` and `transport` (the supervisor's transports close once, however often
   * asked). Its `onclose` is unhooked first: the end of a dropped connection is no failure to
   * report. The transport is closed by itself too: while the client's connect negotiates the
   * protocol era, the client does not have it yet, and its close would leave the child running.
   */
  close(client: Client | null, transport: Transport | null): Promise<void> {
    if (client) client.onclose = undefined;
    return this.track(
      (async () => {
        try {
          await client?.close();
        } catch (err) {
          this.onCloseError(err);
        }
        try {
          await transport?.close();
        } catch (err) {
          this.onCloseError(err);
        }
      })(),
    );
  }

  /**
   * Closes a dial that a newer one overtook (two Reconnects in a row, say): its child must not
   * outlive it. A client that fails to close has its transport closed instead.
   */
  abandon(client: Client, transport: Transport): void {
    client.onclose = undefined;
    void this.track(
      client
        .close()
        .catch(() => transport.close())
        .catch(() => undefined),
    );
  }

  /** Resolves once every close under way now has settled. */
  async settled(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  private track(done: Promise<void>): Promise<void> {
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
    return done;
  }
}
