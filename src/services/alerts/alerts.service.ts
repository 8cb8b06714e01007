import { Counter, type Registry } from "prom-client";
import { AppError } from "../../errors.js";
import type { EventHub } from "../../events/hub.js";
import { isoTime, type Clock } from "../../lib/clock.js";
import type { Logger } from "../../logger.js";
import {
  alertMessageSchema,
  deliveryCursorSchema,
  type AlertMessage,
  type ChannelView,
  type ChannelWithSecret,
  type CreateChannelBody,
  type DeliveryListQuery,
  type DeliveryView,
  type UpdateChannelBody,
} from "../../protocol/alerts.schema.js";
import { newId } from "../../protocol/ids.js";
import * as rulesRepo from "../../store/alert-rules.repository.js";
import * as repo from "../../store/alerts.repository.js";
import type { AfterCommit, Trx } from "../../store/connection.js";
import type { Store } from "../../store/db.js";
import type { AlertChannelRow, AlertDeliveryAttemptRow, AlertDeliveryRow } from "../../store/schema.js";
import type { AppEvents } from "../app-events.js";
import { decodeCursor, encodeCursor } from "../list-cursor.js";
import { sendToChannel } from "./channel-kinds.js";
import { channelSettings, channelView, mergedFields, newWebhookSecret, openChannel, SECRET_GRACE_MS, vaultName, type SecretVault } from "./channels.js";
import { DeliveryWorker } from "./delivery-worker.js";
import { ruleView } from "./rules.service.js";
import { systemLookup, type AddressLookup } from "./safe-target.js";

export interface AlertsServiceDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  hub: Pick<EventHub, "publish">;
  events: AppEvents;
  /** Seals channel secrets under the data directory's key file. */
  vault: SecretVault;
  /** The metrics registry `/metrics` renders (delivery counters are added to it). */
  metrics: Registry;
  settings: { alertsRetryScheduleMs: readonly number[]; alertsDisableAfterMs: number; alertsAllowPrivateTargets: boolean; alertsConcurrency: number };
  /** Resolves target host names (tests: their own table). */
  lookup?: AddressLookup;
  /** Per-attempt timeout, ms (15 s). */
  timeoutMs?: number;
  /** [0, 1) for the retry jitter. */
  random?: () => number;
  /**
   * The alert rules' cache, re-read when a channel is deleted (it leaves every rule it was in);
   * its counters join the delivery counters in `metrics`.
   */
  rules?: { reload(): void; registerMetrics?(registry: Registry): void };
}

/** Per attempt: the Standard Webhooks recommendation. */
export const ATTEMPT_TIMEOUT_MS = 15_000;

/**
 * Alert channels and their deliveries (docs/alerts.md): channel CRUD with secrets shown once,
 * the outbox ({@link enqueue} in the caller's transaction), the delivery worker that drains it,
 * and what makes delivery visible (the delivery log, SSE `alert.delivery.updated` /
 * `alert.channel.updated`, `svc_alert_delivery_attempts_total`).
 */
export class AlertsService {
  readonly #d: AlertsServiceDeps;
  readonly #worker: DeliveryWorker;
  readonly #attempts: Counter<"channel_id" | "status">;
  readonly #disabled: Counter<"channel_id">;

