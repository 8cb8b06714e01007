import PQueue from "p-queue";
import { isoTime, type Clock } from "../../lib/clock.js";
import type { Logger } from "../../logger.js";
import * as repo from "../../store/alerts.repository.js";
import type { Store } from "../../store/db.js";
import type { AlertChannelRow, AlertDeliveryRow } from "../../store/schema.js";
import type { AttemptOutcome } from "./http-send.js";

/**
 * The delivery worker (docs/alerts.md "Delivery"): drains the outbox (`alert_deliveries`) off
 * the MQTT and HTTP paths. One timer on the injected clock for the earliest due attempt; due
 * deliveries run on a bounded p-queue; each attempt's result is recorded in one transaction with
 * the delivery's next state and its channel's failing or disabled state, then announced.
 *
 * At least once: a delivery is `pending` until a 2xx (or an SMTP acceptance) is recorded, and
 * keeps its id on every attempt. An attempt in flight when the process dies left nothing
 * recorded: the next start sends it again with the same id. Once `delivered` is recorded it is
 * never sent again. Deliveries of a disabled channel wait, unsent, until it is enabled again.
 */

export interface DeliveryWorkerDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Waits before the 1st, 2nd, … retry, ms; past the last the delivery fails. */
  scheduleMs: readonly number[];
  /** A channel failing this long without a success is disabled, ms. */
  disableAfterMs: number;
  /** Attempts in flight at once. */
  concurrency: number;
  /** Sends one attempt; never throws. `signal` aborts it when the worker stops. */
  send(delivery: AlertDeliveryRow, channel: AlertChannelRow, signal: AbortSignal): Promise<AttemptOutcome>;
  /** After an attempt's record committed: the delivery now, and the channel when its state changed. */
  onRecorded(delivery: AlertDeliveryRow, channel: AlertChannelRow | undefined): void;
  /** [0, 1): the jitter's source (tests pin it). */
  random?: () => number;
}

/** Deliveries picked per scan; more are picked as these finish. */
const SCAN_BATCH = 64;
/** Jitter added to a scheduled wait: up to this fraction of it, never less than the schedule. */
const JITTER = 0.1;

export class DeliveryWorker {
  readonly #d: DeliveryWorkerDeps;
  readonly #queue: PQueue;
  readonly #inFlight = new Set<string>();
  readonly #abort = new AbortController();
  readonly #waiters = new Map<string, Array<() => void>>();
  #timer: unknown;
  #scanQueued = false;
  #scanning: Promise<void> | undefined;
  #rescan = false;
  #stopped = false;

  constructor(deps: DeliveryWorkerDeps) {
    this.#d = deps;
    this.#queue = new PQueue({ concurrency: deps.concurrency });
  }

  /** Starts draining: pending deliveries left by a previous run go out now (same ids). */
  start(): void {
    this.kick();
  }

