import "server-only";
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { type JSONRPCMessage, parseJSONRPCMessage, type Transport } from "@modelcontextprotocol/client";
import { escapeControls, redact } from "../log";

/**
 * The variables a stdio server inherits from Gatehouse's own environment; everything else it
 * gets comes from its `env` in the config. Secrets in Gatehouse's environment stay there.
 */
export const INHERITED_ENV = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
  "TMPDIR",
  "TZ",
] as const;

export function childEnv(configured: Record<string, string>, parent = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of INHERITED_ENV) {
    const v = parent[key];
    if (v !== undefined) env[key] = v;
  }
  return { ...env, ...configured };
}

/**
 * Characters of a line kept beyond `maxLineChars` until it is redacted: a secret that starts
 * before the cut and ends after it is still found whole (up to this length), so the cut never
 * leaves its first characters on show.
 */
const REDACT_SLACK_CHARS = 1024;

/**
 * A fixed-size ring of the last lines a child wrote to stderr, as owners are shown them: each
 * line passed through {@link redact} before it is cut to `maxLineChars` (a secret the server
 * prints never reaches the ring, and a cut never halves one), a CRLF's carriage return dropped,
 * other control characters escaped.
 */
export class LineRing {
  private readonly lines: string[] = [];
  private partial = "";

  constructor(
    private readonly maxLines = 200,
    private readonly maxLineChars = 2000,
  ) {}

  push(chunk: string): void {
    const parts = (this.partial + chunk).split("\n");
    this.partial = (parts.pop() ?? "").slice(0, this.maxLineChars + REDACT_SLACK_CHARS);
    for (const line of parts) this.add(line.endsWith("\r") ? line.slice(0, -1) : line);
  }

  private shown(line: string): string {
    const redacted = redact(line.slice(0, this.maxLineChars + REDACT_SLACK_CHARS));
    const text = redacted.length > this.maxLineChars ? `${redacted.slice(0, this.maxLineChars)}…` : redacted;
    // Tabs stay (stack traces indent with them); a carriage return or an ANSI escape that would
    // redraw the line where it is printed is shown as written, `\r`, `\u001b`.
    return text.split("\t").map(escapeControls).join("\t");
  }

  private add(line: string): void {
    this.lines.push(this.shown(line));
    if (this.lines.length > this.maxLines) this.lines.shift();
  }

  snapshot(): string[] {
    return this.partial ? [...this.lines, this.shown(this.partial)] : [...this.lines];
  }
}

/** How long a failed write waits for the child's exit, to report that instead of the broken pipe. */
const EXIT_AFTER_BROKEN_PIPE_MS = 500;

/** Children still alive, killed synchronously if Gatehouse exits without stopping them. */
const liveChildren = new Set<ChildProcessWithoutNullStreams>();
let exitHookInstalled = false;

function killGroup(child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of liveChildren) killGroup(child, "SIGKILL");
  });
}

export interface StdioTransportOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
  /** Largest line accepted from the child; a longer one is refused while it grows. */
  maxFrameBytes: number;
  stderr: LineRing;
  /** Grace periods of the staged stop (default 1000 ms after closing stdin, then 2000 ms after SIGTERM). */
  stopGraceMs?: { afterStdin: number; afterTerm: number };
}

/**
 * A stdio dial whose `server/discover` probe went unanswered was refused its `initialize`: silence
 * is no answer, so the SDK's stdio fallback (a probe unanswered in time means a 2025 server) is
 * not taken, and the dial fails instead (see `EraVerdict.dialling`).
 */
export class ProbeUnansweredError extends Error {
  constructor(readonly waitedMs: number) {
    super(
      `the server did not answer server/discover within ${waitedMs} ms (still starting?); an unanswered probe says nothing of its protocol era, so it is not taken for a 2025 server`,
    );
  }
}

/**
 * A stdio transport for untrusted servers (the SDK's own buffers whole lines before checking
 * their size and cannot kill a process group). The child runs in its own process group; its
 * death is seen through `'exit'`, even while a grandchild still holds the pipes.
 */
