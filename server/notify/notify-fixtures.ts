/**
 * What the notifier's tests share: real receivers on 127.0.0.1 port 0 (an HTTP server answering
 * from a script, an in-process SMTP server from the `smtp-server` package), the config of a
 * runtime with the demo tool server, and a capture of what the logger writes. Nothing here
 * starts a runtime: each test does that itself.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http, { type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SMTPServer } from "smtp-server";
import {
  type ApprovalsConfig,
  formatIssues,
  type GatehouseConfig,
  type NotificationsConfig,
  validateConfig,
  type WebhookConfig,
} from "../config";
import type { Db } from "../store/db";
import { notificationDeliveries } from "../store/schema";
import type { Notifier } from "./notifier";
import type { DeliveryRow } from "./outbox";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DEMO_SERVER = path.join(REPO_ROOT, "demo", "server.mjs");

/** A path and query that stand for a chat webhook's secret token. */
export const SECRET_PATH = "/hooks/T0-s3cr3t-path";
export const SECRET_QUERY = "token=q-s3cr3t";

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** `performance.now()` when the whole body had arrived. */
  at: number;
}

export interface Receiver {
  /** Its URL, secret path and query included. */
  url: string;
  origin: string;
  received: Received[];
  /** TCP connections accepted (a refused dial never makes one). */
  connections: number;
  /** Resolves with the first request (seen already or still to come) that `match` accepts. */
  waitFor(match: (r: Received) => boolean, what?: string): Promise<Received>;
  close(): Promise<void>;
}

/** One answer per request, in order; the last repeats. "hang" never answers. */
export type Answer = number | "hang";

