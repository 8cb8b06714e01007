import { createActor, type Actor } from "xstate";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import { hasPendingTimers, NODE_MACHINE_VERSION, presenceDeadline, type NodeEvent, type NodeMachine } from "../machines/node.machine.js";
import type { NodeActorRow } from "../store/node-client-state.repository.js";
import type { GroupCommit } from "./group-commit.js";
import { newEntry, type Entry, type EntryIds, type NodeEntries, type PersistedNode } from "./node-entries.js";
import type { PresenceSweep } from "./presence-sweep.js";
import { projectNode } from "./projection.js";
import type { RecorderSink } from "./recorder-sink.js";
import type { TransitionOrigin } from "./recorder.js";
import { parsePersistedNode } from "./stored-snapshot.js";

export interface RehydratorDeps {
  /** The node machine with the registry's effects provided. */
  machine: NodeMachine;
  clock: Clock;
  log: Logger;
  onlineTtlMs: number;
  detectTimeoutMs: number;
  /** `RegistryDeps.timersEnabled`: whether restored timers are re-armed. */
  timersEnabled: boolean;
  /** Where a node goes under management. */
  entries: NodeEntries;
  recorder: Pick<RecorderSink, "observe" | "record" | "sendRecorded">;
  sweep: Pick<PresenceSweep<Entry>, "track">;
  commit: Pick<GroupCommit, "markDirty">;
}

/** What a node's spawn brings into a new actor: its stored row, and what the catch-up is recorded as coming from. */
interface Spawn {
  row: NodeActorRow;
  origin: TransitionOrigin;
}

/**
 * Rehydration (DESIGN §2 actors; docs/history/decisions-2026.md "Quarantine at start and reload"): takes a
 * stored node under management. A snapshot of this machine version is restored when it passes
 * `parsePersistedNode` (one that does not throws, and the caller quarantines the node); one of
 * another version, or none, starts a fresh actor. A restored node stays dormant (its stored
 * projection answers reads, its online-TTL deadline goes under the presence sweep, no XState
 * actor exists) until its first event ({@link actorOf}); an actor is created at once only where
 * something must happen now: a timer to re-arm (`system.restored` re-arms it with the time
 * left), or a stored mode or staged config that moved on while the service was down. From its
 * start on, every snapshot change of an actor goes to the sweep, the recorder and the group commit.
 */
export class Rehydrator {
  readonly #deps: RehydratorDeps;
  readonly #timers: boolean;

  constructor(deps: RehydratorDeps) {
    this.#deps = deps;
    this.#timers = deps.timersEnabled;
  }

  /**
   * Takes one stored node under management (start, reload, or a node just created).
   * @throws Error naming what is wrong with the stored state (the node is then left out)
   */
  spawn(row: NodeActorRow, origin: TransitionOrigin): void {
    let snapshot: PersistedNode | undefined;
    const ids = { configId: row.config_id, nodeId: row.node_id, mode: row.mode };
    if (row.machine_snapshot !== null && row.machine_version === NODE_MACHINE_VERSION) {
      const stored = row.machine_snapshot;
      snapshot = parsePersistedNode(this.#deps.machine.root, stored, row);
      // A heartbeat that changed nothing else wrote only the column (GroupCommit, signal-only write).
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
        this.#deps.entries.set(entry);
        this.#deps.sweep.track(entry, presenceDeadline(snapshot));
        return;
      }
    }
    const actor = this.#createActor(ids, snapshot);
    const entry = newEntry(ids, row, { kind: "live", actor }, undefined);
    this.#deps.entries.set(entry);
    this.#startActor(entry, actor, snapshot, { row, origin });
  }

  /** The node's actor, created from its dormant snapshot on first use. */
  actorOf(entry: Entry): Actor<NodeMachine> {
    if (entry.state.kind === "live") return entry.state.actor;
    const snapshot = JSON.parse(entry.state.snapshot) as PersistedNode;
    snapshot.context.lastSignalAt = entry.state.lastSignalAt;
    const actor = this.#createActor(entry, snapshot);
    entry.state = { kind: "live", actor };
    this.#startActor(entry, actor, snapshot, null);
    return actor;
  }

