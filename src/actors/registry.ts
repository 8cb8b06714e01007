import { backgroundTurn } from "../lib/background-turn.js";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { NodeMode } from "../protocol/enums.js";
import { nodeMachine, type NodeContext } from "../machines/node.machine.js";
import type { Store } from "../store/db.js";
import type { NodeActorRow } from "../store/node-client-state.repository.js";
import { GroupCommit, type CommitTimer, type InCommitHook } from "./group-commit.js";
import { HeartbeatCoalescer } from "./heartbeat-coalescer.js";
import { NodeEntries, nodeKey, stopActor, type Entry, type PersistedNode } from "./node-entries.js";
import { PresenceSweep } from "./presence-sweep.js";
import { projectNode, type NodeProjection } from "./projection.js";
import { Quarantine, type QuarantinedNode } from "./quarantine.js";
import { RecorderSink } from "./recorder-sink.js";
import { afterEventsOf, type RoutedNodeEvent, type TransitionOrigin } from "./recorder.js";
import { Rehydrator } from "./rehydration.js";

export type { CommitTimer, CommittedChange, InCommitHook } from "./group-commit.js";

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
   * Called inside the group commit's transaction with the projections it changes (the alert
   * rules write their alerts there: persist before emit); answers what to run after the commit.
   */
  inCommit?: InCommitHook;
  /**
   * The REST route being served (`METHOD /pattern`), read when an event sent while serving it
   * makes a flight-recorder row (its source `rest`); undefined outside a request.
   */
  currentRoute?: () => string | undefined;
  /**
   * The flight recorder's retention (the newest N rows per node are kept): once a node has
   * appended `keep` + `slack` rows since the last cut (or since start), `prune` gets the id of a
   * row with at least `keep` of its rows at or above it, all appended since start, so that
   * retention deletes what is below without walking the chain to find it. Rows stored before
   * start are cut with the first such call, or by retention's own sweeps. Absent: nothing is cut
   * from here.
   */
  timelineRetention?: { keep: number; slack: number; prune(nodeId: string, cutoff: number): void };
  /**
   * Coalesce heartbeats that change nothing but the newest signal (heartbeat-coalescer.ts).
   * Default true; false delivers every heartbeat to its actor (the reference the property test
   * compares against).
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

/**
 * The actor system: one XState actor per node, keyed by `config_id/node_id` (design card). This
 * class is the directory and the front door; each job is a part of its own:
 *
 * - {@link GroupCommit} (group-commit.ts): persist before emit. Every snapshot change is queued
 *   and written with the others in one SQLite transaction; status notifications, machine effects
 *   and {@link send}'s promise come only after the commit.
 * - {@link Rehydrator} (rehydration.ts) takes stored nodes under management at start, reload and
 *   create; a restored node stays dormant (no XState actor, its stored projection answers reads)
 *   until its first event. {@link Quarantine} (quarantine.ts) keeps the nodes whose stored state
 *   fails the check of stored-snapshot.ts.
 * - {@link PresenceSweep} (presence-sweep.ts): the online TTL of every node under one timer
 *   (spec §3.1).
 * - {@link HeartbeatCoalescer} (heartbeat-coalescer.ts): runs of heartbeats that change nothing
 *   but the newest signal skip XState.
 * - {@link RecorderSink} (recorder-sink.ts): the flight recorder's rows (`node_transitions`),
 *   committed with the states they lead to, and the retention cut-off hand-off.
 *
 * The hot path: the router's {@link post} → {@link NodeEntries.lookup} → the coalescer holds the
 * heartbeat or the actor takes the event → its subscription tracks the deadline, records the
 * transition and marks the entry dirty → the next group commit writes it and notifies.
 */
export class NodeActorRegistry {
  readonly #deps: RegistryDeps;
  readonly #entries = new NodeEntries();
  readonly #quarantine: Quarantine;
  readonly #recorder: RecorderSink;
  readonly #sweep: PresenceSweep<Entry>;
  readonly #coalescer: HeartbeatCoalescer;
  readonly #commit: GroupCommit;
  readonly #rehydrator: Rehydrator;
  /** Counts passes of {@link outageEnded}: a newer one ends an older one still running. */
  #outagePasses = 0;

