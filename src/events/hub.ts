import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { SseEventType, SsePayloads } from "./event-types.js";

/**
 * The SSE hub of spec §6.5: the set of open console streams, event ids, a bounded replay buffer
 * for `Last-Event-ID`, the 15 s clock sync, per-subscriber backpressure and the shutdown wake-up.
 *
 * `src/events` imports nothing else of ours (DESIGN §2), so the clock is typed structurally here:
 * any `Clock` of `src/lib/clock.ts` (the system clock, or `ManualClock` in tests) fits.
 */

/** The time source the hub needs: `Clock` of `src/lib/clock.ts`. */
export interface HubClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface EventHubOptions {
  clock: HubClock;
  log: Logger;
  /** Interval of `system.clock.sync` while subscribers exist (spec §6.5 rule 2). Default 15 000 ms. */
  clockSyncMs?: number;
  /** Frames kept for `Last-Event-ID` replay. Default 1000. */
  replayBufferSize?: number;
  /** Bytes kept for replay at most, whatever the frame count. Default 16 MiB. */
  replayBufferMaxBytes?: number;
  /**
   * Bytes a subscriber may have waiting in its socket (the response's `writableLength`) once a
   * write reported backpressure; past it the subscriber is dropped. Default 4 MiB: a burst of
   * status frames when thousands of nodes come online at once (after a broker restart) is
   * several MiB, and a console reading at network speed must survive it.
   */
  maxQueuedBytesPerSubscriber?: number;
  /** The payload of `system.status.updated`, sent first on every new stream (spec §6.5 rule 1). */
  systemStatus: () => SystemStatusPayload | Promise<SystemStatusPayload>;
}

export interface EventHubMetrics {
  /** Open streams now. */
  subscribers: number;
  /** Events sent by {@link EventHub.publish} (each counted once, whatever the subscriber count). */
  published: number;
  /** Subscribers dropped because they did not read their stream. */
  dropped: number;
  /** Frames now held for replay. */
  buffered: number;
  /** The last event id handed out (0: none yet). */
  lastEventId: number;
}

/** The `system.status.updated` payload (the body of `GET /api/v1/system/status`). */
export type SystemStatusPayload = SsePayloads["system.status.updated"];

/** Headers of every stream. `x-accel-buffering: no` tells nginx-style proxies not to buffer (spec §6.5). */
export const SSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
});

const DEFAULTS = {
  clockSyncMs: 15_000,
  replayBufferSize: 1000,
  replayBufferMaxBytes: 16 * 1024 * 1024,
  maxQueuedBytesPerSubscriber: 4 * 1024 * 1024,
} as const;

interface Frame {
  readonly id: number;
  readonly text: string;
  readonly bytes: number;
}

/**
 * What bounds a stream's life besides its client: it ends with its admin session (docs/decisions.md
 * "A stream lives no longer than its admin session").
 */
export interface AttachOptions {
  /** Opaque id of the admin session the stream was opened with; {@link EventHub.endSession} ends its streams. */
  session?: string;
  /** The session's expiry, ms since the epoch (hub clock): the stream ends then. */
  expiresAt?: number;
}

/** Longest delay one timer is armed for (Node's setTimeout limit); longer waits re-arm. */
const MAX_TIMER_MS = 2_147_483_647;

interface Subscriber {
  readonly res: ServerResponse;
  readonly session: string | undefined;
  /** The armed expiry timer, if the stream has an expiry. */
  expiry: { handle: unknown } | null;
  /**
   * Frames published while the opening events are being prepared (the `systemStatus()` await);
   * written right after them. `null` once the stream is live.
   */
  pending: string[] | null;
  pendingBytes: number;
}

export class EventHub {
  readonly #clock: HubClock;
  readonly #log: Logger;
  readonly #clockSyncMs: number;
  readonly #replayBufferSize: number;
  readonly #replayBufferMaxBytes: number;
  readonly #maxQueuedBytes: number;
  readonly #systemStatus: () => SystemStatusPayload | Promise<SystemStatusPayload>;

  readonly #subscribers = new Set<Subscriber>();
  readonly #listeners = new Set<(count: number) => void>();
  #replay: Frame[] = [];
  #replayBytes = 0;
  #lastId = 0;
  #published = 0;
  #dropped = 0;
  /** The armed clock-sync timer; null while no subscriber exists. (A handle may be 0, hence the box.) */
  #timer: { handle: unknown } | null = null;
  #closed = false;