export async function receiver(answers: Answer[] = [204], port = 0): Promise<Receiver> {
  const received: Received[] = [];
  const waiters: { match: (r: Received) => boolean; resolve: (r: Received) => void }[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      const r: Received = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body,
        at: performance.now(),
      };
      const answer = answers[Math.min(received.length, answers.length - 1)] ?? 204;
      received.push(r);
      for (const w of [...waiters]) {
        if (!w.match(r)) continue;
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(r);
      }
      if (answer === "hang") return;
      res.statusCode = answer;
      res.end(answer >= 400 ? "no thanks" : undefined);
    });
  });
  const rx: Receiver = {
    url: "",
    origin: "",
    received,
    connections: 0,
    waitFor(match, what = "a request") {
      const seen = received.find(match);
      if (seen) return Promise.resolve(seen);
      return withTimeout(
        new Promise((resolve) => waiters.push({ match, resolve })),
        `the receiver to get ${what}`,
      );
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  server.on("connection", () => {
    rx.connections++;
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const bound = (server.address() as AddressInfo).port;
  rx.origin = `http://127.0.0.1:${bound}`;
  rx.url = `${rx.origin}${SECRET_PATH}?${SECRET_QUERY}`;
  return rx;
}

/** A port nothing listens on (bound once, then released). */
export { freePort } from "@/test/support/http-servers";

export interface Mail {
  from: string;
  to: string[];
  /** The message as sent, quoted-printable soft breaks and escapes undone. */
  text: string;
}

export interface MailReceiver {
  port: number;
  mails: Mail[];
  connections: number;
  /** The username and password of each AUTH. */
  logins: { user: string; pass: string }[];
  waitFor(match: (m: Mail) => boolean, what?: string): Promise<Mail>;
  close(): Promise<void>;
}

/** Undoes quoted-printable (soft line breaks, `=XX`), enough to read a link and a subject. */
export function decodeQuotedPrintable(raw: string): string {
  return raw
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/**
 * An SMTP server on 127.0.0.1 without TLS; AUTH PLAIN/LOGIN is accepted (and recorded) when offered.
 * With `hold`, each message is taken (and answered) only once `hold` has resolved: the sender's
 * tries stay in flight until then.
 */
export async function mailReceiver(opts: { hold?: Promise<void> } = {}): Promise<MailReceiver> {
  const mails: Mail[] = [];
  const logins: { user: string; pass: string }[] = [];
  const waiters: { match: (m: Mail) => boolean; resolve: (m: Mail) => void }[] = [];
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ["STARTTLS"],
    allowInsecureAuth: true,
    authOptional: true,
    logger: false,
    onAuth(auth, _session, callback) {
      logins.push({ user: auth.username ?? "", pass: auth.password ?? "" });
      callback(null, { user: auth.username ?? "" });
    },
    onData(stream, session, callback) {
      let raw = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        raw += chunk;
      });
      stream.on("end", async () => {
        await opts.hold;
        const from = session.envelope.mailFrom;
        const mail: Mail = {
          from: from ? from.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          text: decodeQuotedPrintable(raw),
        };
        mails.push(mail);
        for (const w of [...waiters]) {
          if (!w.match(mail)) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(mail);
        }
        callback();
      });
    },
  });
  const rx: MailReceiver = {
    port: 0,
    mails,
    logins,
    connections: 0,
    waitFor(match, what = "a message") {
      const seen = mails.find(match);
      if (seen) return Promise.resolve(seen);
      return withTimeout(
        new Promise((resolve) => waiters.push({ match, resolve })),
        `the SMTP server to get ${what}`,
      );
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  server.server.on("connection", () => {
    rx.connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  rx.port = (server.server.address() as AddressInfo).port;
  return rx;
}

/** A safety net for a broken build, not a wait: real waits end on the event they await. */
function withTimeout<T>(p: Promise<T>, what: string, ms = 15_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** A webhook entry as validation would produce it. */
export function hook(name: string, url: string, more: Partial<WebhookConfig> = {}): WebhookConfig {
  return {
    name,
    url,
    format: "json",
    events: ["call.pending"],
    secret: null,
    includeArguments: false,
    allowPrivate: true,
    ...more,
  };
}

export const PUBLIC_URL = "https://gatehouse.example.test";

export interface DemoConfig {
  dir: string;
  dbFile: string;
  config: GatehouseConfig;
  /** Removes the temp dir. */
  remove(): void;
}

/**
 * A temp dir and the config of a runtime with the demo server (enabled); `notifications` (and
 * `approvals`) are laid over the validated config, so a test may use values validation would
 * refuse (a loopback webhook without its check, a 2 s expiry).
 */
export function demoConfig(
  notifications: Partial<NotificationsConfig>,
  approvals: Partial<ApprovalsConfig> = {},
  /** More of the config file, validated with the demo server (e.g. `catalogue`). */
  raw: Record<string, unknown> = {},
): DemoConfig {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-notify-test-"));
  const result = validateConfig(
    {
      ...raw,
      mcpServers: {
        demo: {
          command: process.execPath,
          args: [DEMO_SERVER],
          env: { DEMO_STATE_FILE: path.join(dir, "demo-state.json") },
          enabled: true,
        },
      },
    },
    { env: {}, baseDir: REPO_ROOT },
  );
  if (!result.config) throw new Error(`test config is invalid:\n${formatIssues(result)}`);
  return {
    dir,
    dbFile: path.join(dir, "gatehouse.db"),
    config: {
      ...result.config,
      approvals: { ...result.config.approvals, ...approvals },
      notifications: { ...result.config.notifications, publicUrl: PUBLIC_URL, ...notifications },
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Everything the process writes to stdout and stderr (the logger's lines) until `restore()`. */
export function captureOutput(): { text(): string; restore(): void } {
  const chunks: string[] = [];
  const out = process.stdout.write.bind(process.stdout);
  const err = process.stderr.write.bind(process.stderr);
  const tap =
    (write: typeof out) =>
    (chunk: unknown, ...rest: unknown[]): boolean => {
      chunks.push(typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8"));
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    };
  process.stdout.write = tap(out) as typeof process.stdout.write;
  process.stderr.write = tap(err) as typeof process.stderr.write;
  return {
    text: () => chunks.join(""),
    restore() {
      process.stdout.write = out;
      process.stderr.write = err;
    },
  };
}

/** Every outbox row, oldest first. */
export async function deliveryRows(db: Db): Promise<DeliveryRow[]> {
  return await db.select().from(notificationDeliveries).orderBy(notificationDeliveries.id);
}

/**
 * Resolves with the first outbox row `match` accepts: one already stored, or the next one a
 * recorded try makes so (woken by the notifier's settled events, never by polling).
 */
export function untilRow(
  notifier: Notifier,
  db: Db,
  match: (row: DeliveryRow) => boolean,
  what = "a delivery",
): Promise<DeliveryRow> {
  let unsubscribe = () => {};
  const found = new Promise<DeliveryRow>((resolve, reject) => {
    const look = () =>
      deliveryRows(db).then((rows) => {
        const row = rows.find(match);
        if (row) resolve(row);
      }, reject);
    unsubscribe = notifier.onSettled(() => void look());
    void look();
  });
  return withTimeout(found, what, 30_000).finally(unsubscribe);
}
