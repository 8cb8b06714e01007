import { createActor, type Actor, type AnyStateNode } from "xstate";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { NodeMode } from "../protocol/enums.js";
import {
  hasPendingTimers,
  NODE_MACHINE_VERSION,
  nodeMachine,
  presenceDeadline,
  type NodeContext,
  type NodeEvent,
  type NodeMachine,
} from "../machines/node.machine.js";
import type { Store } from "../store/db.js";
import { createNodeStateStatements, type NodeActorRow, type NodeStateStatements } from "../store/node-client-state.repository.js";
import { appendNodeTransitions, forgetNodeStateValues } from "../store/node-transitions.repository.js";
import { projectNode, projectionChanged, type NodeProjection } from "./projection.js";
import {
  activeStateIds,
  afterEventsOf,
  originOf,
  shownChanges,
  sameStateValue,
  sameShownContext,
  StateValueTexts,
  TIMER,
  type RoutedNodeEvent,
  type TransitionOrigin,
} from "./recorder.js";

/** Effects the machine asks for; each runs after the state that asked for it is committed. */
export interface RegistryEffects {
  /** Cut the node's live broker connection (its credentials are already gone from the store). */
  revokeClient(configId: string, nodeId: string, reason: "reset" | "made_static"): void;
  /** The node is online with a staged config it may not have: push it (debounced by the callee). */
  requestConfigPush(configId: string, nodeId: string): void;
}

export interface RegistryDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  onlineTtlMs: number;
  detectTimeoutMs: number;
  /**
   * Whether time moves node state: the presence sweep and the re-arming of restored timers.
   * False while MQTT services are disabled (spec §1.7: dynamic nodes are treated as static and
   * their stored data is unchanged, so no TTL may drop them and no token may expire in the
   * store; on the next start with MQTT on, everything is re-armed from the stored times).
   * Default true.
   */
  timersEnabled?: boolean;
  effects: RegistryEffects;
  /** Called after commit when a node's projection changed (SSE `endpoint.status.updated`). */
  onStatusChanged(configId: string, nodeId: string, projection: NodeProjection): void;
  /**
   * The REST route being served (`METHOD /pattern`), read when an event sent while serving it
   * makes a flight-recorder row (issue 13 source `rest`); undefined outside a request.
   */
  currentRoute?: () => string | undefined;
  /**
   * The flight recorder's retention (issue 13 "newest N per node kept"): once a node has
   * appended `keep` + `slack` rows since the last cut (or since start), `prune` gets the id of a
   * row with at least `keep` of its rows at or above it, all appended since start, so that
   * retention deletes what is below without walking the chain to find it. Rows stored before
   * start are cut with the first such call, or by retention's own sweeps. Absent: nothing is cut
   * from here.
   */
  timelineRetention?: { keep: number; slack: number; prune(nodeId: string, cutoff: number): void };
  /**
   * Coalesce heartbeats that change nothing but the newest signal (see
   * {@link NodeActorRegistry} "Coalesced heartbeats"). Default true; false delivers every
   * heartbeat to its actor (the reference the property test compares against).
   */
  coalesceHeartbeats?: boolean;
  /**
   * Group commit pacing, ms: a commit that follows the previous one by less than this waits for
   * the rest of it (more states per transaction under load); a change after a quiet spell still
   * commits on the next turn. Default 0: every commit on the next turn.
   */
  commitPaceMs?: number;
  /** Real time for the pacing (not the node clock): `performance.now()` and `setTimeout` by default. */
  commitTimer?: CommitTimer;
}

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
 * A persisted node snapshot as stored (`getPersistedSnapshot()` JSON), status checked `active`
 * by {@link parsePersistedNode}: what XState's `createActor(..., { snapshot })` restores from.
 */
interface PersistedNode {
  status: "active";
  output: undefined;
  error: undefined;
  value: unknown;
  context: NodeContext;
}

/**
 * A node's actor, or, for a restored node that has had no event yet, its stored snapshot JSON,
 * newest signal time and stored projection. The actor of a dormant node is created on its
 * first event ({@link NodeActorRegistry} `#actorOf`).
 */
type EntryState =
  | { kind: "live"; actor: Actor<NodeMachine> }
  | { kind: "dormant"; snapshot: string; lastSignalAt: number | null; projection: NodeProjection };

interface Entry {
  configId: string;
  nodeId: string;
  /** Stored mode when the entry was made (the actor's input when it starts fresh). */
  mode: NodeMode;
  state: EntryState;
  /** Projection as last committed. */
  committed: NodeProjection | undefined;
  /**
   * State value and context as last written in full (snapshot JSON). A change that moves only
   * `lastSignalAt` (a heartbeat of an online node with nothing new) writes that column alone.
   * Held by reference (the actor's snapshot itself, or the one a signal-only write covered), so
   * a commit of held heartbeats alone, which leave the snapshot as it was, compares nothing.
   */
  written: { value: unknown; context: NodeContext } | undefined;
  /** Online-TTL deadline the presence sweep holds this node under, ms; null when not online. */
  deadline: number | null;
  /** The actor's snapshot as last observed: the "before" of its next flight-recorder row. */
  seen: { value: unknown; context: NodeContext } | undefined;
  /** The state value of the last row recorded (the next row's "before") and its JSON, reused. */
  lastValue?: unknown;
  lastJson?: string;
  /** The node's newest committed flight-recorder row (`node_client_state.transition_head`); null when none. */
  head: number | null;
  /** Rows committed for this node since start (the flight recorder's retention marks count them). */
  appended: number;
  /**
   * Every `slack`-th transition committed for this node since the last cut: its count (`pos`, of
   * {@link appended}) and the id of the row holding it. Retention cuts below the newest mark with
   * `keep` transitions at or above it.
   */
  marks: Array<{ pos: number; id: number }>;
  /** Set when the node left management (deleted, quarantined, reloaded): its queued rows are dropped. */
  gone?: true;
  /**
   * Learned from the last heartbeat delivered in full: while the actor's snapshot is still
   * `snapshot`, a heartbeat carrying `wgOnline` only sets `lastSignalAt` (see {@link NodeActorRegistry}, "Coalesced heartbeats").
   */
  signalOnly?: { snapshot: NodeActorSnapshot; wgOnline: boolean | undefined };
  /** `at` of the newest coalesced heartbeat not yet delivered to the actor, ms; undefined when none. */
  pendingSignalAt?: number;
}

