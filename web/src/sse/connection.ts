/**
 * The console's ONE realtime connection (spec §6.5 rule 3): `GET /api/v1/events/stream`
 * with `Authorization: Bearer` (spec §5 table), which `EventSource` cannot send, hence
 * `@microsoft/fetch-event-source`. It resends `Last-Event-ID` (the id of the last frame read) on
 * every reconnect, so the hub replays what was missed. One reconnect layer: a dropped or ended
 * stream is retried with a capped exponential backoff (1 s, 2 s, 4 s … 15 s), reset once a stream
 * opens; a 401 ends the session (back to login) instead.
 *
 * Frames are `event: <type>` with `data: {"type", "payload"}`; each payload goes to the listeners
 * of its type. Pages never use this class directly: the provider binds the cache table (`cache-effects.ts`) to it; see `useSseStatus`.
 */
import { fetchEventSource, type EventSourceMessage } from "@microsoft/fetch-event-source";
import type { SseEventType, SseWirePayloads } from "../api/types.js";

/** `connecting`: first attempt; `live`: stream open; `reconnecting`: lost, retrying; `closed`: stopped. */
export type SseStatus = "connecting" | "live" | "reconnecting" | "closed";

export type SseListener<T extends SseEventType> = (payload: SseWirePayloads[T], frameId: string) => void;

/** First retry delay after a loss, doubled per failed attempt up to {@link BACKOFF_MAX_MS}. */
export const BACKOFF_START_MS = 1_000;
export const BACKOFF_MAX_MS = 15_000;

class FatalSseError extends Error {}
class RetrySseError extends Error {}

export interface SseConnectionOptions {
  url?: string;
  token: string;
  /** The stream answered 401: the session is over. */
  onUnauthorized: () => void;
  /** A stream opened again after a loss (not the first open): refresh what is on screen. */
  onReconnected: () => void;
  /** Retry delays in ms (tests shorten them); default 1 s doubling to 15 s. */
  backoff?: { startMs: number; maxMs: number };
}

export class SseConnection {
  private readonly listeners = new Map<string, Set<(payload: unknown, id: string) => void>>();
  private readonly statusListeners = new Set<(status: SseStatus) => void>();
  private readonly offsetListeners = new Set<() => void>();
  private controller: AbortController | null = null;
  private opened = false;
  private readonly backoffStart: number;
  private readonly backoffMax: number;
  private backoffMs: number;
  /** Milliseconds to add to `Date.now()` for the server's time (from `system.clock.sync`). */
  serverOffsetMs = 0;
  status: SseStatus = "closed";

  constructor(private readonly opts: SseConnectionOptions) {
    this.backoffStart = opts.backoff?.startMs ?? BACKOFF_START_MS;
    this.backoffMax = opts.backoff?.maxMs ?? BACKOFF_MAX_MS;
    this.backoffMs = this.backoffStart;
  }

  /** Opens the stream (idempotent). */
  start(): void {
    if (this.controller !== null) return;
    const controller = new AbortController();
    this.controller = controller;
    this.setStatus("connecting");
    void fetchEventSource(this.opts.url ?? "/api/v1/events/stream", {
      signal: controller.signal,
      headers: { authorization: `Bearer ${this.opts.token}` },
      openWhenHidden: true,
      onopen: async (res) => {
        if (res.status === 401) throw new FatalSseError("unauthorized");
        if (!res.ok || !(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
          throw new RetrySseError(`stream answered ${res.status}`);
        }
        this.backoffMs = this.backoffStart;
        const again = this.opened;
        this.opened = true;
        this.setStatus("live");
        if (again) this.opts.onReconnected();
      },
      onmessage: (msg) => this.dispatch(msg),
      onclose: () => {
        // The server ended the stream (restart, shutdown, session end): reconnect; a 401 then ends it.
        throw new RetrySseError("stream ended");
      },
      onerror: (err: unknown) => {
        if (err instanceof FatalSseError) {
          this.stop();
          this.opts.onUnauthorized();
          throw err; // stops fetchEventSource
        }
        this.setStatus("reconnecting");
        const wait = this.backoffMs;
        this.backoffMs = Math.min(this.backoffMs * 2, this.backoffMax);
        return wait;
      },
    }).catch(() => undefined);
  }

  /** Closes the stream; listeners stay registered. */
  stop(): void {
    this.controller?.abort();
    this.controller = null;
    this.setStatus("closed");
  }

  /** Adds a listener for one event type; returns the function that removes exactly it. */
  subscribe<T extends SseEventType>(type: T, listener: SseListener<T>): () => void {
    let set = this.listeners.get(type);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(type, set);
    }
    const fn = listener as (payload: unknown, id: string) => void;
    set.add(fn);
    return () => {
      set.delete(fn);
    };
  }

  /** How many listeners an event type has (tests and diagnostics). */
  listenerCount(type: SseEventType): number {
    return this.listeners.get(type)?.size ?? 0;
  }

  onStatus(listener: (status: SseStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => {
      this.statusListeners.delete(listener);
    };
  }

  /** Calls `listener` after each `system.clock.sync` (the server offset may have changed). */
  onServerTime(listener: () => void): () => void {
    this.offsetListeners.add(listener);
    return () => {
      this.offsetListeners.delete(listener);
    };
  }

  private setStatus(status: SseStatus): void {
    if (this.status === status) return;
    this.status = status;
    for (const l of [...this.statusListeners]) l(status);
  }

  /** One frame: a malformed one is dropped (logged), never thrown into the stream reader. */
  private dispatch(msg: EventSourceMessage): void {
    if (msg.event === "" || msg.data === "") return;
    let data: { type?: unknown; payload?: unknown };
    try {
      data = JSON.parse(msg.data) as { type?: unknown; payload?: unknown };
    } catch {
      console.warn("SSE frame with malformed data dropped", msg.event);
      return;
    }
    if (msg.event === "system.clock.sync") {
      const ts = (data.payload as { timestamp?: unknown } | undefined)?.timestamp;
      if (typeof ts === "string" && !Number.isNaN(Date.parse(ts))) {
        this.serverOffsetMs = Date.parse(ts) - Date.now();
        for (const l of [...this.offsetListeners]) l();
      }
    }
    const set = this.listeners.get(msg.event);
    if (set === undefined) return;
    for (const l of [...set]) {
      try {
        l(data.payload, msg.id);
      } catch (err) {
        console.error(`SSE listener for ${msg.event} failed`, err);
      }
    }
  }
}
