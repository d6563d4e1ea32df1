import "server-only";
import type dns from "node:dns";
import type { NotificationChannelView, NotificationsView } from "@/lib/notification-types";
import type { NotificationsConfig } from "../config";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import type { calls } from "../store/schema";
import { releaseClaimsOf } from "./claims";
import { type DeliverySettled, Dispatcher } from "./dispatcher";
import { createEmailSender, emailSecrets } from "./email";
import { linkBase } from "./messages";
import {
  type CallNotificationEvent,
  type CatalogueChange,
  enqueueCallEvent,
  enqueueCatalogueChange,
  recentDeliveries,
} from "./outbox";
import { createWebhookSender, originOf, type Sender } from "./webhook";

/** Deliveries per destination the log shows. */
export const LOG_LIMIT = 50;

export interface NotifierOptions {
  db: Db;
  bus: EventBus;
  log: Logger;
  config: NotificationsConfig;
  /** `GATEHOUSE_PUBLIC_ORIGIN`: the links' origin when `config.publicUrl` is null. */
  publicOrigin?: string | null;
  /**
   * Set when other replicas send from the same outbox (PostgreSQL): this replica's id, written on
   * the rows it claims. Claims found at start may then be others', and rows they could not send
   * are looked for every few seconds. Default none: this process sends alone.
   */
  replica?: string;
  /** Test overrides: the address policy and resolver of every destination, and the timings. */
  refuse?: (ip: string) => string | null;
  lookup?: typeof dns.lookup;
  timeoutMs?: number;
  retryBaseMs?: number;
}

/** Reaching reviewers (PRODUCT.md §10): the outbox on the way in, the dispatcher on the way out. */
export interface Notifier {
  /** The origin links start with; null when neither setting gives one. */
  readonly publicUrl: string | null;
  /**
   * `BrokerDeps.notify`: queues the messages about `event` (inserts on `tx`, the caller's
   * transaction; await it). They are sent once the bus announces the committed move. Nothing
   * but the inserts happens here, so a transaction run again (PostgreSQL) may call it again.
   */
  notify(tx: Db, event: CallNotificationEvent, call: typeof calls.$inferSelect): Promise<void>;
  /**
   * Queues `catalogue.changed` for one refresh that changed something (nothing for no changes).
   * Call it with the refresh's `tx` and await it; its bus event wakes the dispatcher after the commit.
   */
  catalogueChanged(tx: Db, server: string, changes: readonly CatalogueChange[]): Promise<void>;
  /** Starts sending: what a crash left queued at once, then whatever the bus announces. */
  start(): void;
  /** Aborts tries in flight (their rows stay queued), closes connections. Call before the store closes. */
  stop(): Promise<void>;
  onSettled(listener: (d: DeliverySettled) => void): () => void;
  /**
   * Replicas `dead` are gone: the rows they had claimed are given back and sent from here
   * ({@link releaseClaimsOf}).
   */
  replicasDied(dead: string[]): Promise<void>;
  /** `GET /api/notifications`: every destination and its last {@link LOG_LIMIT} deliveries. */
  view(): Promise<NotificationsView>;
}

/** What must never be written anywhere: webhook URLs and keys, the SMTP URL and its password. */
export function notificationSecrets(config: NotificationsConfig): string[] {
  return [
    ...config.webhooks.flatMap((w) => (w.secret ? [w.url, w.secret] : [w.url])),
    ...(config.email ? emailSecrets(config.email) : []),
  ];
}

/** How often a replica sending beside others looks for rows nobody woke it for (see `lookEveryMs`). */
const SHARED_LOOK_MS = 5_000;

export function createNotifier(opts: NotifierOptions): Notifier {
  const { db, config } = opts;
  const publicUrl = linkBase(config.publicUrl ?? opts.publicOrigin ?? null);
  const webhooks = new Map<string, Sender>(
    config.webhooks.map((hook) => [
      hook.name,
      createWebhookSender(hook, { publicUrl, ...(opts.refuse ? { refuse: opts.refuse } : {}) }),
    ]),
  );
  const email = config.email
    ? createEmailSender(config.email, {
        publicUrl,
        ...(opts.refuse ? { refuse: opts.refuse } : {}),
        ...(opts.lookup ? { lookup: opts.lookup } : {}),
      })
    : null;
  const dispatcher = new Dispatcher({
    db,
    bus: opts.bus,
    log: opts.log,
    senderFor: (row) => (row.channel === "email" ? email : (webhooks.get(row.target) ?? null)),
    ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }),
    ...(opts.retryBaseMs === undefined ? {} : { retryBaseMs: opts.retryBaseMs }),
    ...(opts.replica ? { soleSender: false, lookEveryMs: SHARED_LOOK_MS, replica: opts.replica } : {}),
  });
  if (publicUrl === null && (config.webhooks.length > 0 || email)) {
    opts.log.warn(
      "notifications carry no link: set notifications.publicUrl (or GATEHOUSE_PUBLIC_ORIGIN) to the address reviewers open",
    );
  }

  return {
    publicUrl,
    async notify(tx, event, call) {
      if ((await enqueueCallEvent(tx, config, event, call)) > 0) dispatcher.queued();
    },
    async catalogueChanged(tx, server, changes) {
      if ((await enqueueCatalogueChange(tx, config, server, changes)) > 0) dispatcher.queued();
    },
    start: () => dispatcher.start(),
    async stop() {
      await dispatcher.stop();
      await Promise.allSettled([...webhooks.values(), ...(email ? [email] : [])].map((s) => s.close()));
    },
    onSettled: (listener) => dispatcher.onSettled(listener),
    async replicasDied(dead) {
      if ((await releaseClaimsOf(db, dead)) > 0) dispatcher.wake();
    },
    async view() {
      const channels: NotificationChannelView[] = [];
      for (const hook of config.webhooks) {
        channels.push({
          channel: "webhook",
          name: hook.name,
          target: originOf(hook.url),
          format: hook.format,
          events: [...hook.events],
          signed: hook.secret !== null,
          deliveries: await recentDeliveries(db, { channel: "webhook", target: hook.name }, LOG_LIMIT),
        });
      }
      if (config.email && email) {
        channels.push({
          channel: "email",
          name: "email",
          target: email.host,
          format: "email",
          events: [...config.email.events],
          signed: false,
          deliveries: await recentDeliveries(db, { channel: "email" }, LOG_LIMIT),
        });
      }
      return { publicUrl, channels };
    },
  };
}
