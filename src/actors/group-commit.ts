import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import { NODE_MACHINE_VERSION } from "../machines/node.machine.js";
import type { Store } from "../store/db.js";
import { createNodeStateStatements, type NodeActorRow, type NodeStateStatements } from "../store/node-client-state.repository.js";
import { sameContextButSignal } from "./heartbeat-coalescer.js";
import type { Entry } from "./node-entries.js";
import { projectNode, projectionChanged, type NodeProjection } from "./projection.js";
import type { NewTransition, RecorderSink, StoredRows } from "./recorder-sink.js";
import { sameStateValue } from "./recorder.js";

/** The monotonic time, ms, and the timer group-commit pacing uses. */
export interface CommitTimer {
  now(): number;
  setTimeout(run: () => void, ms: number): void;
}

const REAL_TIME: CommitTimer = {
  now: () => performance.now(),
  setTimeout: (run, ms) => void setTimeout(run, ms),
};

/**
 * Group commit cap: with this many states queued the flush runs right after the current message
 * instead of waiting for `setImmediate` (which a busy poll phase can hold back for a second).
 */
export const MAX_BATCH_STATES = 1024;

/**
 * After a failed group commit (disk full, database busy or read-only), the queued states, rows and
 * effects wait this long, ms, for the next attempt, unless a new change flushes sooner.
 */
export const FLUSH_RETRY_MS = 1000;

/** Who hears of a committed change (`RegistryDeps.onStatusChanged`, called on this object). */
export interface CommitListener {
  onStatusChanged(configId: string, nodeId: string, projection: NodeProjection): void;
}

/** A node whose projection a commit changes: what was committed before (undefined for its first) and now. */
export interface CommittedChange {
  configId: string;
  nodeId: string;
  before: NodeProjection | undefined;
  after: NodeProjection;
}

/**
 * Hears the changed projections inside the commit's transaction, so what it writes commits with
 * them (the alert rules: persist before emit); answers what to run after the commit. Must not throw.
 */
export type InCommitHook = (changes: readonly CommittedChange[]) => (() => void) | undefined;

export interface GroupCommitDeps {
  store: Store;
  /** Node time: `updated_at` of the rows written, and the retry timer after a failed commit. */
  clock: Clock;
  log: Logger;
  /** `RegistryDeps.commitPaceMs`; default 0. */
  commitPaceMs?: number;
  /** `RegistryDeps.commitTimer`; default `performance.now()` and `setTimeout`. */
  commitTimer?: CommitTimer;
  /** The flight recorder's rows go into the same transaction as the states they lead to. */
  recorder: Pick<RecorderSink, "queued" | "take" | "append" | "committed" | "rolledBack" | "requeue">;
  /** A full write stores the snapshot: a held heartbeat is delivered to the actor first. */
  coalescer: { deliverHeld(entry: Entry): void };
  /** Told of every projection a commit changed, after the commit (SSE `endpoint.status.updated`). */
  listener: CommitListener;
  /** Told of them inside the transaction (`RegistryDeps.inCommit`). */
  inCommit?: InCommitHook;
}

/**
 * The group commit (DESIGN §3 "Persistence order": persist before emit). Every snapshot change
 * of a node marks its entry dirty; the dirty states, with the flight-recorder rows queued
 * meanwhile, are written in one SQLite transaction on the next turn of the event loop, or right
 * after the current message once {@link MAX_BATCH_STATES} are queued; only after the commit are
 * the status changes told to the listener, the machines' effects run and the callers waiting in
 * {@link wait} resolved. A state whose only change is its newest signal writes the
 * `last_signal_at` column alone. A failed write is logged and rejects the waiting callers; its
 * states, rows and effects stay queued and are written by the next commit ({@link FLUSH_RETRY_MS}
 * later at the latest), so memory and the database never disagree for longer than the fault lasts.
 */