export class BoundedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcessWithoutNullStreams | null = null;
  private chunks: Buffer[] = [];
  private pendingBytes = 0;
  private closed = false;
  private exited: Promise<void> = Promise.resolve();
  private exited_: string | null = null;

  constructor(private readonly opts: StdioTransportOptions) {}

  /** "server process exited (…)" once the child has exited; null before. */
  get exitReason(): string | null {
    return this.exited_;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Always null: the child's stderr goes to the ring, never to the SDK. Present because the SDK
   * takes a transport with `pid` and `stderr` for a stdio one, and on stdio a server that does
   * not answer the `server/discover` probe is a 2025 server to fall back for (on HTTP, an outage).
   */
  get stderr(): null {
    return null;
  }

  /**
   * Spawns the server. Refused once closed: a supervisor stopped while its dial was on the way
   * (a switch off right after a switch on) closes the transport before the SDK starts it, and
   * a child spawned then would have nobody to stop it.
   */
  async start(): Promise<void> {
    if (this.closed) throw new Error("the connection was closed before the server was started");
    installExitHook();
    const child: ChildProcessWithoutNullStreams = spawn(this.opts.command, this.opts.args, {
      env: childEnv(this.opts.env) as NodeJS.ProcessEnv,
      cwd: this.opts.cwd ?? undefined,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
      windowsHide: true,
    });
    this.child = child;
    liveChildren.add(child);
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));

    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", (err) => reject(new Error(`could not start ${this.opts.command}: ${err.message}`)));
    });

    child.on("error", (err) => this.fail(err));
    child.once("exit", (code, signal) => {
      liveChildren.delete(child);
      this.exited_ = `server process exited (${signal ?? `code ${code}`})`;
      if (!this.closed) this.fail(new Error(this.exited_));
    });
    child.stdout.on("data", (chunk: Buffer) => this.read(chunk));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => this.opts.stderr.push(chunk));
    // Writing to a dead child raises EPIPE on stdin; the exit handler reports the death.
    child.stdin.on("error", () => {});
  }

  private read(chunk: Buffer): void {
    // Once closed (e.g. after an oversized frame) nothing more is buffered or delivered.
    if (this.closed) return;
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl === -1) {
        const rest = chunk.subarray(start);
        this.pendingBytes += rest.length;
        // Counted as it grows: a line without a newline is refused before it is held whole.
        if (this.pendingBytes > this.opts.maxFrameBytes) {
          this.chunks = [];
          this.pendingBytes = 0;
          this.fail(
            new Error(`server sent a message larger than maxFrameBytes (${this.opts.maxFrameBytes} bytes)`),
          );
          return;
        }
        if (rest.length > 0) this.chunks.push(Buffer.from(rest));
        return;
      }
      const piece = chunk.subarray(start, nl);
      if (this.pendingBytes + piece.length > this.opts.maxFrameBytes) {
        this.chunks = [];
        this.pendingBytes = 0;
        this.fail(
          new Error(`server sent a message larger than maxFrameBytes (${this.opts.maxFrameBytes} bytes)`),
        );
        return;
      }
      const line = this.chunks.length > 0 ? Buffer.concat([...this.chunks, piece]) : piece;
      this.chunks = [];
      this.pendingBytes = 0;
      start = nl + 1;
      this.deliver(line.toString("utf8").replace(/\r$/, ""));
      if (this.closed) return;
    }
  }

  private deliver(line: string): void {
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(JSON.parse(line));
    } catch {
      this.onerror?.(new Error("server wrote a line that is not a JSON-RPC message"));
      return;
    }
    if (this.probe === "sent" && "id" in message && message.id === this.probeId && !("method" in message))
      this.probe = "answered";
    this.onmessage?.(message);
  }

  /** Fatal transport error: report it, stop the child, and close. */
  private fail(error: Error): void {
    if (this.closed) return;
    this.onerror?.(error);
    void this.close(true);
  }

  /**
   * Whether `initialize` was sent on this connection: on a dial that probed first, the SDK took
   * the server for a 2025 one (it sends `initialize` only then), even if the dial failed later.
   */
  initializeSent = false;

  /**
   * This connection's `server/discover` probe: not sent, sent and not answered (yet), answered.
   * `initialize` after a probe still unanswered means the SDK's probe timed out.
   */
  probe: "none" | "sent" | "answered" = "none";
  private probeId: string | number | null = null;

  /**
   * When set, the probe's wait (ms): an `initialize` after a probe unanswered that long is refused
   * with {@link ProbeUnansweredError} rather than sent. Null (the default) lets it through.
   */
  refuseAfterSilentProbe: number | null = null;

  async send(message: JSONRPCMessage): Promise<void> {
    if ("method" in message && message.method === "server/discover" && "id" in message) {
      this.probe = "sent";
      this.probeId = message.id;
    }
    if ("method" in message && message.method === "initialize") {
      if (this.probe === "sent" && this.refuseAfterSilentProbe !== null) {
        throw new ProbeUnansweredError(this.refuseAfterSilentProbe);
      }
      this.initializeSent = true;
    }
    const child = this.child;
    if (!child || this.closed || child.exitCode !== null || child.signalCode !== null) {
      throw new Error("server process is not running");
    }
    const data = `${JSON.stringify(message)}\n`;
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdin.write(data, (err) => (err ? reject(err) : resolve()));
      });
    } catch (err) {
      // A write into a pipe the child closed (EPIPE) says only that it is gone; its exit says why.
      if (await within(this.exited, EXIT_AFTER_BROKEN_PIPE_MS)) throw new Error(this.exited_ ?? String(err));
      throw err;
    }
  }

  /**
   * Staged stop of the whole process group: close stdin, then SIGTERM, then SIGKILL. After a
   * fatal error (`broken`) there is no stdin grace: pending requests fail only when `onclose`
   * fires after the child is gone, and a broken child need not be waited for politely.
   */
  async close(broken = false): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const grace = this.opts.stopGraceMs ?? { afterStdin: 1000, afterTerm: 2000 };
      child.stdin.end();
      if (broken || !(await within(this.exited, grace.afterStdin))) {
        killGroup(child, "SIGTERM");
        if (!(await within(this.exited, grace.afterTerm))) {
          killGroup(child, "SIGKILL");
          await this.exited;
        }
      }
    }
    // The leader is gone; make sure no grandchild outlives it holding our pipes.
    if (child) {
      killGroup(child, "SIGKILL");
      liveChildren.delete(child);
      child.stdout.destroy();
      child.stderr.destroy();
    }
    this.onclose?.();
  }
}

function within(p: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    t.unref();
    p.then(() => {
      clearTimeout(t);
      resolve(true);
    });
  });
}
