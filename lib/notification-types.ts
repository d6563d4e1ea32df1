/** Shapes of the notifications API (`GET /api/notifications`), shared by server and browser. */

/** One message to one destination, as the delivery log shows it (no URL, no secret, no argument values). */
export interface DeliveryView {
  id: number;
  deliveryId: string;
  event: string;
  callId: string | null;
  /** Email: the person it went to (their user name); null for a webhook. */
  recipient: string | null;
  /** A digest of one requester's waiting calls: that requester's name; null for any other message. */
  digestOf: string | null;
  status: "queued" | "delivered" | "failed";
  attempts: number;
  /** When it was queued. */
  createdAt: string;
  /** When it was delivered or given up; null while queued. */
  finishedAt: string | null;
  /** While queued: when the next try is due. */
  nextAttemptAt: string | null;
  lastStatus: number | null;
  lastError: string | null;
}

/** One destination and its last 50 deliveries, newest first. */
export interface NotificationChannelView {
  channel: "webhook" | "email";
  /** The webhook's name, or "email". */
  name: string;
  /** Where it goes, safe to show: a webhook URL's origin only, or the SMTP server's host. */
  target: string;
  format: "json" | "slack" | "email";
  events: string[];
  signed: boolean;
  deliveries: DeliveryView[];
}

/** `GET /api/notifications` (owners). */
export interface NotificationsView {
  /** The origin links in messages start with; null when neither `notifications.publicUrl` nor `GATEHOUSE_PUBLIC_ORIGIN` is set. */
  publicUrl: string | null;
  channels: NotificationChannelView[];
}