  constructor(deps: RegistryDeps) {
    this.#deps = deps;
    const timersEnabled = deps.timersEnabled ?? true;
    // The effects run after the commit of the state that asked for them (GroupCommit).
    const machine = nodeMachine.provide({
      actions: {
        revokeClient: ({ context }, params) => {
          this.#commit.queueEffect(() => deps.effects.revokeClient(context.configId, context.nodeId, params.reason));
        },
        requestConfigPush: ({ context }) => {
          this.#commit.queueEffect(() => deps.effects.requestConfigPush(context.configId, context.nodeId));
        },
      },
    });
    const { store, clock, log } = deps;
    this.#quarantine = new Quarantine(log);
    this.#recorder = new RecorderSink({
      store,
      clock,
      log,
      afterEvents: afterEventsOf(machine.root),
      ...(deps.currentRoute === undefined ? {} : { currentRoute: deps.currentRoute }),
      ...(deps.timelineRetention === undefined ? {} : { timelineRetention: deps.timelineRetention }),
    });
    this.#sweep = new PresenceSweep<Entry>({ clock, enabled: timersEnabled, onDue: (entry, now) => this.#deliver(entry, { type: "presence.ttl_check", at: now }) });
    this.#coalescer = new HeartbeatCoalescer({ enabled: deps.coalesceHeartbeats ?? true, sweep: this.#sweep, recorder: this.#recorder });
    this.#commit = new GroupCommit({
      store,
      clock,
      log,
      ...(deps.commitPaceMs === undefined ? {} : { commitPaceMs: deps.commitPaceMs }),
      ...(deps.commitTimer === undefined ? {} : { commitTimer: deps.commitTimer }),
      recorder: this.#recorder,
      coalescer: this.#coalescer,
      listener: deps,
      ...(deps.inCommit === undefined ? {} : { inCommit: deps.inCommit }),
    });
    const { onlineTtlMs, detectTimeoutMs } = deps;
    this.#rehydrator = new Rehydrator({
      machine,
      clock,
      log,
      onlineTtlMs,
      detectTimeoutMs,
      timersEnabled,
      entries: this.#entries,
      recorder: this.#recorder,
      sweep: this.#sweep,
      commit: this.#commit,
    });
  }

  /**
   * Whether transitions are recorded (the flight recorder). Always true in the service; the
   * ingest benchmark turns it off to measure what recording costs in the same run
   * (`scripts/bench/ingest.ts`, plan suffix `-norec`).
   */
  get recording(): boolean {
    return this.#recorder.recording;
  }

  set recording(on: boolean) {
    this.#recorder.recording = on;
  }

  /**
   * Takes every stored node under management (rehydration.ts): restored from its persisted
   * snapshot when the machine version matches, fresh otherwise; a node whose stored state cannot
   * be restored is quarantined, never a failure of the start.
   * @returns number of nodes under management
   */
  async start(): Promise<number> {
    this.#quarantine.clear();
    const rows = this.#commit.storedNodes();
    const origin: TransitionOrigin = { source: "restore", route: this.#deps.currentRoute?.() ?? null };
    for (const row of rows) {
      try {
        this.#rehydrator.spawn(row, origin);
      } catch (err) {
        this.remove(row.config_id, row.node_id);
        this.#quarantine.add(row, err);
      }
    }
    await this.#commit.flushNow();
    return rows.length - this.#quarantine.size;
  }

  /**
   * Nodes left out at the last start or reload because their stored row or machine snapshot
   * cannot be restored (quarantine.ts). They have no actor: events for them are dropped, REST
   * reads answer from their columns. Repair the row (or delete the node, or reset its client) and restart.
   */
  quarantined(): QuarantinedNode[] {
    return this.#quarantine.list();
  }

  /** Creates the actor of a node that was just created. */
  async add(row: NodeActorRow): Promise<void> {
    if (!this.#entries.has(row.config_id, row.node_id)) this.#rehydrator.spawn(row, this.#restOrigin());
    await this.#commit.wait();
  }

  /** Stops and forgets the actor of a deleted node. */
  remove(configId: string, nodeId: string): void {
    const k = nodeKey(configId, nodeId);
    const entry = this.#entries.get(k);
    if (entry) {
      entry.gone = true;
      stopActor(entry);
      this.#sweep.untrack(entry);
      this.#commit.forget(entry);
    }
    this.#entries.delete(k);
  }

  /**
   * A node's current state value and context (`GET .../machine`): the live actor's snapshot, or
   * the stored snapshot of a dormant node (with its newest signal). Undefined for a node not under management.
   */
  machineState(configId: string, nodeId: string): { value: unknown; context: NodeContext; live: boolean } | undefined {
    const entry = this.#entries.lookup(configId, nodeId);
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
    return this.#entries.has(configId, nodeId);
  }

  /** Number of nodes under management (live and dormant actors). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Counts for benchmarks and metrics: nodes under management, how many have a live XState
   * actor (the rest are dormant), online nodes whose TTL the presence sweep is timing
   * (spec §3.1), when its single timer fires next (ms since the epoch; null when none), and how
   * many heartbeats were held rather than delivered to XState since start (heartbeat-coalescer.ts).
   */
  stats(): { nodes: number; liveActors: number; sweepTracked: number; sweepNextAt: number | null; coalescedHeartbeats: number } {
    let live = 0;
    for (const e of this.#entries.values()) if (e.state.kind === "live") live++;
    return {
      nodes: this.#entries.size,
      liveActors: live,
      sweepTracked: this.#sweep.tracked,
      sweepNextAt: this.#sweep.nextAt,
      coalescedHeartbeats: this.#coalescer.held,
    };
  }

  /** The committed-or-current projection of a node, or undefined for an unknown node. */
  projection(configId: string, nodeId: string): NodeProjection | undefined {
    const entry = this.#entries.lookup(configId, nodeId);
    return entry ? projectionOf(entry) : undefined;
  }

  /**
   * A node's current mode (its live actor's, or a dormant node's stored one), or undefined for
   * an unknown node: the MQTT router's per-message check, without building a projection.
   */
  modeOf(configId: string, nodeId: string): NodeMode | undefined {
    const entry = this.#entries.lookup(configId, nodeId);
    if (entry === undefined) return undefined;
    return entry.state.kind === "live" ? entry.state.actor.getSnapshot().context.mode : entry.state.projection.mode;
  }

  /** Every node's current projection (for detect scheduling and metrics). */
  *projections(): Iterable<{ configId: string; nodeId: string; projection: NodeProjection }> {
    for (const e of this.#entries.values()) {
      yield { configId: e.configId, nodeId: e.nodeId, projection: projectionOf(e) };
    }
  }

  /**
   * Sends an event to a node's actor (a no-op for unknown nodes).
   * @returns resolves once the resulting state is committed; rejects if that write failed
   */
  send(configId: string, nodeId: string, event: RoutedNodeEvent): Promise<void> {
    const entry = this.#entries.lookup(configId, nodeId);
    if (!entry) return Promise.resolve();
    this.#deliver(entry, event);
    return this.#commit.wait();
  }

  /** Sends without waiting for the commit (the MQTT router's hot path). */
  post(configId: string, nodeId: string, event: RoutedNodeEvent): boolean {
    const entry = this.#entries.lookup(configId, nodeId);
    if (!entry) return false;
    this.#deliver(entry, event);
    return true;
  }

  /**
   * Sends `event` to the node's actor, remembered meanwhile as the cause of what it changes; a
   * heartbeat that would change nothing but the newest signal is held instead
   * (heartbeat-coalescer.ts), and a held one is delivered before any other event.
   */
  #deliver(entry: Entry, event: RoutedNodeEvent): void {
    const coalescer = this.#coalescer;
    const commit = this.#commit;
    const heartbeat = coalescer.coalesces(event);
    if (heartbeat && coalescer.hold(entry, event.at, event.wgOnline)) {
      commit.markDirty(entry);
      return;
    }
    if (entry.pendingSignalAt !== undefined) coalescer.deliverHeld(entry);
    const actor = this.#rehydrator.actorOf(entry);
    const recorder = this.#recorder;
    if (!heartbeat) {
      recorder.sendAs(actor, event);
      return;
    }
    const before = actor.getSnapshot();
    const effects = commit.queuedEffects;
    const recorded = recorder.queued;
    recorder.sendAs(actor, event);
    const quiet = effects === commit.queuedEffects && recorded === recorder.queued;
    coalescer.learn(entry, event, before, actor.getSnapshot(), quiet);
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
   * credentials and restored dynamic nodes re-bind (docs/history/decisions-2026.md "Broker credentials and
   * machine snapshots"). A node that cannot be restored is quarantined, never a failure of the reload.
   * @returns number of nodes under management afterwards
   */
  async reload(): Promise<number> {
    const bound: Array<[string, string]> = [];
    for (const e of this.#entries.values()) {
      if (projectionOf(e)?.clientInitialized) bound.push([e.configId, e.nodeId]);
      e.gone = true;
      stopActor(e);
    }
    this.#entries.clear();
    this.#sweep.clear();
    this.#commit.discard();
    this.#recorder.discard();
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

  /**
   * The backend's broker link, down since `since` (ms), came back at `returnedAt` (spec §3.1):
   * what nodes sent meanwhile may not have been heard (a broker that kept the backend's session
   * delivers what it queued, stamped when it arrives), so every node online with no signal since
   * `since` gets `presence.outage_ended` and its machine treats it as having an outstanding detect
   * sent at `returnedAt`: the agent's reconnect (`mqtt_connected`) or any signal answers it,
   * silence drops the node at `returnedAt + detectTimeoutMs`. Nodes are visited about 5 ms of a turn at a time (a fleet
   * of dormant nodes is woken without holding ingest); a newer pass ends an older one still
   * running. A no-op while time moves nothing (`timersEnabled` false).
   * @returns the number of nodes that were sent the event, once every node was visited
   */
  async outageEnded(since: number, returnedAt: number): Promise<number> {
    if (this.#deps.timersEnabled === false) return 0;
    const pass = ++this.#outagePasses;
    const targets = [...this.#entries.values()];
    let sent = 0;
    let i = 0;
    while (i < targets.length) {
      const sliceEnd = performance.now() + 5;
      while (i < targets.length && performance.now() < sliceEnd) {
        const entry = targets[i++];
        // Gone meanwhile: deleted, or the registry stopped or reloaded.
        if (entry === undefined || entry.gone === true || !this.#entries.has(entry.configId, entry.nodeId)) continue;
        const p = projectionOf(entry);
        if (p.presence !== "online" || (p.lastSignalAt !== null && p.lastSignalAt >= since)) continue;
        this.#deliver(entry, { type: "presence.outage_ended", at: this.#deps.clock.now(), since, returnedAt });
        sent++;
      }
      if (i < targets.length) await backgroundTurn();
      if (pass !== this.#outagePasses) break;
    }
    return sent;
  }

  /** Writes what is queued and stops every actor. */
  async stop(): Promise<void> {
    // A failed final write was already logged by GroupCommit.flushNow and rejected its waiters.
    await this.#commit.flushNow().catch(() => undefined);
    this.#commit.stop();
    this.#recorder.stop();
    this.#sweep.stop();
    for (const e of this.#entries.values()) stopActor(e);
    this.#entries.clear();
  }
}

/** A node's current projection: the live actor's (with a held heartbeat's time), or a dormant node's stored one. */
function projectionOf(entry: Entry): NodeProjection {
  if (entry.state.kind !== "live") return entry.state.projection;
  const p = projectNode(entry.state.actor.getSnapshot());
  const pending = entry.pendingSignalAt;
  return pending === undefined ? p : { ...p, lastSignalAt: pending };
}
