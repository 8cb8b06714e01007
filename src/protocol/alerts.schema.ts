import { z } from "zod";
import { printable, queryInt } from "./fields.js";

/**
 * Wire shapes of alert channels and their deliveries (docs/alerts.md). A channel's secret (a
 * webhook's signing secret, an SMTP password, a Slack incoming-webhook URL, which is itself a
 * credential) travels in request bodies only; the one answer that carries one is the creation
 * (or rotation) of a webhook channel, once.
 */

export const CHANNEL_KINDS = ["webhook", "slack", "ntfy", "email"] as const;
export const channelKindSchema = z.enum(CHANNEL_KINDS);
export type ChannelKind = z.output<typeof channelKindSchema>;

export const DELIVERY_STATUSES = ["pending", "delivered", "failed"] as const;
export const deliveryStatusSchema = z.enum(DELIVERY_STATUSES);
export type DeliveryStatus = z.output<typeof deliveryStatusSchema>;

/** How an SMTP connection is secured: TLS from the first byte (465), STARTTLS required, or none. */
export const SMTP_TLS_MODES = ["implicit", "starttls", "none"] as const;

/** The prefix of a Standard Webhooks signing secret; the rest is 32 random bytes, base64. */
export const WEBHOOK_SECRET_PREFIX = "whsec_";

const channelName = z.string().trim().min(1, "must not be empty").max(100, "must be at most 100 characters");
const httpUrl = z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).max(2048);
const email = z.email().max(254);
const smtpHost = z.string().regex(/^[A-Za-z0-9.:[\]_-]{1,253}$/, "must be a host name or an IP address");

/** The settings every kind may take, checked against the kind by the service (`url` for webhook, slack and ntfy; the SMTP fields for email). */
const channelFields = {
  url: httpUrl.optional(),
  host: smtpHost.optional(),
  port: z.number().int().min(1).max(65535).optional(),
  tls_mode: z.enum(SMTP_TLS_MODES).optional(),
  username: z.string().min(1).max(256).optional(),
  password: z.string().min(1).max(1024).optional(),
  from: email.optional(),
  to: z.array(email).min(1).max(20).optional(),
};

/** `POST /api/v1/alerts/channels` */
export const createChannelBody = z.strictObject({ name: channelName, kind: channelKindSchema, ...channelFields });
export type CreateChannelBody = z.output<typeof createChannelBody>;

/** `PATCH /api/v1/alerts/channels/{channel_id}`: any of the kind's settings, the name, enabled; `rotate_secret` for a webhook. */
export const updateChannelBody = z
  .strictObject({ name: channelName.optional(), enabled: z.boolean().optional(), rotate_secret: z.literal(true).optional(), ...channelFields })
  .refine((b) => Object.values(b).some((v) => v !== undefined), "give at least one field");
export type UpdateChannelBody = z.output<typeof updateChannelBody>;

/** What a channel sends to, without secrets: a Slack URL shows its origin only. */
export const channelTargetSchema = z.object({
  url: z.string().optional(),
  host: z.string().optional(),
  port: z.number().optional(),
  tls_mode: z.enum(SMTP_TLS_MODES).optional(),
  username: z.string().optional(),
  from: z.string().optional(),
  to: z.array(z.string()).optional(),
});

/** A channel as the API shows it. */
export const channelViewSchema = z.object({
  channel_id: z.string(),
  name: z.string(),
  kind: channelKindSchema,
  target: channelTargetSchema,
  /** Whether a secret is stored (never the secret). */
  has_secret: z.boolean(),
  /** Until when a rotated webhook secret still signs beside the new one; null when none does. */
  previous_secret_until: z.iso.datetime().nullable(),
  enabled: z.boolean(),
  /** Why the channel is disabled (410 Gone, failing too long, an admin): null while enabled. */
  disabled_reason: z.string().nullable(),
  disabled_at: z.iso.datetime().nullable(),
  /** First failed attempt since the last success; null while it delivers. */
  failing_since: z.iso.datetime().nullable(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
export type ChannelView = z.output<typeof channelViewSchema>;

/** A created or rotated webhook channel: the signing secret, shown this once. */
export const channelWithSecretSchema = channelViewSchema.extend({ secret: z.string().optional() });
export type ChannelWithSecret = z.output<typeof channelWithSecretSchema>;

export const channelListAnswer = z.object({ channels: z.array(channelViewSchema) });
export const channelParams = z.object({ channel_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must match ^[a-z0-9][a-z0-9_-]{0,63}$") });

/** One attempt of a delivery. */
export const deliveryAttemptSchema = z.object({
  attempt: z.number().int(),
  at: z.iso.datetime(),
  /** The receiver's HTTP status (250 for an SMTP server's acceptance); null when none came. */
  http_status: z.number().int().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number().int(),
});

/** A delivery: one alert to one channel, with its attempts. Its id is the `webhook-id` of every attempt. */
export const deliveryViewSchema = z.object({
  delivery_id: z.string(),
  channel_id: z.string(),
  type: z.string(),
  status: deliveryStatusSchema,
  attempts: z.number().int(),
  next_attempt_at: z.iso.datetime().nullable(),
  last_attempt_at: z.iso.datetime().nullable(),
  last_http_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
  history: z.array(deliveryAttemptSchema),
});
export type DeliveryView = z.output<typeof deliveryViewSchema>;

/** `GET /api/v1/alerts/deliveries` query. */
export const deliveryListQuery = z.strictObject({
  channel_id: printable(64).optional(),
  status: deliveryStatusSchema.optional(),
  limit: queryInt(1, 500).default(50),
  cursor: z.string().min(1).max(512).optional(),
});
export type DeliveryListQuery = z.output<typeof deliveryListQuery>;
export const deliveryListAnswer = z.object({ items: z.array(deliveryViewSchema), next_cursor: z.string().nullable() });
/** The position of a delivery list page's last row: newest first by creation time, then id. */
export const deliveryCursorSchema = z.strictObject({ t: z.number().int(), id: z.string() });

/** How loud an alert is; channels map it (ntfy priority, Slack emoji). */
export const ALERT_SEVERITIES = ["info", "warning", "critical", "resolved"] as const;

/**
 * An alert as the outbox keeps it: what every kind of channel renders from. A webhook's body is
 * `{type, timestamp, data}` of it (Standard Webhooks' payload shape).
 */
export const alertMessageSchema = z.object({
  type: z.string().regex(/^[a-z][a-z0-9_.]{0,63}$/),
  timestamp: z.iso.datetime(),
  title: z.string().max(200),
  text: z.string().max(4000),
  severity: z.enum(ALERT_SEVERITIES),
  data: z.record(z.string(), z.unknown()),
});
export type AlertMessage = z.output<typeof alertMessageSchema>;