  constructor(deps: AlertsServiceDeps) {
    this.#d = deps;
    const registers = [deps.metrics];
    this.#attempts = new Counter({ name: "svc_alert_delivery_attempts_total", help: "Alert delivery attempts by channel and result (delivered, retrying, failed: no retry left)", labelNames: ["channel_id", "status"] as const, registers });
    this.#disabled = new Counter({ name: "svc_alert_channels_disabled_total", help: "Alert channels the delivery worker disabled (410 Gone, or failing for SVC_ALERTS_DISABLE_AFTER_H)", labelNames: ["channel_id"] as const, registers });
    deps.rules?.registerMetrics?.(deps.metrics);
    const ctx = { clock: deps.clock, timeoutMs: deps.timeoutMs ?? ATTEMPT_TIMEOUT_MS, allowPrivate: deps.settings.alertsAllowPrivateTargets, lookup: deps.lookup ?? systemLookup };
    this.#worker = new DeliveryWorker({
      store: deps.store,
      clock: deps.clock,
      log: deps.log,
      scheduleMs: deps.settings.alertsRetryScheduleMs,
      disableAfterMs: deps.settings.alertsDisableAfterMs,
      concurrency: deps.settings.alertsConcurrency,
      ...(deps.random === undefined ? {} : { random: deps.random }),
      send: async (delivery, channel, signal) => {
        const opened = openChannel(channel, deps.vault, deps.clock.now());
        if (typeof opened === "string") return { ok: false, status: null, error: opened };
        return sendToChannel(opened, delivery.delivery_id, alertMessageSchema.parse(JSON.parse(delivery.message)), { ...ctx, signal });
      },
      onRecorded: (delivery, channel) => void this.#recorded(delivery, channel),
    });
    deps.events.on("alert.enqueued", () => this.#worker.kick());
  }

  /** Starts the delivery worker: deliveries a previous run left pending go out (same ids). */
  start(): void {
    this.#worker.start();
  }

  /** Stops the worker; attempts in flight are left unrecorded and sent again at the next start. */
  stop(): Promise<void> {
    return this.#worker.stop();
  }

  /**
   * Enqueues `message` to each of `channelIds` inside the caller's transaction (persist before
   * emit: nothing is sent unless it commits), kicking the worker after the commit.
   * @returns the new deliveries' ids (each the `webhook-id` of all its attempts)
   */
  async enqueue(trx: Trx, afterCommit: AfterCommit, channelIds: readonly string[], message: AlertMessage, ids?: readonly string[]): Promise<string[]> {
    const now = this.#d.clock.now();
    const text = JSON.stringify(alertMessageSchema.parse(message));
    const rows: AlertDeliveryRow[] = channelIds.map((channel_id, i) => ({
      delivery_id: ids?.[i] ?? newId("msg"),
      channel_id,
      type: message.type,
      message: text,
      status: "pending",
      attempts: 0,
      next_attempt_at: now,
      last_attempt_at: null,
      last_http_status: null,
      last_error: null,
      created_at: now,
      updated_at: now,
    }));
    await repo.insertAlertDeliveries(trx, rows);
    afterCommit(() => {
      this.#worker.kick();
      for (const r of rows) this.#d.hub.publish("alert.delivery.updated", { delivery: deliveryView(r, []) });
    });
    return rows.map((r) => r.delivery_id);
  }

  /** Looks for due deliveries now: after a commit that enqueued through {@link repo.createAlertOutboxStatements}. */
  kick(): void {
    this.#worker.kick();
  }

  /** Every channel, by name. */
  async listChannels(): Promise<ChannelView[]> {
    const now = this.#d.clock.now();
    return (await repo.listAlertChannels(this.#d.store.db)).map((r) => channelView(r, now));
  }

  /** @throws AppError NOT_FOUND */
  async getChannel(channelId: string): Promise<ChannelView> {
    return channelView(await this.#row(channelId), this.#d.clock.now());
  }

  /**
   * Creates a channel. A webhook channel gets a new signing secret (`whsec_…`), answered here
   * once and never again.
   * @throws AppError VALIDATION_FAILED (a field the kind needs or does not take), CONFLICT (the name is taken)
   */
  async createChannel(body: CreateChannelBody): Promise<ChannelWithSecret> {
    const { name, kind, ...fields } = body;
    const { target, secret: given } = channelSettings(kind, fields);
    const secret = kind === "webhook" ? newWebhookSecret() : given;
    const now = this.#d.clock.now();
    const channel_id = newId("chn");
    const row: AlertChannelRow = {
      channel_id, name, kind, target: JSON.stringify(target),
      secret_sealed: secret === undefined ? null : this.#d.vault.seal(vaultName(channel_id), secret),
      previous_secret_sealed: null, previous_secret_until: null,
      enabled: 1, disabled_reason: null, disabled_at: null, failing_since: null, created_at: now, updated_at: now,
    };
    await this.#d.store.transaction(async (trx, afterCommit) => {
      if (await repo.alertChannelNameTaken(trx, name)) throw new AppError("CONFLICT", `an alert channel named ${name} exists`);
      await repo.insertAlertChannel(trx, row);
      afterCommit(() => this.#publishChannel(row));
    });
    return { ...channelView(row, now), ...(kind === "webhook" && secret !== undefined ? { secret } : {}) };
  }

  /**
   * Changes a channel's name, settings or enabled flag; enabling clears the disabled reason and
   * resumes its waiting deliveries. `rotate_secret` gives a webhook a new secret (answered once);
   * the old one keeps signing beside it for 24 h.
   * @throws AppError NOT_FOUND, VALIDATION_FAILED, CONFLICT (name taken)
   */
  async updateChannel(channelId: string, update: UpdateChannelBody): Promise<ChannelWithSecret> {
    const now = this.#d.clock.now();
    let fresh: string | undefined;
    const row = await this.#d.store.transaction(async (trx, afterCommit) => {
      const old = await this.#row(channelId, trx);
      if (update.name !== undefined && (await repo.alertChannelNameTaken(trx, update.name, channelId))) throw new AppError("CONFLICT", `an alert channel named ${update.name} exists`);
      if (update.rotate_secret === true && old.kind !== "webhook") throw new AppError("VALIDATION_FAILED", "only a webhook channel has a signing secret to rotate");
      const stored = old.secret_sealed === null ? undefined : this.#d.vault.open(vaultName(channelId), old.secret_sealed);
      const { target, secret } = channelSettings(old.kind, mergedFields(old, update, stored));
      const next: AlertChannelRow = { ...old, name: update.name ?? old.name, target: JSON.stringify(target), updated_at: now };
      if (old.kind !== "webhook") next.secret_sealed = secret === undefined ? null : this.#d.vault.seal(vaultName(channelId), secret);
      if (update.rotate_secret === true) {
        fresh = newWebhookSecret();
        Object.assign(next, { previous_secret_sealed: old.secret_sealed, previous_secret_until: now + SECRET_GRACE_MS, secret_sealed: this.#d.vault.seal(vaultName(channelId), fresh) });
      }
      if (update.enabled === true) Object.assign(next, { enabled: 1, disabled_reason: null, disabled_at: null, failing_since: null });
      if (update.enabled === false && old.enabled === 1) Object.assign(next, { enabled: 0, disabled_reason: "disabled by an admin", disabled_at: now });
      await repo.updateAlertChannel(trx, channelId, next);
      afterCommit(() => {
        this.#publishChannel(next);
        if (next.enabled === 1) this.#worker.kick();
      });
      return next;
    });
    return { ...channelView(row, now), ...(fresh === undefined ? {} : { secret: fresh }) };
  }

  /**
   * Deletes a channel and its deliveries; it leaves every rule it was in, and each such rule goes
   * out as `alert.rule.updated` with its channels now (read in the transaction, sent after it).
   * @throws AppError NOT_FOUND
   */
  async deleteChannel(channelId: string): Promise<void> {
    await this.#d.store.transaction(async (trx, afterCommit) => {
      const ruleIds = await rulesRepo.alertRuleIdsOfChannel(trx, channelId);
      if (!(await repo.deleteAlertChannel(trx, channelId))) throw new AppError("NOT_FOUND", `no alert channel ${channelId}`);
      const rules = (await rulesRepo.findAlertRules(trx, ruleIds)).map(ruleView);
      afterCommit(() => {
        this.#d.rules?.reload();
        this.#d.hub.publish("alert.channel.updated", { channel_id: channelId, channel: null });
        for (const rule of rules) this.#d.hub.publish("alert.rule.updated", { rule_id: rule.rule_id, rule });
      });
    });
  }

  /**
   * Sends a test alert through the real delivery path and answers its delivery after the first
   * attempt (retries, if any, follow the schedule like any delivery's).
   * @throws AppError NOT_FOUND, CONFLICT (the channel is disabled)
   */
  async testChannel(channelId: string): Promise<DeliveryView> {
    const id = newId("msg");
    const attempted = this.#worker.attempted(id);
    await this.#d.store.transaction(async (trx, afterCommit) => {
      const ch = await this.#row(channelId, trx);
      if (ch.enabled !== 1) throw new AppError("CONFLICT", `the channel is disabled (${ch.disabled_reason ?? "by an admin"}): enable it first`);
      const message: AlertMessage = {
        type: "alert.test",
        timestamp: isoTime(this.#d.clock.now()),
        title: `Test alert to ${ch.name}`,
        text: `This is a test of the alert channel "${ch.name}": if you read it, alerts reach you here.`,
        severity: "info",
        data: { channel_id: ch.channel_id, channel_name: ch.name },
      };
      await this.enqueue(trx, afterCommit, [channelId], message, [id]);
    });
    await attempted;
    return this.delivery(id);
  }

  /** One delivery with its attempts. @throws AppError NOT_FOUND */
  async delivery(deliveryId: string): Promise<DeliveryView> {
    const row = await repo.findAlertDelivery(this.#d.store.db, deliveryId);
    if (!row) throw new AppError("NOT_FOUND", `no alert delivery ${deliveryId}`);
    return deliveryView(row, await repo.alertAttemptsOf(this.#d.store.db, [deliveryId]));
  }

  /**
   * The delivery log, newest first, filtered by channel and status.
   * @throws AppError INVALID_CURSOR
   */
  async listDeliveries(q: DeliveryListQuery): Promise<{ items: DeliveryView[]; next_cursor: string | null }> {
    const after = decodeCursor(deliveryCursorSchema, q.cursor);
    const rows = await repo.listAlertDeliveries(this.#d.store.db, { channelId: q.channel_id, status: q.status, limit: q.limit + 1, after });
    const page = rows.slice(0, q.limit);
    const attempts = await repo.alertAttemptsOf(this.#d.store.db, page.map((r) => r.delivery_id));
    const last = page[page.length - 1];
    return {
      items: page.map((r) => deliveryView(r, attempts.filter((a) => a.delivery_id === r.delivery_id))),
      next_cursor: rows.length > q.limit && last !== undefined ? encodeCursor({ t: last.created_at, id: last.delivery_id }) : null,
    };
  }

  async #row(channelId: string, db: Trx | Store["db"] = this.#d.store.db): Promise<AlertChannelRow> {
    const row = await repo.findAlertChannel(db, channelId);
    if (!row) throw new AppError("NOT_FOUND", `no alert channel ${channelId}`);
    return row;
  }

  #publishChannel(row: AlertChannelRow): void {
    this.#d.hub.publish("alert.channel.updated", { channel_id: row.channel_id, channel: channelView(row, this.#d.clock.now()) });
  }

  /** After an attempt's record committed: counters, the channel's disabling (app event, log), SSE. */
  async #recorded(delivery: AlertDeliveryRow, channel: AlertChannelRow | undefined): Promise<void> {
    const status = delivery.status === "pending" ? "retrying" : delivery.status;
    this.#attempts.inc({ channel_id: delivery.channel_id, status });
    if (channel !== undefined) {
      if (channel.enabled === 0) {
        this.#disabled.inc({ channel_id: channel.channel_id });
        this.#d.events.emit("alert.channel_disabled", channel.channel_id, channel.disabled_reason ?? "disabled");
      }
      this.#publishChannel(channel);
    }
    try {
      this.#d.hub.publish("alert.delivery.updated", { delivery: await this.delivery(delivery.delivery_id) });
    } catch {
      // deleted with its channel meanwhile: nothing to show
    }
  }
}

/** A delivery row and its attempts as the API shows them. */
export function deliveryView(row: AlertDeliveryRow, attempts: readonly AlertDeliveryAttemptRow[]): DeliveryView {
  const iso = (ms: number | null) => (ms === null ? null : isoTime(ms));
  return {
    delivery_id: row.delivery_id,
    channel_id: row.channel_id,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: iso(row.next_attempt_at),
    last_attempt_at: iso(row.last_attempt_at),
    last_http_status: row.last_http_status,
    last_error: row.last_error,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
    history: attempts.map((a) => ({ attempt: a.attempt, at: isoTime(a.at), http_status: a.http_status, error: a.error, duration_ms: a.duration_ms })),
  };
}
