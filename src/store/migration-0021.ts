/**
 * Migration 0021 (frozen once released, like every migration): alert channels and the outbox of
 * their deliveries (docs/alerts.md). A channel's secret (a webhook's signing secret, an SMTP
 * password) is kept sealed under the data directory's key file, never in the clear; a rotated
 * webhook secret keeps signing beside the new one until `previous_secret_until`. A delivery row is
 * written in the transaction of what caused it and keeps its id on every attempt: the receiver's
 * idempotency key (`webhook-id`).
 */
import { sql, type Kysely, type Migration } from "kysely";

export const alertChannels: Migration = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on today's types
  async up(db: Kysely<any>): Promise<void> {
    const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
    await t`CREATE TABLE alert_channels (
      channel_id TEXT PRIMARY KEY NOT NULL,
      name TEXT NOT NULL UNIQUE COLLATE NOCASE,
      kind TEXT NOT NULL CHECK (kind IN ('webhook', 'slack', 'ntfy', 'email')),
      target TEXT NOT NULL,
      secret_sealed TEXT,
      previous_secret_sealed TEXT,
      previous_secret_until INTEGER,
      enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
      disabled_reason TEXT,
      disabled_at INTEGER,
      failing_since INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT`;
    await t`CREATE TABLE alert_deliveries (
      delivery_id TEXT PRIMARY KEY NOT NULL,
      channel_id TEXT NOT NULL REFERENCES alert_channels(channel_id) ON DELETE CASCADE,
      type TEXT NOT NULL,
      message TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER,
      last_attempt_at INTEGER,
      last_http_status INTEGER,
      last_error TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT`;
    await t`CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at) WHERE status = 'pending'`;
    await t`CREATE INDEX alert_deliveries_channel ON alert_deliveries (channel_id, created_at, delivery_id)`;
    await t`CREATE INDEX alert_deliveries_list ON alert_deliveries (created_at, delivery_id)`;
    await t`CREATE TABLE alert_delivery_attempts (
      delivery_id TEXT NOT NULL REFERENCES alert_deliveries(delivery_id) ON DELETE CASCADE,
      attempt INTEGER NOT NULL,
      at INTEGER NOT NULL,
      http_status INTEGER,
      error TEXT,
      duration_ms INTEGER NOT NULL,
      PRIMARY KEY (delivery_id, attempt)
    ) STRICT`;
  },
};