  constructor(opts: EventHubOptions) {
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#clockSyncMs = positive(opts.clockSyncMs, DEFAULTS.clockSyncMs, "clockSyncMs");
    this.#replayBufferSize = nonNegative(opts.replayBufferSize, DEFAULTS.replayBufferSize, "replayBufferSize");
    this.#replayBufferMaxBytes = nonNegative(opts.replayBufferMaxBytes, DEFAULTS.replayBufferMaxBytes, "replayBufferMaxBytes");
    this.#maxQueuedBytes = positive(
      opts.maxQueuedBytesPerSubscriber,
      DEFAULTS.maxQueuedBytesPerSubscriber,
      "maxQueuedBytesPerSubscriber",
    );
    this.#systemStatus = opts.systemStatus;
  }

  /**
   * Sends one event to every open stream as `id: N\nevent: TYPE\ndata: {"type","payload"}\n\n`
   * and keeps it for `Last-Event-ID` replay.
   *
   * With no subscriber this does nothing at all: no serialization, no id, nothing buffered
   * (spec §6.5 rule 5).
   *
   * Callers publish only after their database write committed (spec §6.5 rule 6): from a
   * commit hook of `Store.transaction`, or after the synchronous write returned; never before
   * or inside an open transaction, so the console never refetches state that is not there yet.
   *
   * `payload` is plain data by type ({@link SsePayloads}: the schema of each event type in
   * `event-types.ts`; times are ISO strings, enums strings), serialized with one `JSON.stringify`
   * and not parsed here (this is the heartbeat path). Never throws: a payload that JSON cannot
   * carry (a bigint, a cycle: only reachable around the types) is logged and skipped.
   */
  publish<T extends SseEventType>(type: T, payload: SsePayloads[T]): void {
    if (this.#closed || this.#subscribers.size === 0) return;
    let frame: Frame;
    try {
      frame = this.#frame(type, payload);
    } catch (err) {
      this.#log.error({ err, type }, "SSE event payload is not serializable; event skipped");
      return;
    }
    if (frame.bytes > this.#maxQueuedBytes) {
      this.#log.warn({ type, bytes: frame.bytes }, "SSE frame is larger than a subscriber's queue limit");
    }
    this.#remember(frame);
    this.#published++;
    this.#broadcast(frame);
  }

  /** Open streams now (a stream counts from its headers on). */
  subscriberCount(): number {
    return this.#subscribers.size;
  }

  /**
   * Open streams of one admin session (the route caps them per session).
   * @param session the {@link AttachOptions.session} the streams were attached with
   */
  sessionStreamCount(session: string): number {
    let n = 0;
    for (const sub of this.#subscribers) if (sub.session === session) n++;
    return n;
  }

  /**
   * Calls `listener(count)` after every change of the subscriber count (a stream opened, ended,
   * was dropped, or the hub closed). The detect scheduler probes only while the count is above
   * zero (spec §6.4 rule 8).
   * @returns a function that removes the listener
   */
  onSubscribersChanged(listener: (count: number) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Serves one stream on a raw response (the route hijacks the reply first). Writes the SSE
   * headers, then `system.status.updated` and `system.clock.sync` (spec §6.5 rule 1: right after
   * the connection opens), then the buffered frames newer than `lastEventId` (replayed with their
   * original ids), then the frames published meanwhile. The stream stays open until the client leaves, it is dropped for
   * not reading, or {@link close} ends it.
   *
   * `lastEventId` that is not a decimal id is ignored (no replay). An id newer than any handed out
   * (a stream from before a restart) replays everything buffered, and so does one older than
   * the buffer. Replay is limited to the newest frames that fit the per-subscriber queue limit.
   *
   * With `opts.session` the stream is ended by {@link endSession} of that session; with
   * `opts.expiresAt` it ends at that time of the hub clock (docs/decisions.md: a stream lives no longer than
   * the admin session it was opened with).
   *
   * After {@link close}, answers 503 `SERVICE_UNAVAILABLE` at once. Resolves when the opening
   * events are written (or the stream was refused or ended); never rejects.
   */
  async attach(res: ServerResponse, lastEventId?: string, opts: AttachOptions = {}): Promise<void> {
    if (res.destroyed || res.writableEnded) return;
    if (this.#closed) {
      res.writeHead(503, { "content-type": "application/json; charset=utf-8", connection: "close" });
      res.end(JSON.stringify({ error: { code: "SERVICE_UNAVAILABLE", message: "the service is shutting down" } }));
      return;
    }
    // A write to a connection reset by the peer must not become an unhandled 'error'.
    res.on("error", (err) => this.#log.debug({ err }, "SSE stream error"));
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();

    // The missed frames are taken now, in the same turn as the subscriber is added, so a frame
    // published from here on is queued in `pending` and never sent twice nor lost.
    const replay = this.#replayAfter(lastEventId);

    const sub: Subscriber = { res, session: opts.session, expiry: null, pending: [], pendingBytes: 0 };
    this.#subscribers.add(sub);
    res.once("close", () => this.#remove(sub));
    this.#changed();
    if (opts.expiresAt !== undefined) this.#armExpiry(sub, opts.expiresAt);
    if (!this.#subscribers.has(sub)) return;

    let status: SystemStatusPayload;
    try {
      status = await this.#systemStatus();
    } catch (err) {
      this.#log.error({ err }, "system status for a new SSE stream failed; stream ended");
      this.#remove(sub);
      res.end();
      return;
    }
    // Left, dropped or closed while the status was being prepared.
    if (!this.#subscribers.has(sub) || sub.pending === null) return;
    let opening: string;
    try {
      opening =
        this.#frame("system.status.updated", status).text +
        this.#frame("system.clock.sync", { timestamp: this.#timestamp() }).text;
    } catch (err) {
      this.#log.error({ err }, "system status is not serializable; stream ended");
      this.#remove(sub);
      res.end();
      return;
    }
    const queued = sub.pending.join("");
    sub.pending = null;
    sub.pendingBytes = 0;
    // spec §6.5 rule 1: the opening events right after the connection opens, then the replay,
    // then what was published meanwhile; one write.
    this.#write(sub, opening + replay + queued);
  }

  /**
   * Ends every open stream (spec §6.5 rule 4: subscribers are woken so their responses end) and
   * refuses new ones. A stream that cannot take its final bytes (its client stopped reading) is
   * destroyed instead, so shutdown never waits on a client. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopTimer();
    const subs = [...this.#subscribers];
    this.#subscribers.clear();
    for (const sub of subs) {
      if (sub.expiry !== null) this.#clock.clearTimeout(sub.expiry.handle);
      sub.expiry = null;
    }
    this.#replay = [];
    this.#replayBytes = 0;
    for (const { res } of subs) {
      if (res.writableNeedDrain) res.destroy();
      else res.end();
    }
    if (subs.length > 0) this.#notify();
    // Let the final chunks reach the sockets, then cut whatever could not be flushed.
    await new Promise<void>((resolve) => setImmediate(resolve));
    for (const { res } of subs) if (!res.writableFinished) res.destroy();
  }

  /**
   * Ends every stream opened with this admin session (docs/history/decisions-2026.md "A stream lives no longer
   * than its admin session": logout ends the console's stream; the console then reconnects and is
   * told to log in again).
   * @returns how many streams were ended
   */
  endSession(session: string): number {
    let n = 0;
    for (const sub of [...this.#subscribers]) {
      if (sub.session !== session) continue;
      this.#end(sub);
      n++;
    }
    if (n > 0) this.#log.info({ streams: n }, "SSE streams ended: their admin session was revoked");
    return n;
  }

  /** Counters for `/metrics`. */
  metrics(): EventHubMetrics {
    return {
      subscribers: this.#subscribers.size,
      published: this.#published,
      dropped: this.#dropped,
      buffered: this.#replay.length,
      lastEventId: this.#lastId,
    };
  }

  // ---- internals ---------------------------------------------------------------------------

  #frame<T extends SseEventType>(type: T, payload: SsePayloads[T]): Frame {
    const data = JSON.stringify({ type, payload: payload ?? null });
    const id = ++this.#lastId;
    // JSON.stringify escapes CR and LF, so `data` is always one SSE line.
    const text = `id: ${id}\nevent: ${type}\ndata: ${data}\n\n`;
    return { id, text, bytes: Buffer.byteLength(text) };
  }

  #timestamp(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  #remember(frame: Frame): void {
    if (this.#replayBufferSize === 0) return;
    this.#replay.push(frame);
    this.#replayBytes += frame.bytes;
    while (
      this.#replay.length > 0 &&
      (this.#replay.length > this.#replayBufferSize || this.#replayBytes > this.#replayBufferMaxBytes)
    ) {
      const old = this.#replay.shift();
      if (old) this.#replayBytes -= old.bytes;
    }
  }

  /** The buffered frames to resend to a stream that last saw `lastEventId`, joined. */
  #replayAfter(lastEventId: string | undefined): string {
    if (lastEventId === undefined) return "";
    const text = lastEventId.trim();
    if (!/^\d{1,15}$/.test(text)) return "";
    const last = Number(text);
    const after = last > this.#lastId ? 0 : last;
    const out: string[] = [];
    let bytes = 0;
    let skipped = 0;
    for (let i = this.#replay.length - 1; i >= 0; i--) {
      const f = this.#replay[i];
      if (f === undefined || f.id <= after) break;
      if (bytes + f.bytes > this.#maxQueuedBytes) {
        skipped = this.#replay.slice(0, i + 1).filter((g) => g.id > after).length;
        break;
      }
      out.push(f.text);
      bytes += f.bytes;
    }
    if (skipped > 0) this.#log.info({ skipped }, "SSE replay limited to the newest frames that fit the queue limit");
    return out.reverse().join("");
  }

  #broadcast(frame: Frame): void {
    for (const sub of [...this.#subscribers]) this.#write(sub, frame.text, frame.bytes);
  }

  #write(sub: Subscriber, text: string, bytes = Buffer.byteLength(text)): void {
    if (sub.pending !== null) {
      sub.pending.push(text);
      sub.pendingBytes += bytes;
      if (sub.pendingBytes > this.#maxQueuedBytes) this.#drop(sub, sub.pendingBytes);
      return;
    }
    const res = sub.res;
    if (res.destroyed || res.writableEnded) return;
    const flushed = res.write(text);
    if (!flushed && res.writableLength > this.#maxQueuedBytes) this.#drop(sub, res.writableLength);
  }

  /** Drops a subscriber that does not drain its socket; the others never wait for it. */
  #drop(sub: Subscriber, queuedBytes: number): void {
    this.#dropped++;
    this.#log.warn(
      { queued_bytes: queuedBytes, limit: this.#maxQueuedBytes },
      "SSE subscriber dropped: it does not read its stream",
    );
    this.#remove(sub);
    sub.res.destroy();
  }

  #remove(sub: Subscriber): void {
    if (sub.expiry !== null) {
      this.#clock.clearTimeout(sub.expiry.handle);
      sub.expiry = null;
    }
    if (!this.#subscribers.delete(sub)) return;
    this.#changed();
  }

  /** Ends one stream from the server side: its response ends (or is cut when it cannot take more). */
  #end(sub: Subscriber): void {
    this.#remove(sub);
    if (sub.res.writableNeedDrain) sub.res.destroy();
    else sub.res.end();
  }

  /** Ends the stream at `expiresAt` of the hub clock (re-armed past Node's longest timer). */
  #armExpiry(sub: Subscriber, expiresAt: number): void {
    const left = expiresAt - this.#clock.now();
    if (left <= 0) {
      this.#log.info("SSE stream ended: its admin session expired");
      this.#end(sub);
      return;
    }
    const box: { handle: unknown } = { handle: undefined };
    sub.expiry = box;
    box.handle = this.#clock.setTimeout(() => {
      if (sub.expiry !== box) return;
      sub.expiry = null;
      if (this.#subscribers.has(sub)) this.#armExpiry(sub, expiresAt);
    }, Math.min(left, MAX_TIMER_MS));
  }

  /** After every change of the subscriber set: clock-sync timer on or off, then listeners. */
  #changed(): void {
    if (this.#subscribers.size === 0) this.#stopTimer();
    else if (this.#timer === null && !this.#closed) this.#armTimer();
    this.#notify();
  }

  #notify(): void {
    const count = this.#subscribers.size;
    for (const listener of [...this.#listeners]) {
      try {
        listener(count);
      } catch (err) {
        this.#log.error({ err }, "SSE subscriber-count listener failed");
      }
    }
  }

  /** spec §6.5 rule 2: one clock sync every `clockSyncMs` to every stream, re-armed each time. */
  #armTimer(): void {
    const box: { handle: unknown } = { handle: undefined };
    this.#timer = box;
    box.handle = this.#clock.setTimeout(() => {
      if (this.#timer !== box) return;
      this.#timer = null;
      // spec §6.5 rule 5: nothing is generated without subscribers.
      if (this.#closed || this.#subscribers.size === 0) return;
      // Clock syncs are not kept for replay: a stale time is of no use to a reconnecting console.
      this.#broadcast(this.#frame("system.clock.sync", { timestamp: this.#timestamp() }));
      if (this.#subscribers.size > 0 && !this.#closed && this.#timer === null) this.#armTimer();
    }, this.#clockSyncMs);
  }

  #stopTimer(): void {
    if (this.#timer === null) return;
    this.#clock.clearTimeout(this.#timer.handle);
    this.#timer = null;
  }
}

function positive(value: number | undefined, fallback: number, name: string): number {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v <= 0) throw new RangeError(`EventHub: ${name} must be > 0`);
  return v;
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 0) throw new RangeError(`EventHub: ${name} must be an integer >= 0`);
  return v;
}