  /** Looks for due deliveries at the next turn (after a commit that enqueued some). */
  kick(): void {
    if (this.#stopped || this.#scanQueued) return;
    this.#scanQueued = true;
    setImmediate(() => {
      this.#scanQueued = false;
      void this.#scan();
    });
  }

  /** Resolves after the next attempt of `deliveryId` is recorded (or the worker stops). */
  attempted(deliveryId: string): Promise<void> {
    return new Promise((resolve) => {
      if (this.#stopped) return resolve();
      const list = this.#waiters.get(deliveryId) ?? [];
      list.push(resolve);
      this.#waiters.set(deliveryId, list);
    });
  }

  /** Stops: no new attempt; attempts in flight are aborted and left unrecorded (sent again at the next start). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#d.clock.clearTimeout(this.#timer);
    this.#abort.abort();
    this.#queue.clear();
    await this.#scanning;
    await this.#queue.onIdle();
    for (const list of this.#waiters.values()) for (const w of list) w();
    this.#waiters.clear();
  }

  async #scan(): Promise<void> {
    if (this.#scanning) {
      this.#rescan = true;
      return;
    }
    this.#scanning = this.#scanOnce().catch((err: unknown) => this.#d.log.error({ err }, "alert outbox scan failed"));
    await this.#scanning;
    this.#scanning = undefined;
    if (this.#rescan) {
      this.#rescan = false;
      this.kick();
    }
  }

  async #scanOnce(): Promise<void> {
    const { store, clock } = this.#d;
    const now = clock.now();
    if (this.#queue.size < SCAN_BATCH) {
      for (const row of await repo.dueAlertDeliveries(store.db, now, SCAN_BATCH + this.#inFlight.size)) {
        if (this.#stopped || this.#inFlight.has(row.delivery_id)) continue;
        this.#inFlight.add(row.delivery_id);
        void this.#queue.add(() => this.#attempt(row));
      }
    }
    if (this.#stopped) return;
    const next = await repo.nextAlertDeliveryDue(store.db, now);
    clock.clearTimeout(this.#timer);
    if (next !== undefined) this.#timer = clock.setTimeout(() => this.kick(), Math.max(0, next - clock.now()));
  }

  async #attempt(row: AlertDeliveryRow): Promise<void> {
    try {
      const channel = await repo.findAlertChannel(this.#d.store.db, row.channel_id);
      const current = await repo.findAlertDelivery(this.#d.store.db, row.delivery_id);
      if (!channel || channel.enabled !== 1 || current?.status !== "pending" || this.#stopped) return;
      const started = this.#d.clock.now();
      const outcome = await this.#d.send(current, channel, this.#abort.signal);
      if (this.#stopped) return; // unrecorded: the next start sends it again, same id
      await this.#record(current, channel, outcome, started);
    } catch (err) {
      this.#d.log.error({ err, delivery_id: row.delivery_id }, "alert delivery attempt failed to record");
    } finally {
      this.#inFlight.delete(row.delivery_id);
      const waiters = this.#waiters.get(row.delivery_id);
      this.#waiters.delete(row.delivery_id);
      for (const w of waiters ?? []) w();
      this.kick();
    }
  }

  /** Writes the attempt, the delivery's next state and the channel's, in one transaction; then announces them. */
  async #record(row: AlertDeliveryRow, channel: AlertChannelRow, outcome: AttemptOutcome, started: number): Promise<void> {
    const at = this.#d.clock.now();
    const attempt = row.attempts + 1;
    const after = this.#next(row, outcome, attempt, at);
    const channelPatch = this.#channelAfter(channel, outcome, started, at);
    await this.#d.store.transaction(async (trx) => {
      await repo.recordAlertAttempt(
        trx,
        { delivery_id: row.delivery_id, attempt, at, http_status: outcome.status, error: outcome.error, duration_ms: Math.max(0, at - started) },
        after,
      );
      if (channelPatch !== undefined) await repo.updateAlertChannel(trx, channel.channel_id, channelPatch);
    });
    if (channelPatch?.enabled === 0) this.#d.log.warn({ channel_id: channel.channel_id, reason: channelPatch.disabled_reason }, "alert channel disabled");
    this.#d.onRecorded({ ...row, ...after }, channelPatch === undefined ? undefined : { ...channel, ...channelPatch });
  }

  /** The delivery after an attempt: delivered, failed (410, or no retry left), or pending with its next attempt. */
  #next(row: AlertDeliveryRow, outcome: AttemptOutcome, attempt: number, at: number) {
    const base = { attempts: attempt, last_attempt_at: at, last_http_status: outcome.status, last_error: outcome.error, updated_at: at };
    if (outcome.ok) return { ...base, status: "delivered" as const, next_attempt_at: null };
    const wait = this.#d.scheduleMs[attempt - 1];
    if (outcome.gone === true || wait === undefined) {
      const why = outcome.gone === true ? outcome.error : `${outcome.error ?? "failed"} (gave up after ${attempt} attempts)`;
      return { ...base, status: "failed" as const, next_attempt_at: null, last_error: why };
    }
    const jittered = Math.round(wait * (1 + JITTER * (this.#d.random ?? Math.random)()));
    return { ...base, status: "pending" as const, next_attempt_at: at + Math.max(jittered, outcome.retryAfterMs ?? 0) };
  }

  /** The channel's change after an attempt, if any: failing since, back to delivering, or disabled (410, or failing too long). */
  #channelAfter(channel: AlertChannelRow, outcome: AttemptOutcome, started: number, at: number) {
    if (outcome.ok) return channel.failing_since === null ? undefined : { failing_since: null, updated_at: at };
    const since = channel.failing_since ?? started;
    if (outcome.gone === true) return { failing_since: since, enabled: 0, disabled_at: at, disabled_reason: "the receiver answered 410 Gone", updated_at: at };
    if (at - since >= this.#d.disableAfterMs) {
      const hours = Math.round(((at - since) / 3_600_000) * 10) / 10;
      const reason = `every delivery failed for ${hours} h (since ${isoTime(since)}; last: ${outcome.error ?? "failed"})`;
      return { failing_since: since, enabled: 0, disabled_at: at, disabled_reason: reason, updated_at: at };
    }
    return channel.failing_since === null ? { failing_since: since, updated_at: at } : undefined;
  }
}