type NodeActorSnapshot = ReturnType<Actor<NodeMachine>["getSnapshot"]>;

/**
 * Group commit cap: with this many states queued the flush runs right after the current message
 * instead of waiting for `setImmediate` (which a busy poll phase can hold back for a second).
 */
const MAX_BATCH_STATES = 1024;

/**
 * After a failed group commit (disk full, database busy or read-only), the queued states, rows and
 * effects wait this long, ms, for the next attempt, unless a new change flushes sooner.
 */
const FLUSH_RETRY_MS = 1000;

/**
 * Flight-recorder rows kept queued across failed commits at most; past it the oldest are dropped
 * (and counted in the log): a long storage outage must not grow memory without bound.
 */
const MAX_REQUEUED_TRANSITIONS = 50_000;

/** Width of one presence-sweep bucket, ms: deadlines are grouped so that a sweep scans few nodes. */
const SWEEP_BUCKET_MS = 1000;

type NodeRowForActor = NodeActorRow;

/** A flight-recorder row waiting for the group commit, with the entry of the node it belongs to. */
type NewTransition = import("../store/node-transitions.repository.js").NewNodeTransition & { entry: Entry };

/**
 * What a group commit appended to the flight recorder: each node's new newest row (to store with
 * its state), the transitions in order, and the id of the row that holds each.
 */
interface StoredRows {
  heads: Map<Entry, number>;
  appended: NewTransition[];
  rowIds: number[];
}

/**
 * The actor system: one XState actor per node, keyed by `config_id/node_id` (design card).
 *
 * Persist-then-emit: every snapshot change of an actor (an event, or a timer firing) is queued;
 * the queue is written in one SQLite transaction on the next turn of the event loop, or right
 * after the current message once 1,024 states are queued (group commit), and only after the
 * commit are SSE notifications and machine effects run. A failed write is logged and rejects
 * the {@link NodeActorRegistry.send} promises waiting on it; its states, flight-recorder rows
 * and effects stay queued and are written by the next commit ({@link FLUSH_RETRY_MS} later at
 * the latest), so memory and the database never disagree for longer than the fault lasts.
 *
 * Dormant nodes: a node restored at start gets no XState actor until its first event; its
 * stored projection answers reads meanwhile (cold start and memory scale with nodes, not actors).
 *
 * Presence sweep (spec §3.1 online TTL): instead of one XState timer per node, cancelled and
 * re-armed by every heartbeat, the registry keeps each online node's {@link presenceDeadline}
 * in one-second buckets and runs a single clock timer for the earliest one; when it fires, the
 * due nodes get `presence.ttl_check` and their machine decides. Restoring re-arms by bucketing.
 *
 * Coalesced heartbeats: most heartbeats of an online node repeat what it already reported, and
 * the machine's only answer is `recordSignal` (`lastSignalAt` = the event's `at`). When one
 * heartbeat delivered in full changed nothing but `lastSignalAt` (same state value, same
 * context otherwise, no effect queued, no flight-recorder row), the next heartbeats with the same
 * `wg_online`, while the actor's snapshot is still that one, skip XState: the registry keeps the
 * newest `at`, moves the presence deadline to `at + onlineTtlMs`, and the group commit writes the
 * `last_signal_at` column (as it does for such a heartbeat delivered in full). Reads overlay that
 * time on the snapshot (projection, machine state), and any other event for the node first
 * delivers the newest held heartbeat to the actor, so the actor sees the same events in the same
 * order, with runs of identical heartbeats cut to their last. This assumes that a heartbeat's
 * outcome does not depend on its `at` or on `lastSignalAt` (true of the node machine: no guard of
 * `mqtt.signal` reads them); `test/actors/coalesced-heartbeats.test.ts` compares against
 * `coalesceHeartbeats: false` over random event sequences.
 */
