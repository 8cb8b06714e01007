import { hashKey, type QueryClient, type QueryKey } from "@tanstack/react-query";

/** How long invalidations of one burst are gathered before the refetch (a burst is one refetch). */
export const COALESCE_MS = 250;
/** Node counts pass over the whole config (0.4 s of server time at 100,000 nodes): at most one refetch per window. */
export const COUNTS_COALESCE_MS = 2_000;

/**
 * The query cache as the SSE cache table (`cache-effects.ts`) changes it. Every operation is a
 * no-op for a query nobody has read: an event about a config or node that is not cached costs a
 * map lookup, whatever the fleet's size, and never creates a cache entry.
 */
export class LiveCache {
  private readonly pending = new Map<number, Map<string, { key: QueryKey; exact: boolean }>>();
  private readonly timers = new Map<number, ReturnType<typeof setTimeout>>();

  constructor(readonly client: QueryClient) {}

  /** Whether a query (read or mounted, with or without data yet) exists under exactly `key`. */
  has(key: QueryKey): boolean {
    return this.client.getQueryCache().get(hashKey(key)) !== undefined;
  }

  /** Replaces the data of `key` by the event's (a payload that is the projection); kept only while the query exists. */
  set<T>(key: QueryKey, data: T): void {
    if (this.has(key)) this.client.setQueryData<T>(key, data);
  }

  /** Patches the cached data of `key`; nothing happens when it holds no data. */
  patch<T>(key: QueryKey, fn: (old: T) => T): void {
    if (this.has(key)) this.client.setQueryData<T>(key, (old) => (old === undefined ? old : fn(old)));
  }

  /** Always replaces `key` (the whole-console projections: kept current whatever page is open). */
  replace<T>(key: QueryKey, data: T): void {
    this.client.setQueryData<T>(key, data);
  }

  /** Refetches `key` now if it is on screen, else when next shown. */
  invalidate(key: QueryKey): void {
    if (this.has(key)) void this.client.invalidateQueries({ queryKey: key, exact: true });
  }

  /**
   * Invalidates `key` at most once per `windowMs` (a burst of events for one config becomes one
   * refetch, not one per event: the 200 events/s of the console benchmark). `exact: false`
   * invalidates every query under the key (a prefix).
   */
  invalidateSoon(key: QueryKey, exact = true, windowMs = COALESCE_MS): void {
    let pending = this.pending.get(windowMs);
    if (pending === undefined) {
      pending = new Map();
      this.pending.set(windowMs, pending);
    }
    pending.set(`${exact}${hashKey(key)}`, { key, exact });
    if (this.timers.has(windowMs)) return;
    this.timers.set(
      windowMs,
      setTimeout(() => {
        this.timers.delete(windowMs);
        const due = [...(pending?.values() ?? [])];
        pending?.clear();
        for (const k of due) void this.client.invalidateQueries({ queryKey: k.key, exact: k.exact });
      }, windowMs),
    );
  }

  /** Drops what is waiting (the connection closed: logout or a new session). */
  close(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.pending.clear();
  }
}