export class GroupCommit {
  readonly #deps: GroupCommitDeps;
  readonly #recorder: GroupCommitDeps["recorder"];
  readonly #coalescer: GroupCommitDeps["coalescer"];
  /** The node-state statements, prepared once (store factory). */
  readonly #nodeState: NodeStateStatements;
  /** Entries with a snapshot change not yet written (by identity: no key string per change). */
  #dirty = new Set<Entry>();
  #effects: Array<() => void> = [];
  #waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  // Failures are logged inside flushNow and reject the waiting callers; nothing is dropped silently.
  /** A flush after the current poll phase, or, within `commitPaceMs` of the last one, when that has passed. */
  readonly #flushLater = coalesced(
    (run) => this.#scheduleFlush(run),
    () => void this.flushNow().catch(() => undefined),
  );
  /** A flush after the current message (a microtask, so never inside an XState notification). */
  readonly #flushSoon = coalesced(queueMicrotask, () => void this.flushNow().catch(() => undefined));
  /** When the last group commit started (commit timer), ms. */
  #lastFlushAt = Number.NEGATIVE_INFINITY;
  readonly #pace: number;
  readonly #commitTimer: CommitTimer;
  /** The clock timer of the next attempt after a failed commit. */
  #retryTimer: unknown = undefined;
  #stopped = false;

  constructor(deps: GroupCommitDeps) {
    this.#deps = deps;
    this.#recorder = deps.recorder;
    this.#coalescer = deps.coalescer;
    this.#pace = deps.commitPaceMs ?? 0;
    this.#commitTimer = deps.commitTimer ?? REAL_TIME;
    this.#nodeState = createNodeStateStatements(deps.store);
  }

  /** Every stored node with what its actor is built from, read through the commit's statements (start, reload). */
  storedNodes(): NodeActorRow[] {
    return this.#nodeState.nodesForActors();
  }

  /** Effects queued for after the next commit. */
  get queuedEffects(): number {
    return this.#effects.length;
  }

  /** Queues a machine effect to run after the next commit. */
  queueEffect(effect: () => void): void {
    this.#effects.push(effect);
  }

  /** Queues a node's state for the next commit and schedules it. */
  markDirty(entry: Entry): void {
    if (this.#stopped) return;
    this.#dirty.add(entry);
    // A busy poll phase (thousands of agent sockets readable at once) can keep `setImmediate`
    // from running for a long time: past the cap, flush after the current message instead (a
    // microtask, so never inside an XState notification). A cap by age made more, smaller
    // commits and measured worse latency at 5k msgs/s.
    if (this.#dirty.size >= MAX_BATCH_STATES) this.#flushSoon();
    else this.#flushLater();
  }

  /** Drops a node's queued state (it left management). */
  forget(entry: Entry): void {
    this.#dirty.delete(entry);
  }

  /**
   * Schedules a commit and waits for it.
   * @returns resolves once everything queued before it is committed; rejects if that write failed
   */
  wait(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      this.#flushLater();
    });
  }

  /** Drops the queued states and effects (a reload: the store is the truth); waiters stay. */
  discard(): void {
    this.#dirty = new Set();
    this.#effects = [];
  }

  /** Queues nothing more and cancels the retry timer (after the final flush). */
  stop(): void {
    this.#stopped = true;
    if (this.#retryTimer !== undefined) this.#deps.clock.clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  /**
   * Writes everything queued now, in one transaction, then tells the listener, runs the effects
   * and resolves the waiters. While a request's transaction holds the connection it writes after
   * it, never inside it.
   * @throws the write's error, after logging it, rejecting the waiters and re-queueing the work
   */
  async flushNow(): Promise<void> {
    if (this.#nodeState.busy()) {
      this.#flushLater();
      return;
    }
    const recorder = this.#recorder;
    if (this.#dirty.size === 0 && this.#effects.length === 0 && this.#waiters.length === 0 && recorder.queued === 0) return;
    this.#lastFlushAt = this.#commitTimer.now();
    const dirty = this.#dirty;
    this.#dirty = new Set();
    const effects = this.#effects;
    this.#effects = [];
    const waiters = this.#waiters;
    this.#waiters = [];
    const recorded = recorder.take();
    const changed: Array<{ entry: Entry; projection: NodeProjection }> = [];
    // What #writeEntry believed written before this attempt: a rolled-back commit restores it.
    const writtenBefore = new Map<Entry, Entry["written"]>();
    let stored: StoredRows;
    let after: (() => void) | undefined;
    try {
      [stored, after] = this.#write(dirty, recorded, changed, writtenBefore);
    } catch (err) {
      this.#deps.log.error({ err, nodes: dirty.size }, "persisting node state failed; retrying");
      for (const [entry, written] of writtenBefore) entry.written = written;
      recorder.rolledBack();
      this.#requeue(dirty, effects, recorded);
      for (const w of waiters) w.reject(err);
      throw err;
    }
    recorder.committed(stored);
    after?.();
    this.#emit(changed, effects, waiters);
  }

  /**
   * The transaction: the flight recorder's rows, then every dirty state (each node's newest row
   * riding on its state write), then the newest row of nodes that recorded but wrote no state.
   * @returns what the flight recorder appended, and what the in-commit hook runs after the commit
   */
  #write(
    dirty: Set<Entry>,
    recorded: NewTransition[],
    changed: Array<{ entry: Entry; projection: NodeProjection }>,
    writtenBefore: Map<Entry, Entry["written"]>,
  ): [StoredRows, (() => void) | undefined] {
    const nodeState = this.#nodeState;
    const now = this.#deps.clock.now();
    let stored: StoredRows = { heads: new Map(), appended: [], rowIds: [] };
    let after: (() => void) | undefined;
    nodeState.inTransaction(() => {
      // The flight recorder's rows commit with the states they lead to (persist before emit).
      if (recorded.length > 0) stored = this.#recorder.append(recorded);
      const unwritten = new Map(stored.heads);
      for (const entry of dirty) {
        writtenBefore.set(entry, entry.written);
        const p = this.#writeEntry(entry, now, unwritten);
        if (p !== null && projectionChanged(entry.committed, p)) changed.push({ entry, projection: p });
      }
      // Nodes that recorded rows but whose state row this commit did not rewrite.
      for (const [entry, head] of unwritten) nodeState.writeHead(entry.nodeId, head);
      const hook = this.#deps.inCommit;
      if (hook !== undefined && changed.length > 0) {
        after = hook(changed.map(({ entry, projection }) => ({ configId: entry.configId, nodeId: entry.nodeId, before: entry.committed, after: projection })));
      }
    });
    return [stored, after];
  }

  /**
   * Writes one dirty entry's state inside the group commit's transaction.
   * @returns the node's new projection, or null when only its newest signal moved (or it is not live)
   */
  #writeEntry(entry: Entry, now: number, heads: Map<Entry, number>): NodeProjection | null {
    // Only a live actor marks its entry dirty, and an entry never goes back to dormant.
    if (entry.state.kind !== "live") return null;
    const nodeState = this.#nodeState;
    const actor = entry.state.actor;
    let snap = actor.getSnapshot();
    const w = entry.written;
    if (w !== undefined && (w === snap || (sameStateValue(w.value, snap.value) && sameContextButSignal(w.context, snap.context)))) {
      // Only the newest signal moved: nothing an operator sees, and no snapshot JSON.
      // The flight recorder's newest row rides on the write this commit makes anyway.
      entry.written = snap;
      nodeState.writeSignal(entry.nodeId, entry.pendingSignalAt ?? snap.context.lastSignalAt, now, heads.get(entry) ?? null);
      heads.delete(entry);
      return null;
    }
    if (entry.pendingSignalAt !== undefined) {
      // A full write stores the snapshot: the held heartbeat goes into it first.
      this.#coalescer.deliverHeld(entry);
      snap = actor.getSnapshot();
    }
    entry.written = snap;
    const p = projectNode(snap);
    nodeState.writeState(entry.nodeId, p, JSON.stringify(actor.getPersistedSnapshot()), NODE_MACHINE_VERSION, now, heads.get(entry) ?? null);
    heads.delete(entry);
    if (entry.committed?.confirmedSha !== p.confirmedSha) {
      nodeState.writeConfirmed(entry.nodeId, p.confirmedVersion, p.confirmedSha);
    }
    return p;
  }

  /** After the commit: each changed projection becomes the committed one and is told (not a node's first), then effects, then waiters. */
  #emit(changed: Array<{ entry: Entry; projection: NodeProjection }>, effects: Array<() => void>, waiters: Array<{ resolve: () => void }>): void {
    const listener = this.#deps.listener;
    for (const { entry, projection } of changed) {
      const first = entry.committed === undefined;
      entry.committed = projection;
      if (!first) listener.onStatusChanged(entry.configId, entry.nodeId, projection);
    }
    for (const effect of effects) {
      try {
        effect();
      } catch (err) {
        this.#deps.log.error({ err }, "node effect failed");
      }
    }
    for (const w of waiters) w.resolve();
  }

  #scheduleFlush(run: () => void): void {
    const wait = this.#pace > 0 ? this.#lastFlushAt + this.#pace - this.#commitTimer.now() : 0;
    if (wait > 0) this.#commitTimer.setTimeout(run, wait);
    else setImmediate(run);
  }

  /**
   * Puts a failed commit's work back in front of what was queued since, and arms the retry
   * (DESIGN §3 persist-then-emit: nothing of it is notified or run before it is written).
   */
  #requeue(dirty: Set<Entry>, effects: Array<() => void>, recorded: NewTransition[]): void {
    if (this.#stopped) return;
    for (const entry of this.#dirty) dirty.add(entry);
    this.#dirty = dirty;
    this.#effects = effects.concat(this.#effects);
    this.#recorder.requeue(recorded);
    if (this.#retryTimer !== undefined) return;
    this.#retryTimer = this.#deps.clock.setTimeout(() => {
      this.#retryTimer = undefined;
      this.#flushLater();
    }, FLUSH_RETRY_MS);
  }
}

/** `run` deferred by `defer`, once however often it is asked for before it runs. */
function coalesced(defer: (cb: () => void) => unknown, run: () => void): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    defer(() => {
      pending = false;
      run();
    });
  };
}