export class NodeActorRegistry {
  readonly #deps: RegistryDeps;
  readonly #entries = new Map<string, Entry>();
  /**
   * The entry {@link #lookup} found last: the router asks for one node twice per message (its
   * mode, then the event), so the second lookup builds no key string. Cleared whenever
   * {@link #entries} changes.
   */
  #last: Entry | undefined;
  readonly #machine: NodeMachine;
  /** Entries with a snapshot change not yet written (by identity: no key string per change). */
  #dirty = new Set<Entry>();
  /** Nodes whose stored state could not be restored at the last start/reload, by key: the reason. */
  readonly #quarantined = new Map<string, { configId: string; nodeId: string; reason: string }>();
  #effects: Array<() => void> = [];
  #waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  // Failures are logged inside #flushNow and reject the waiting callers; nothing is dropped silently.
  /** A flush after the current poll phase, or, within `commitPaceMs` of the last one, when that has passed. */
  readonly #flushLater = coalesced(
    (run) => this.#scheduleFlush(run),
    () => void this.#flushNow().catch(() => undefined),
  );
  /** When the last group commit started (commit timer), ms. */
  #lastFlushAt = Number.NEGATIVE_INFINITY;
  readonly #pace: number;
  readonly #commitTimer: CommitTimer;
  /** A flush after the current message (a microtask, so never inside an XState notification). */
  readonly #flushSoon = coalesced(queueMicrotask, () => void this.#flushNow().catch(() => undefined));
  #stopped = false;
  /** The clock timer of the next attempt after a failed commit. */
  #retryTimer: unknown = undefined;
  /** The event being delivered to an actor by {@link send}/{@link post}/the sweep; undefined while a timer fires. */
  #sending: RoutedNodeEvent | undefined = undefined;
  /** Flight-recorder rows waiting for the group commit (issue 13). */
  #recorded: NewTransition[] = [];
  /** The recorded state values' JSON, interned (one string instance per distinct value). */
  readonly #valueTexts = new StateValueTexts();
  /** `after` event type of each state with a timer, by state id (names a timer's transition). */
  readonly #afterEvents: Map<string, string>;
  readonly #timers: boolean;
  readonly #coalesce: boolean;
  /** Heartbeats held instead of delivered since start. */
  #coalesced = 0;
  /** Online nodes under the presence sweep. */
  #tracked = 0;
  /**
   * Whether transitions are recorded (issue 13's flight recorder). Always true in the service;
   * the ingest benchmark turns it off to measure what recording costs in the same run
   * (`scripts/bench/ingest.ts`, plan suffix `-norec`).
   */
  recording = true;
  /** The group commit's prepared statements (store factory, prepared once). */
  readonly #nodeState: NodeStateStatements;
  /** Online nodes by `floor(deadline / SWEEP_BUCKET_MS)`. */
  readonly #buckets = new Map<number, Set<Entry>>();
  #sweepTimer: unknown = undefined;
  /** When the armed sweep timer fires, ms; Infinity when none is armed. */
  #sweepAt = Number.POSITIVE_INFINITY;

  constructor(deps: RegistryDeps) {
    this.#deps = deps;
    this.#timers = deps.timersEnabled ?? true;
    this.#coalesce = deps.coalesceHeartbeats ?? true;
    this.#pace = deps.commitPaceMs ?? 0;
    this.#commitTimer = deps.commitTimer ?? REAL_TIME;
    this.#machine = nodeMachine.provide({
      actions: {
        revokeClient: ({ context }, params) => {
          this.#effects.push(() => deps.effects.revokeClient(context.configId, context.nodeId, params.reason));
        },
        requestConfigPush: ({ context }) => {
          this.#effects.push(() => deps.effects.requestConfigPush(context.configId, context.nodeId));
        },
      },
    });
    this.#nodeState = createNodeStateStatements(deps.store.sqlite);
    this.#afterEvents = afterEventsOf(this.#machine.root);
  }

  /**
   * Takes every stored node under management: restored from its persisted snapshot when the
   * machine version matches, fresh otherwise. A restored node stays dormant (its stored
   * projection answers reads, its online-TTL deadline goes under the presence sweep, no XState
   * actor exists) until its first event; an actor is created at once only where something must
   * happen now: a timer to re-arm (`system.restored` re-arms it with the time left), or a stored
   * mode or staged config that moved on while the service was down.
   * @returns number of nodes
   */
  async start(): Promise<number> {
    this.#quarantined.clear();
    const rows = this.#nodeState.nodesForActors();
    for (const row of rows) {
      try {
        this.#spawn(row, { source: "restore", route: this.#deps.currentRoute?.() ?? null });
      } catch (err) {
        this.#quarantine(row, err);
      }
    }
    await this.#flushNow();
    return rows.length - this.#quarantined.size;
  }

  /**
   * Nodes left out at the last start or reload because their stored row or machine snapshot
   * cannot be restored (one bad row never stops start-up; docs/decisions.md "Quarantine at start
   * and reload"). They have no actor: events
   * for them are dropped, REST reads answer from their columns. Repair the row (or delete the
   * node, or reset its client) and restart.
   */
  quarantined(): Array<{ configId: string; nodeId: string; reason: string }> {
    return [...this.#quarantined.values()];
  }

  /** Leaves a node out (no actor) with an error line naming it and why (docs/decisions.md "Quarantine at start and reload"). */
  #quarantine(row: NodeRowForActor, err: unknown): void {
    this.remove(row.config_id, row.node_id);
    const k = key(row.config_id, row.node_id);
    const reason = (err instanceof Error ? err.message : String(err)).slice(0, 300);
    this.#quarantined.set(k, { configId: row.config_id, nodeId: row.node_id, reason });
    this.#deps.log.error(
      { config_id: row.config_id, node_id: row.node_id, reason },
      "node quarantined: its stored state cannot be restored; it has no actor until the row is repaired",
    );
  }

  /** Creates the actor of a node that was just created. */
  async add(row: NodeRowForActor): Promise<void> {
    if (!this.#entries.has(key(row.config_id, row.node_id))) this.#spawn(row, this.#restOrigin());
    await this.#wait();
  }

  /** The node's entry, if the registry holds it. */
  #lookup(configId: string, nodeId: string): Entry | undefined {
    const last = this.#last;
    if (last !== undefined && last.nodeId === nodeId && last.configId === configId) return last;
    const entry = this.#entries.get(key(configId, nodeId));
    if (entry !== undefined) this.#last = entry;
    return entry;
  }

  /** Stops and forgets the actor of a deleted node. */
  remove(configId: string, nodeId: string): void {
    const k = key(configId, nodeId);
    const entry = this.#entries.get(k);
    if (entry) {
      entry.gone = true;
      stopActor(entry);
      this.#unbucket(entry);
      this.#dirty.delete(entry);
    }
    this.#entries.delete(k);
    this.#last = undefined;
  }

  /**
   * A node's current state value and context (issue 13 `GET .../machine`): the live actor's
   * snapshot, or the stored snapshot of a dormant node (with its newest signal). Undefined for
   * a node not under management.
   */
  machineState(configId: string, nodeId: string): { value: unknown; context: NodeContext; live: boolean } | undefined {
    const entry = this.#lookup(configId, nodeId);
    if (!entry) return undefined;
    if (entry.state.kind === "live") {
      const snap = entry.state.actor.getSnapshot();
      const pending = entry.pendingSignalAt;
      return { value: snap.value, context: pending === undefined ? snap.context : { ...snap.context, lastSignalAt: pending }, live: true };
    }
    const stored = JSON.parse(entry.state.snapshot) as PersistedNode;
    return { value: stored.value, context: { ...stored.context, lastSignalAt: entry.state.lastSignalAt }, live: false };
  }

  has(configId: string, nodeId: string): boolean {
    return this.#entries.has(key(configId, nodeId));
  }

  /** Number of nodes under management (live and dormant actors). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Counts for benchmarks and metrics: nodes under management, how many have a live XState
   * actor (the rest are dormant), online nodes whose TTL the presence sweep is timing
   * (spec §3.1), when its single timer fires next (ms since the epoch; null when none), and how
   * many heartbeats were held rather than delivered to XState since start (class doc, "Coalesced
   * heartbeats").
   */
  stats(): { nodes: number; liveActors: number; sweepTracked: number; sweepNextAt: number | null; coalescedHeartbeats: number } {
    let live = 0;
    for (const e of this.#entries.values()) if (e.state.kind === "live") live++;
    return {
      nodes: this.#entries.size,
      liveActors: live,
      sweepTracked: this.#tracked,
      sweepNextAt: Number.isFinite(this.#sweepAt) ? this.#sweepAt : null,
      coalescedHeartbeats: this.#coalesced,
    };
  }

  /** The committed-or-current projection of a node, or undefined for an unknown node. */
  projection(configId: string, nodeId: string): NodeProjection | undefined {
    const entry = this.#lookup(configId, nodeId);
    return entry ? this.#projectionOf(entry) : undefined;
  }

  /**
   * A node's current mode (its live actor's, or a dormant node's stored one), or undefined for
   * an unknown node: the MQTT router's per-message check, without building a projection.
   */
  modeOf(configId: string, nodeId: string): NodeMode | undefined {
    const entry = this.#lookup(configId, nodeId);
    if (entry === undefined) return undefined;
    return entry.state.kind === "live" ? entry.state.actor.getSnapshot().context.mode : entry.state.projection.mode;
  }

  /** Every node's current projection (for detect scheduling and metrics). */
  *projections(): Iterable<{ configId: string; nodeId: string; projection: NodeProjection }> {
    for (const e of this.#entries.values()) {
      yield { configId: e.configId, nodeId: e.nodeId, projection: this.#projectionOf(e) };
    }
  }

  /**
   * Sends an event to a node's actor (a no-op for unknown nodes).
   * @returns resolves once the resulting state is committed; rejects if that write failed
   */
  send(configId: string, nodeId: string, event: RoutedNodeEvent): Promise<void> {
    const entry = this.#lookup(configId, nodeId);
    if (!entry) return Promise.resolve();
    this.#deliver(entry, event);
    return this.#wait();
  }

  /** Sends without waiting for the commit (the MQTT router's hot path). */
  post(configId: string, nodeId: string, event: RoutedNodeEvent): boolean {
    const entry = this.#lookup(configId, nodeId);
    if (!entry) return false;
    this.#deliver(entry, event);
    return true;
  }

  /**
   * Sends `event` to the node's actor, remembered meanwhile as the cause of what it changes; a
   * heartbeat that would change nothing but the newest signal is held instead (class doc,
   * "Coalesced heartbeats"), and a held one is delivered before any other event.
   */
  #deliver(entry: Entry, event: RoutedNodeEvent): void {
    const heartbeat = this.#coalesce && event.type === "mqtt.signal" && event.source === "heartbeat" && event.clientVersion === undefined && event.requestId === undefined;
    if (heartbeat && this.#holdHeartbeat(entry, event.at, event.wgOnline)) return;
    if (entry.pendingSignalAt !== undefined) this.#deliverHeld(entry);
    const actor = this.#actorOf(entry);
    if (!heartbeat) {
      this.#sendAs(actor, event);
      return;
    }
    const before = actor.getSnapshot();
    const effects = this.#effects.length;
    const recorded = this.#recorded.length;
    this.#sendAs(actor, event);
    const after = actor.getSnapshot();
    const signalOnly =
      effects === this.#effects.length &&
      recorded === this.#recorded.length &&
      after.context.lastSignalAt === event.at &&
      presenceDeadline(after) === event.at + after.context.onlineTtlMs &&
      sameStateValue(before.value, after.value) &&
      sameContextButSignal(before.context, after.context);
    entry.signalOnly = signalOnly ? { snapshot: after, wgOnline: event.wgOnline } : undefined;
  }

  #sendAs(actor: Actor<NodeMachine>, event: RoutedNodeEvent): void {
    this.#sending = event;
    try {
      actor.send(event);
    } finally {
      this.#sending = undefined;
    }
  }

  /**
   * Holds a heartbeat whose only effect would be `lastSignalAt = at` (class doc, "Coalesced
   * heartbeats"): moves the presence deadline and queues the column write.
   * @returns false when the heartbeat must be delivered to the actor
   */
  #holdHeartbeat(entry: Entry, at: number, wgOnline: boolean | undefined): boolean {
    const learned = entry.signalOnly;
    if (learned === undefined || entry.state.kind !== "live" || learned.wgOnline !== wgOnline) return false;
    if (entry.state.actor.getSnapshot() !== learned.snapshot) return false;
    entry.pendingSignalAt = at;
    this.#coalesced++;
    this.#track(entry, at + learned.snapshot.context.onlineTtlMs);
    this.#markDirty(entry);
    return true;
  }

  /** Delivers the newest held heartbeat to the actor (before another event, or a full write). */
  #deliverHeld(entry: Entry): void {
    const at = entry.pendingSignalAt;
    const learned = entry.signalOnly;
    entry.pendingSignalAt = undefined;
    if (at === undefined || learned === undefined || entry.state.kind !== "live") return;
    const event: RoutedNodeEvent = { type: "mqtt.signal", at, source: "heartbeat" };
    if (learned.wgOnline !== undefined) event.wgOnline = learned.wgOnline;
    this.#sendAs(entry.state.actor, event);
  }

  /** The origin of something a REST request did (its route), or of a direct call (no route). */
  #restOrigin(): TransitionOrigin {
    return { source: "rest", route: this.#deps.currentRoute?.() ?? null };
  }

  /**
   * Drops every actor and rehydrates all of them from the store (after a snapshot restore
   * replaced the tables). Queued writes of the old actors are discarded: the store is the truth.
   * Every node that had a bound client before is revoked afterwards (`revokeClient`, reason
   * `reset`): its broker account and live connection go, since a restore drops broker
   * credentials and restored dynamic nodes re-bind (docs/decisions.md "Broker credentials and machine snapshots"). A node that
   * cannot be restored is quarantined, never a failure of the reload.
   * @returns number of nodes under management afterwards
   */
  async reload(): Promise<number> {
    const bound: Array<[string, string]> = [];
    for (const e of this.#entries.values()) {
      if (this.#projectionOf(e)?.clientInitialized) bound.push([e.configId, e.nodeId]);
      e.gone = true;
      stopActor(e);
    }
    this.#entries.clear();
    this.#last = undefined;
    this.#clearSweep();
    this.#dirty = new Set();
    this.#effects = [];
    this.#recorded = [];
    const count = await this.start();
    for (const [configId, nodeId] of bound) {
      try {
        this.#deps.effects.revokeClient(configId, nodeId, "reset");
      } catch (err) {
        this.#deps.log.error({ err, config_id: configId, node_id: nodeId }, "revoking a client after reload failed");
      }
    }
    return count;
  }

  /** Writes what is queued and stops every actor. */
  async stop(): Promise<void> {
    // A failed final write was already logged by #flushNow and rejected its waiters.
    await this.#flushNow().catch(() => undefined);
    this.#stopped = true;
    if (this.#retryTimer !== undefined) this.#deps.clock.clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#clearSweep();
    for (const e of this.#entries.values()) stopActor(e);
    this.#entries.clear();
    this.#last = undefined;
  }

  /**
   * Takes one stored node under management. A stored machine snapshot of this machine version
   * must pass {@link parsePersistedNode}; one that does not throws, and the caller quarantines
   * the node (a snapshot of another machine version starts fresh, as before).
   * @throws Error naming what is wrong with the stored state
   */
  #spawn(row: NodeRowForActor, origin: TransitionOrigin): void {
    let snapshot: PersistedNode | undefined;
    const ids = { configId: row.config_id, nodeId: row.node_id, mode: row.mode };
    if (row.machine_snapshot !== null && row.machine_version === NODE_MACHINE_VERSION) {
      const stored = row.machine_snapshot;
      snapshot = parsePersistedNode(this.#machine.root, stored, row);
      // A heartbeat that changed nothing else wrote only the column (see #flushNow).
      const column = row.last_signal_at ?? null;
      if (column !== null && (snapshot.context.lastSignalAt === null || column > snapshot.context.lastSignalAt)) {
        snapshot.context.lastSignalAt = column;
      }
      const ctx = snapshot.context;
      const needsEvents =
        ctx.mode !== row.mode ||
        (row.staged_config_sha256 !== null && ctx.stagedSha !== row.staged_config_sha256) ||
        (this.#timers && hasPendingTimers(snapshot.value));
      if (!needsEvents) {
        // Dormant: no XState actor until the node's first event (cold start creates ~nothing
        // per node). Its projection is the stored one; its TTL deadline goes under the sweep.
        const projection = projectNode(snapshot);
        const entry = newEntry(ids, row, { kind: "dormant", snapshot: stored, lastSignalAt: ctx.lastSignalAt, projection }, projection);
        this.#entries.set(key(row.config_id, row.node_id), entry);
        this.#last = undefined;
        this.#track(entry, presenceDeadline(snapshot));
        return;
      }
    }
    const actor = this.#createActor(ids, snapshot);
    const entry = newEntry(ids, row, { kind: "live", actor }, undefined);
    this.#entries.set(key(row.config_id, row.node_id), entry);
    this.#last = undefined;
    this.#startActor(entry, actor, snapshot, { row, origin });
  }

  /** The node's actor, created from its dormant snapshot on first use. */
  #actorOf(entry: Entry): Actor<NodeMachine> {
    if (entry.state.kind === "live") return entry.state.actor;
    const snapshot = JSON.parse(entry.state.snapshot) as PersistedNode;
    snapshot.context.lastSignalAt = entry.state.lastSignalAt;
    const actor = this.#createActor(entry, snapshot);
    entry.state = { kind: "live", actor };
    this.#startActor(entry, actor, snapshot, null);
    return actor;
  }

  /** A node's actor, restored from `snapshot` when given, not started. */
  #createActor(ids: Pick<Entry, "configId" | "nodeId" | "mode">, snapshot: PersistedNode | undefined): Actor<NodeMachine> {
    const input = {
      configId: ids.configId,
      nodeId: ids.nodeId,
      mode: ids.mode,
      onlineTtlMs: this.#deps.onlineTtlMs,
      detectTimeoutMs: this.#deps.detectTimeoutMs,
    };
    return createActor(this.#machine, {
      input,
      clock: this.#deps.clock,
      ...(snapshot === undefined ? {} : { snapshot }),
    });
  }

  /**
   * Starts a node's actor (`entry.state` already holds it). `spawn.row` (start, reload, add) brings
   * the store's mode and staged config into it when they moved on while the service was down;
   * `spawn.origin` is what a fresh actor's first flight-recorder row and those catch-up events are
   * recorded as coming from.
   */
  #startActor(
    entry: Entry,
    actor: Actor<NodeMachine>,
    snapshot: PersistedNode | undefined,
    spawn: { row: NodeRowForActor; origin: TransitionOrigin } | null,
  ): void {
    actor.start();
    const at = this.#deps.clock.now();
    // A fresh actor has no stored state yet; a restored one needs writing back only when the
    // store's mode or staged config moved on while it was down (cold start writes no row twice).
    let changed = snapshot === undefined;
    if (snapshot !== undefined) {
      const restored = actor.getSnapshot();
      entry.committed = projectNode(restored);
      entry.written = restored;
      // Re-arms `after` timers with the time left; changes nothing stored. Most nodes have none.
      if (this.#timers && hasPendingTimers(restored.value)) this.#sendRecorded(entry, actor, { type: "system.restored", at });
    }
    entry.seen = actor.getSnapshot();
    if (spawn !== null) {
      const { row, origin } = spawn;
      // A fresh actor's catch-up is part of its first row (below), not rows of its own.
      const send = (event: NodeEvent) => (snapshot === undefined ? actor.send(event) : this.#sendRecorded(entry, actor, event, origin));
      const ctx = actor.getSnapshot().context;
      if (ctx.mode !== row.mode) {
        send({ type: "node.mode_changed", at, mode: row.mode });
        changed = true;
      }
      if (row.staged_config_sha256 !== null && ctx.stagedSha !== row.staged_config_sha256) {
        send({ type: "config.staged", at, version: row.staged_config_version, sha: row.staged_config_sha256 });
        changed = true;
      }
    }
    if (snapshot === undefined && spawn !== null) {
      // A node's first state, with the store's mode and staged config in it: one row with no
      // "before" (a node created, or a fresh start after a restore).
      this.#record(entry, undefined, actor.getSnapshot(), "xstate.init", spawn.origin, at);
    }
    // From here on every snapshot change (an event, or a re-armed timer firing) is persisted.
    actor.subscribe({
      next: (snap) => {
        this.#track(entry, presenceDeadline(snap));
        this.#observe(entry, snap);
        this.#markDirty(entry);
      },
      error: (err) => this.#deps.log.error({ err, node_id: entry.nodeId }, "node actor failed"),
    });
    this.#track(entry, presenceDeadline(actor.getSnapshot()));
    if (changed) this.#markDirty(entry);
  }

  /**
   * Sends an event before the actor is subscribed (start-up catch-up) and records the transition
   * it makes, if any, as coming from `origin` (default: derived from the event).
   */
  #sendRecorded(entry: Entry, actor: Actor<NodeMachine>, event: NodeEvent, origin?: TransitionOrigin): void {
    const before = actor.getSnapshot();
    actor.send(event);
    const after = actor.getSnapshot();
    entry.seen = after;
    if (sameStateValue(before.value, after.value) && sameShownContext(before.context, after.context)) return;
    this.#record(entry, before, after, event.type, origin ?? originOf(event, this.#deps.currentRoute), event.at);
  }

  /**
   * The flight recorder's hook on every snapshot change of a started actor: compares it with the
   * one observed before and queues a row when the state value or a shown context field moved
   * (a heartbeat that changes neither costs two comparisons and records nothing). The cause is
   * the event being delivered, or, when none is, the `after` timer of a state that was left.
   */
  #observe(entry: Entry, snap: { value: unknown; context: NodeContext }): void {
    const seen = entry.seen;
    entry.seen = snap;
    if (seen === undefined) return;
    if (sameStateValue(seen.value, snap.value) && (seen.context === snap.context || sameShownContext(seen.context, snap.context))) return;
    const sending = this.#sending;
    if (sending !== undefined) {
      this.#record(entry, seen, snap, sending.type, originOf(sending, this.#deps.currentRoute), sending.at);
      return;
    }
    const left = activeStateIds(seen.value);
    const now = new Set(activeStateIds(snap.value));
    const timer = left.find((id) => this.#afterEvents.has(id) && !now.has(id));
    const event = (timer === undefined ? undefined : this.#afterEvents.get(timer)) ?? "xstate.after";
    this.#record(entry, seen, snap, event, TIMER, this.#deps.clock.now());
  }

  /** Queues one flight-recorder row for the next group commit. */
  #record(
    entry: Entry,
    before: { value: unknown; context: NodeContext } | undefined,
    after: { value: unknown; context: NodeContext },
    event: string,
    origin: TransitionOrigin,
    at: number,
  ): void {
    if (this.#stopped || !this.recording) return;
    // Consecutive rows chain (this "before" is the last row's "after"): its JSON is reused.
    const texts = this.#valueTexts;
    const lastJson = entry.lastJson;
    const valueBefore = before === undefined ? null : lastJson !== undefined && entry.lastValue === before.value ? lastJson : texts.text(before.value);
    const valueAfter = texts.text(after.value);
    entry.lastValue = after.value;
    entry.lastJson = valueAfter;
    const unchanged = before !== undefined && (before.context === after.context || sameShownContext(before.context, after.context));
    this.#recorded.push({
      entry,
      node_id: entry.nodeId,
      at,
      event,
      source: origin.source,
      request_id: origin.requestId ?? null,
      route: origin.route ?? null,
      value_before: valueBefore,
      value_after: valueAfter,
      changes: unchanged ? "{}" : JSON.stringify(shownChanges(before?.context, after.context)),
    });
  }

  /** Moves a node to the bucket of its (new) presence deadline and arms the sweep if earlier. */
  #track(entry: Entry, deadline: number | null): void {
    if (deadline === entry.deadline || this.#stopped || !this.#timers) return;
    const from = entry.deadline === null ? null : Math.floor(entry.deadline / SWEEP_BUCKET_MS);
    const to = deadline === null ? null : Math.floor(deadline / SWEEP_BUCKET_MS);
    if (entry.deadline === null) this.#tracked++;
    else if (deadline === null) this.#tracked--;
    entry.deadline = deadline;
    if (from !== to) {
      if (from !== null) this.#bucketDelete(from, entry);
      if (to !== null) {
        let bucket = this.#buckets.get(to);
        if (!bucket) this.#buckets.set(to, (bucket = new Set()));
        bucket.add(entry);
      }
    }
    if (deadline !== null && deadline < this.#sweepAt) this.#armSweep(deadline);
  }

  #unbucket(entry: Entry): void {
    if (entry.deadline === null) return;
    this.#bucketDelete(Math.floor(entry.deadline / SWEEP_BUCKET_MS), entry);
    entry.deadline = null;
    this.#tracked--;
  }

  #bucketDelete(index: number, entry: Entry): void {
    const bucket = this.#buckets.get(index);
    if (!bucket) return;
    bucket.delete(entry);
    if (bucket.size === 0) this.#buckets.delete(index);
  }

  #armSweep(at: number): void {
    if (this.#sweepTimer !== undefined) this.#deps.clock.clearTimeout(this.#sweepTimer);
    this.#sweepAt = at;
    this.#sweepTimer = this.#deps.clock.setTimeout(() => this.#sweep(), Math.max(0, at - this.#deps.clock.now()));
  }

  #clearSweep(): void {
    if (this.#sweepTimer !== undefined) this.#deps.clock.clearTimeout(this.#sweepTimer);
    this.#sweepTimer = undefined;
    this.#sweepAt = Number.POSITIVE_INFINITY;
    this.#buckets.clear();
    this.#tracked = 0;
    for (const entry of this.#entries.values()) entry.deadline = null;
  }

  /** The presence sweep: every node whose deadline has passed gets `presence.ttl_check`. */
  #sweep(): void {
    this.#sweepTimer = undefined;
    this.#sweepAt = Number.POSITIVE_INFINITY;
    if (this.#stopped) return;
    const now = this.#deps.clock.now();
    const due: Entry[] = [];
    const last = Math.floor(now / SWEEP_BUCKET_MS);
    for (const [index, bucket] of this.#buckets) {
      if (index > last) continue;
      for (const entry of bucket) if (entry.deadline !== null && entry.deadline <= now) due.push(entry);
    }
    // The machine decides; its snapshot change re-buckets the node (#track via subscribe).
    for (const entry of due) this.#deliver(entry, { type: "presence.ttl_check", at: now });
    let earliest: { index: number; bucket: Set<Entry> } | undefined;
    for (const [index, bucket] of this.#buckets) if (earliest === undefined || index < earliest.index) earliest = { index, bucket };
    if (earliest === undefined) return;
    let next = Number.POSITIVE_INFINITY;
    for (const entry of earliest.bucket) if (entry.deadline !== null && entry.deadline < next) next = entry.deadline;
    if (next < this.#sweepAt) this.#armSweep(next);
  }

  #projectionOf(entry: Entry): NodeProjection {
    if (entry.state.kind !== "live") return entry.state.projection;
    const p = projectNode(entry.state.actor.getSnapshot());
    const pending = entry.pendingSignalAt;
    return pending === undefined ? p : { ...p, lastSignalAt: pending };
  }

  #markDirty(entry: Entry): void {
    if (this.#stopped) return;
    this.#dirty.add(entry);
    // A busy poll phase (thousands of agent sockets readable at once) can keep `setImmediate`
    // from running for a long time: past the cap, flush after the current message instead (a
    // microtask, so never inside an XState notification). A cap by age made more, smaller
    // commits and measured worse latency at 5k msgs/s.
    if (this.#dirty.size >= MAX_BATCH_STATES) this.#flushSoon();
    else this.#flushLater();
  }

  #wait(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      this.#flushLater();
    });
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
    const rows = recorded.concat(this.#recorded);
    const dropped = Math.max(0, rows.length - MAX_REQUEUED_TRANSITIONS);
    if (dropped > 0) this.#deps.log.warn({ dropped }, "flight-recorder rows dropped while the store refuses writes");
    this.#recorded = dropped > 0 ? rows.slice(dropped) : rows;
    if (this.#retryTimer !== undefined) return;
    this.#retryTimer = this.#deps.clock.setTimeout(() => {
      this.#retryTimer = undefined;
      this.#flushLater();
    }, FLUSH_RETRY_MS);
  }

  /**
   * After a commit: each recording node's newest row moves to what was written, and retention
   * gets a node's cut-off once `keep` + `slack` of its rows came since the last one (marks of
   * every `slack`-th row: no chain walk to find where to cut).
   * @param appended the transitions the commit stored, in order; the i-th is in row `rowIds[i]`
   */
  #noteRecorded(heads: Map<Entry, number>, appended: readonly NewTransition[], rowIds: readonly number[]): void {
    for (const [entry, head] of heads) entry.head = head;
    const retention = this.#deps.timelineRetention;
    if (retention === undefined) return;
    const { keep, slack } = retention;
    for (let i = 0; i < appended.length; i++) {
      const entry = (appended[i] as NewTransition).entry;
      const pos = ++entry.appended;
      if (pos % slack !== 0) continue;
      const marks = entry.marks;
      marks.push({ pos, id: rowIds[i] as number });
      // The newest mark with at least `keep` rows at or above it: everything below it goes.
      let cut = -1;
      for (let m = 0; m < marks.length; m++) if (pos - (marks[m] as { pos: number }).pos + 1 >= keep) cut = m;
      if (cut < 0) continue;
      retention.prune(entry.nodeId, (marks[cut] as { id: number }).id);
      marks.splice(0, cut + 1);
    }
  }

  /**
   * Appends the queued flight-recorder rows of nodes still under management (inside the group
   * commit's transaction), each chained to its node's newest row.
   * @returns each recording node's newest row after the append (not yet stored in its state row)
   */
  #appendRecorded(recorded: NewTransition[]): StoredRows {
    // A node deleted (or reloaded) since its row was queued: the row goes with it.
    const rows = recorded.some((r) => r.entry.gone === true) ? recorded.filter((r) => r.entry.gone !== true) : recorded;
    const heads = new Map<Entry, number>();
    if (rows.length === 0) return { heads, appended: rows, rowIds: [] };
    const appended = appendNodeTransitions(this.#deps.store.sqlite, rows, (first) => first.entry.head);
    for (const [first, head] of appended.heads) heads.set(first.entry, head);
    return { heads, appended: rows, rowIds: appended.rowIds };
  }

  /** Group commit: one transaction for every queued snapshot, then notifications and effects. */
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
      this.#deliverHeld(entry);
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

  #scheduleFlush(run: () => void): void {
    const wait = this.#pace > 0 ? this.#lastFlushAt + this.#pace - this.#commitTimer.now() : 0;
    if (wait > 0) this.#commitTimer.setTimeout(run, wait);
    else setImmediate(run);
  }

  async #flushNow(): Promise<void> {
    const nodeState = this.#nodeState;
    if (nodeState.busy()) {
      // A request's transaction holds the connection: write after it, never inside it.
      this.#flushLater();
      return;
    }
    if (this.#dirty.size === 0 && this.#effects.length === 0 && this.#waiters.length === 0 && this.#recorded.length === 0) return;
    this.#lastFlushAt = this.#commitTimer.now();
    const dirty = this.#dirty;
    this.#dirty = new Set();
    const effects = this.#effects;
    this.#effects = [];
    const waiters = this.#waiters;
    this.#waiters = [];
    const recorded = this.#recorded;
    this.#recorded = [];
    const now = this.#deps.clock.now();
    const changed: Array<{ entry: Entry; projection: NodeProjection }> = [];
    // What #writeEntry believed written before this attempt: a rolled-back commit restores it.
    const writtenBefore = new Map<Entry, Entry["written"]>();
    let stored: StoredRows = { heads: new Map(), appended: [], rowIds: [] };
    try {
      nodeState.inTransaction(() => {
        // The flight recorder's rows commit with the states they lead to (persist before emit).
        if (recorded.length > 0) stored = this.#appendRecorded(recorded);
        const unwritten = new Map(stored.heads);
        for (const entry of dirty) {
          writtenBefore.set(entry, entry.written);
          const p = this.#writeEntry(entry, now, unwritten);
          if (p !== null && projectionChanged(entry.committed, p)) changed.push({ entry, projection: p });
        }
        // Nodes that recorded rows but whose state row this commit did not rewrite.
        for (const [entry, head] of unwritten) nodeState.writeHead(entry.nodeId, head);
      });
    } catch (err) {
      this.#deps.log.error({ err, nodes: dirty.size }, "persisting node state failed; retrying");
      for (const [entry, written] of writtenBefore) entry.written = written;
      // A state value first stored by the rolled-back commit is gone with it.
      forgetNodeStateValues(this.#deps.store.sqlite);
      this.#requeue(dirty, effects, recorded);
      for (const w of waiters) w.reject(err);
      throw err;
    }
    this.#noteRecorded(stored.heads, stored.appended, stored.rowIds);
    for (const { entry, projection } of changed) {
      const first = entry.committed === undefined;
      entry.committed = projection;
      if (!first) this.#deps.onStatusChanged(entry.configId, entry.nodeId, projection);
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

/** A node's registry entry as {@link NodeActorRegistry} makes it at start, reload or create. */
function newEntry(ids: Pick<Entry, "configId" | "nodeId" | "mode">, row: NodeRowForActor, state: EntryState, committed: NodeProjection | undefined): Entry {
  return { ...ids, state, committed, written: undefined, deadline: null, seen: undefined, head: row.transition_head ?? null, appended: 0, marks: [] };
}

/** Stops a node's actor, if it has one (a dormant node has none). */
function stopActor(entry: Entry): void {
  if (entry.state.kind === "live") entry.state.actor.stop();
}

function key(configId: string, nodeId: string): string {
  return `${configId}/${nodeId}`;
}

/** True when two node contexts differ in `lastSignalAt` at most. */
function sameContextButSignal(a: NodeContext, b: NodeContext): boolean {
  if (a === b) return true;
  for (const k of Object.keys(a) as Array<keyof NodeContext>) {
    if (k !== "lastSignalAt" && a[k] !== b[k]) return false;
  }
  return Object.keys(a).length === Object.keys(b).length;
}

const isString = (v: unknown) => typeof v === "string";
const isCount = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
const isPositive = (v: unknown) => Number.isSafeInteger(v) && (v as number) > 0;
const orNull = (check: (v: unknown) => boolean) => (v: unknown) => v === null || check(v);
const isSha = (v: unknown) => typeof v === "string" && /^[0-9a-f]{64}$/.test(v);

/**
 * The stored context of a node machine snapshot, field by field (src/machines/node.machine.ts
 * NodeContext); `confirmedProtocol` may be missing (older snapshots). Checked by hand rather than
 * with zod: zod measured 5.5 µs per node, +0.55 s on a 100k-node cold start (target ≤ 5 s);
 * this costs a tenth of that.
 */
const STORED_CONTEXT: Record<string, { check: (v: unknown) => boolean; optional?: true }> = {
  configId: { check: isString },
  nodeId: { check: isString },
  mode: { check: (v) => v === "static" || v === "dynamic" },
  onlineTtlMs: { check: isPositive },
  detectTimeoutMs: { check: isPositive },
  lastSignalAt: { check: orNull(isCount) },
  lastReachableAt: { check: orNull(isCount) },
  detectSentAt: { check: orNull(isCount) },
  bindTokenExpiresAt: { check: orNull(isCount) },
  stagedVersion: { check: isCount },
  stagedSha: { check: orNull(isSha) },
  confirmedVersion: { check: orNull(isCount) },
  confirmedSha: { check: orNull(isSha) },
  confirmedProtocol: { check: (v) => v === null || v === "wireguard" || v === "awg_2", optional: true },
  clientVersion: { check: orNull((v) => typeof v === "string" && v.length <= 64) },
};

/** Why `raw` is not a stored node snapshot (status, value object, context fields), or undefined. */
function storedShapeProblem(raw: unknown): string | undefined {
  if (raw === null || typeof raw !== "object") return "not an object";
  const { status, value, context } = raw as Record<string, unknown>;
  if (status !== "active") return "status must be active";
  if (value === null || typeof value !== "object" || Array.isArray(value)) return "value must be an object";
  if (context === null || typeof context !== "object" || Array.isArray(context)) return "context must be an object";
  const ctx = context as Record<string, unknown>;
  for (const k of Object.keys(ctx)) if (!(k in STORED_CONTEXT)) return `context.${k.slice(0, 40)} is not a context field`;
  for (const [k, rule] of Object.entries(STORED_CONTEXT)) {
    if (!(k in ctx)) {
      if (rule.optional) continue;
      return `context.${k} is missing`;
    }
    if (!rule.check(ctx[k])) return `context.${k} has a wrong type or value`;
  }
  return undefined;
}

/**
 * Parses a stored machine snapshot strictly (a stored row never crashes a start; docs/decisions.md
 * "Quarantine at start and reload"):
 * JSON, status `active`, a state value that names only states of the machine (every parallel
 * region, one child per compound state), a context of the right shape, and the row's own ids.
 * @throws Error naming the first problem
 */
function parsePersistedNode(root: AnyStateNode, json: string, row: NodeRowForActor): PersistedNode {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error("machine_snapshot is not JSON");
  }
  const shape = storedShapeProblem(raw);
  if (shape) throw new Error(`machine_snapshot: ${shape}`);
  const snapshot = raw as PersistedNode;
  const problem = stateValueProblem(root, snapshot.value, "value");
  if (problem) throw new Error(`machine_snapshot: ${problem}`);
  const ctx = snapshot.context;
  if (ctx.configId !== row.config_id || ctx.nodeId !== row.node_id) throw new Error("machine_snapshot belongs to another node");
  return snapshot;
}

/** Why `value` is not a state value of `node` (a parallel or compound state), or undefined. */
function stateValueProblem(node: AnyStateNode, value: unknown, path: string): string | undefined {
  const children = node.states as Record<string, AnyStateNode>;
  if (node.type === "parallel") {
    if (value === null || typeof value !== "object") return `${path} must be an object of regions`;
    const keys = Object.keys(value);
    const expected = Object.keys(children);
    if (keys.length !== expected.length || !expected.every((k) => keys.includes(k))) {
      return `${path} must hold exactly the regions ${expected.join(", ")}`;
    }
    for (const [k, child] of Object.entries(children)) {
      const p = stateValueProblem(child, (value as Record<string, unknown>)[k], `${path}.${k}`);
      if (p) return p;
    }
    return undefined;
  }
  if (typeof value === "string") {
    const child = children[value];
    if (!child) return `${path}: ${JSON.stringify(value.slice(0, 40))} is not a state`;
    return child.type === "atomic" || child.type === "final" ? undefined : `${path}.${value} needs its child state`;
  }
  const named = value !== null && typeof value === "object" ? Object.entries(value) : [];
  const [only] = named;
  if (named.length !== 1 || only === undefined) return `${path} must name one state`;
  const [name, inner] = only;
  const child = children[name];
  if (!child || child.type === "atomic" || child.type === "final") return `${path}: ${JSON.stringify(name.slice(0, 40))} is not a compound state`;
  return stateValueProblem(child, inner, `${path}.${name}`);
}
