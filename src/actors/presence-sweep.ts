import type { Clock } from "../lib/clock.js";

/** Width of one presence-sweep bucket, ms: deadlines are grouped so that a sweep scans few nodes. */
export const SWEEP_BUCKET_MS = 1000;

/** What the sweep times: a node with its online-TTL deadline (ms; null when not online), which the sweep keeps. */
export interface Swept {
  deadline: number | null;
}

export interface PresenceSweepDeps<T extends Swept> {
  clock: Clock;
  /**
   * Whether time moves node state (`RegistryDeps.timersEnabled`): false tracks nothing and
   * never fires (spec §1.7, MQTT off).
   */
  enabled: boolean;
  /** A node whose deadline has passed, at `now` (ms): its machine decides (`presence.ttl_check`). */
  onDue(node: T, now: number): void;
}

/**
 * The presence sweep (spec §3.1 online TTL): instead of one XState timer per node, cancelled and
 * re-armed by every heartbeat, each online node's deadline (`presenceDeadline` of its snapshot)
 * goes into a one-second bucket and a single clock timer is armed for the earliest one. When it
 * fires, every node whose deadline has passed is handed to `onDue`; the snapshot change that
 * follows re-tracks the node, and the timer is re-armed for the earliest deadline left.
 * Invariant: a node's `deadline` is non-null exactly while it sits in the bucket of that deadline.
 */
export class PresenceSweep<T extends Swept> {
  readonly #clock: Clock;
  readonly #enabled: boolean;
  readonly #onDue: (node: T, now: number) => void;
  /** Online nodes by `floor(deadline / SWEEP_BUCKET_MS)`. */
  readonly #buckets = new Map<number, Set<T>>();
  #timer: unknown = undefined;
  /** When the armed timer fires, ms; Infinity when none is armed. */
  #at = Number.POSITIVE_INFINITY;
  /** Online nodes under the sweep. */
  #tracked = 0;
  #stopped = false;

  constructor(deps: PresenceSweepDeps<T>) {
    this.#clock = deps.clock;
    this.#enabled = deps.enabled;
    this.#onDue = deps.onDue;
  }

  /** Online nodes whose TTL the sweep is timing. */
  get tracked(): number {
    return this.#tracked;
  }

  /** When the timer fires next, ms since the epoch; null when none is armed. */
  get nextAt(): number | null {
    return Number.isFinite(this.#at) ? this.#at : null;
  }

  /** Moves a node to the bucket of its (new) deadline (null: not online, leaves the sweep) and arms the timer if earlier. */
  track(node: T, deadline: number | null): void {
    if (deadline === node.deadline || this.#stopped || !this.#enabled) return;
    const from = node.deadline === null ? null : Math.floor(node.deadline / SWEEP_BUCKET_MS);
    const to = deadline === null ? null : Math.floor(deadline / SWEEP_BUCKET_MS);
    if (node.deadline === null) this.#tracked++;
    else if (deadline === null) this.#tracked--;
    node.deadline = deadline;
    if (from !== to) {
      if (from !== null) this.#bucketDelete(from, node);
      if (to !== null) {
        let bucket = this.#buckets.get(to);
        if (!bucket) this.#buckets.set(to, (bucket = new Set()));
        bucket.add(node);
      }
    }
    if (deadline !== null && deadline < this.#at) this.#arm(deadline);
  }

  /** Takes a node out of the sweep (it left management). */
  untrack(node: T): void {
    if (node.deadline === null) return;
    this.#bucketDelete(Math.floor(node.deadline / SWEEP_BUCKET_MS), node);
    node.deadline = null;
    this.#tracked--;
  }

  /** Forgets every node and disarms the timer (a reload re-tracks what it restores). */
  clear(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Number.POSITIVE_INFINITY;
    for (const bucket of this.#buckets.values()) for (const node of bucket) node.deadline = null;
    this.#buckets.clear();
    this.#tracked = 0;
  }

  /** Clears the sweep for good: nothing is tracked or fires afterwards. */
  stop(): void {
    this.#stopped = true;
    this.clear();
  }

  #bucketDelete(index: number, node: T): void {
    const bucket = this.#buckets.get(index);
    if (!bucket) return;
    bucket.delete(node);
    if (bucket.size === 0) this.#buckets.delete(index);
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = this.#clock.setTimeout(() => this.#sweep(), Math.max(0, at - this.#clock.now()));
  }

  /** Every node whose deadline has passed goes to `onDue`; then the timer is armed for the earliest left. */
  #sweep(): void {
    this.#timer = undefined;
    this.#at = Number.POSITIVE_INFINITY;
    if (this.#stopped) return;
    const now = this.#clock.now();
    const due: T[] = [];
    const last = Math.floor(now / SWEEP_BUCKET_MS);
    for (const [index, bucket] of this.#buckets) {
      if (index > last) continue;
      for (const node of bucket) if (node.deadline !== null && node.deadline <= now) due.push(node);
    }
    // The machine decides; its snapshot change re-buckets the node (track, from the actor's subscription).
    for (const node of due) this.#onDue(node, now);
    let earliest: { index: number; bucket: Set<T> } | undefined;
    for (const [index, bucket] of this.#buckets) if (earliest === undefined || index < earliest.index) earliest = { index, bucket };
    if (earliest === undefined) return;
    let next = Number.POSITIVE_INFINITY;
    for (const node of earliest.bucket) if (node.deadline !== null && node.deadline < next) next = node.deadline;
    if (next < this.#at) this.#arm(next);
  }
}