  /** A node's actor, restored from `snapshot` when given, not started. */
  #createActor(ids: EntryIds, snapshot: PersistedNode | undefined): Actor<NodeMachine> {
    const input = {
      configId: ids.configId,
      nodeId: ids.nodeId,
      mode: ids.mode,
      onlineTtlMs: this.#deps.onlineTtlMs,
      detectTimeoutMs: this.#deps.detectTimeoutMs,
    };
    return createActor(this.#deps.machine, {
      input,
      clock: this.#deps.clock,
      ...(snapshot === undefined ? {} : { snapshot }),
    });
  }

  /**
   * Starts a node's actor (`entry.state` already holds it), brings it up to date with its stored
   * row ({@link #catchUp}) and subscribes the registry's parts to its snapshot changes.
   */
  #startActor(entry: Entry, actor: Actor<NodeMachine>, snapshot: PersistedNode | undefined, spawn: Spawn | null): void {
    actor.start();
    const at = this.#deps.clock.now();
    const recorder = this.#deps.recorder;
    if (snapshot !== undefined) {
      const restored = actor.getSnapshot();
      entry.committed = projectNode(restored);
      entry.written = restored;
      // Re-arms `after` timers with the time left; changes nothing stored. Most nodes have none.
      if (this.#timers && hasPendingTimers(restored.value)) recorder.sendRecorded(entry, actor, { type: "system.restored", at });
    }
    entry.seen = actor.getSnapshot();
    // A fresh actor has no stored state yet; a restored one needs writing back only when the
    // store's mode or staged config moved on while it was down (cold start writes no row twice).
    const changed = (spawn !== null && this.#catchUp(entry, actor, snapshot, spawn, at)) || snapshot === undefined;
    if (snapshot === undefined && spawn !== null) {
      // A node's first state, with the store's mode and staged config in it: one row with no
      // "before" (a node created, or a fresh start after a restore).
      recorder.record(entry, undefined, actor.getSnapshot(), "xstate.init", spawn.origin, at);
    }
    // From here on every snapshot change (an event, or a re-armed timer firing) is persisted.
    const { sweep, commit } = this.#deps;
    actor.subscribe({
      next: (snap) => {
        sweep.track(entry, presenceDeadline(snap));
        recorder.observe(entry, snap);
        commit.markDirty(entry);
      },
      error: (err) => this.#deps.log.error({ err, node_id: entry.nodeId }, "node actor failed"),
    });
    sweep.track(entry, presenceDeadline(actor.getSnapshot()));
    if (changed) commit.markDirty(entry);
  }

  /**
   * Brings the store's mode and staged config into the actor when they moved on while the
   * service was down (or, for a fresh actor, differ from its input). A restored actor records each
   * catch-up transition as coming from `spawn.origin`; a fresh actor's catch-up is part of its
   * first row, not rows of its own.
   * @returns true when an event was sent
   */
  #catchUp(entry: Entry, actor: Actor<NodeMachine>, snapshot: PersistedNode | undefined, spawn: Spawn, at: number): boolean {
    const { row, origin } = spawn;
    const recorder = this.#deps.recorder;
    const send = (event: NodeEvent) => (snapshot === undefined ? actor.send(event) : recorder.sendRecorded(entry, actor, event, origin));
    const ctx = actor.getSnapshot().context;
    let sent = false;
    if (ctx.mode !== row.mode) {
      send({ type: "node.mode_changed", at, mode: row.mode });
      sent = true;
    }
    if (row.staged_config_sha256 !== null && ctx.stagedSha !== row.staged_config_sha256) {
      send({ type: "config.staged", at, version: row.staged_config_version, sha: row.staged_config_sha256 });
      sent = true;
    }
    return sent;
  }
}
