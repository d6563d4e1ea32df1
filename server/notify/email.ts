import "server-only";
import dns from "node:dns";
import net, { isIP } from "node:net";
import nodemailer from "nodemailer";
import type SMTPTransport from "nodemailer/lib/smtp-transport";
import type { EmailConfig } from "../config";
import { refusedAddressKind } from "../net/address-policy";
import { type DigestPayload, isDigest } from "./digests";
import { digestMessage, emailMessage, type MessageContext } from "./messages";
import type { CallPayload, DeliveryRow } from "./outbox";
import { failureText, isGuardRefusal, SEND_TIMEOUT_MS, type Sender } from "./webhook";

/** The parts of `notifications.email.smtp` a transport needs; `host` is the one safe to show. */
export interface SmtpTarget {
  host: string;
  port: number;
  /**
   * `smtps:` (TLS from the first byte); `smtp:` upgrades with STARTTLS when the server offers it,
   * and must (or the message is not sent) when there is a password to send.
   */
  secure: boolean;
  auth: { user: string; pass: string } | null;
}

export function parseSmtpUrl(smtp: string): SmtpTarget {
  const u = new URL(smtp);
  const secure = u.protocol === "smtps:";
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const user = decodeURIComponent(u.username);
  return {
    host,
    port: Number(u.port) || (secure ? 465 : 587),
    secure,
    auth: user ? { user, pass: decodeURIComponent(u.password) } : null,
  };
}

/** The values of the email settings no message may show: the URL and its password. */
export function emailSecrets(email: EmailConfig): string[] {
  const out = [email.smtp];
  try {
    const u = new URL(email.smtp);
    if (u.password) out.push(u.password, decodeURIComponent(u.password));
  } catch {
    // Validation guarantees a URL; an unparseable one is hidden whole above.
  }
  return out;
}

export interface SocketGuard {
  allowPrivate: boolean;
  /** Resolver; tests inject one. Defaults to `dns.lookup`. */
  lookup?: typeof dns.lookup;
  /** Why an address may not be dialled, or null. Defaults to the guard's policy. */
  refuse?: (ip: string) => string | null;
  timeoutMs: number;
}

const HINT = "set notifications.email.allowPrivate to allow";

function timeoutError(): Error {
  const err = new Error("timed out");
  err.name = "TimeoutError";
  return err;
}

/**
 * nodemailer's `getSocket`: resolves the SMTP host itself, refuses it when any address it
 * resolves to is loopback / private / link-local (the outbound guard's policy, unless
 * `allowPrivate`), and connects to those checked addresses only — the connect's `lookup` answers
 * with them, so no second resolution can swap the address. The TLS handshake (smtps, or STARTTLS)
 * then runs over this socket with the host name as `servername`, so the certificate is still
 * checked against the configured name.
 */
export function guardedSmtpSocket(guard: SocketGuard): NonNullable<SMTPTransport.Options["getSocket"]> {
  const lookup = guard.lookup ?? dns.lookup;
  const refuse = guard.refuse ?? refusedAddressKind;
  return (options, callback) => {
    const host = String(options.host ?? "localhost").replace(/^\[|\]$/g, "");
    const port = Number(options.port);
    const dial = (addresses: dns.LookupAddress[]) => {
      if (!guard.allowPrivate) {
        for (const { address } of addresses) {
          const kind = refuse(address);
          if (kind) {
            const shown = host === address ? address : `${host} resolves to ${address}`;
            const refused = Object.assign(new Error(`refused: ${shown}, ${kind}; ${HINT}`), {
              code: "GATEHOUSE_REFUSED_ADDRESS",
            });
            return callback(refused, false);
          }
        }
      }
      const first = addresses[0];
      if (!first) return callback(new Error(`${host} resolves to no address`), false);
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        callback(err, false);
      };
      const socket = net.connect({
        host,
        port,
        autoSelectFamily: true,
        lookup: ((_name: string, opts: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
          if (opts?.all) cb(null, addresses);
          else cb(null, first.address, first.family);
        }) as unknown as net.LookupFunction,
      });
      timer = setTimeout(() => fail(timeoutError()), guard.timeoutMs);
      timer.unref();
      socket.once("error", fail);
      socket.once("connect", () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // `fail` stays as an error listener (a no-op once settled) until nodemailer adds its own.
        callback(null, { connection: socket });
      });
    };
    const family = isIP(host);
    if (family !== 0) return dial([{ address: host, family }]);
    lookup(host, { all: true }, (err, addresses) => {
      if (err) return callback(err, false);
      dial(addresses as dns.LookupAddress[]);
    });
  };
}

export interface EmailSenderOptions {
  publicUrl: string | null;
  /** Test overrides of the socket guard. */
  lookup?: typeof dns.lookup;
  refuse?: (ip: string) => string | null;
}

/**
 * Mails rows through one nodemailer SMTP transport whose every socket comes from
 * {@link guardedSmtpSocket}. nodemailer's own logging stays off (it would print the envelope and
 * the server's dialogue), and it may not read files or URLs into a message.
 */
export function createEmailSender(email: EmailConfig, opts: EmailSenderOptions): Sender & { host: string } {
  const target = parseSmtpUrl(email.smtp);
  const transport = nodemailer.createTransport({
    host: target.host,
    port: target.port,
    secure: target.secure,
    ...(target.auth ? { auth: target.auth } : {}),
    // With a password, `smtp:` must upgrade with STARTTLS or not send at all: a server (or anyone
    // between) that does not offer it would otherwise be handed the password in the clear.
    ...(target.auth && !target.secure ? { requireTLS: true } : {}),
    getSocket: guardedSmtpSocket({
      allowPrivate: email.allowPrivate,
      timeoutMs: SEND_TIMEOUT_MS,
      ...(opts.lookup ? { lookup: opts.lookup } : {}),
      ...(opts.refuse ? { refuse: opts.refuse } : {}),
    }),
    connectionTimeout: SEND_TIMEOUT_MS,
    greetingTimeout: SEND_TIMEOUT_MS,
    socketTimeout: SEND_TIMEOUT_MS,
    logger: false,
    debug: false,
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const hide = emailSecrets(email);
  return {
    host: target.host,
    async send(row: DeliveryRow, signal: AbortSignal) {
      const payload = JSON.parse(row.payload) as CallPayload | DigestPayload;
      if (!payload.to) return { ok: false, status: null, error: "no address to send to" };
      const ctx: MessageContext = { deliveryId: row.deliveryId, publicUrl: opts.publicUrl };
      const message = isDigest(payload) ? digestMessage(payload, ctx) : emailMessage(payload, ctx);
      try {
        await transport.sendMail({
          from: email.from,
          to: payload.to,
          subject: message.subject,
          text: message.text,
          html: message.html,
          headers: { "X-Gatehouse-Event": row.event, "X-Gatehouse-Delivery": row.deliveryId },
          // nodemailer 10 aborts a send on this signal; its @types predate the option.
          ...({ signal } as object),
        });
        return { ok: true, status: null };
      } catch (err) {
        const code = (err as { responseCode?: unknown }).responseCode;
        const text = failureText(signal.aborted ? signal.reason : err, hide, HINT);
        const error =
          typeof code === "number" && !text.includes(String(code)) ? `${text} (SMTP ${code})` : text;
        return { ok: false, status: null, error, final: isGuardRefusal(err) };
      }
    },
    async close() {
      transport.close();
    },
  };
}
