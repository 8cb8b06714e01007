import type { Actor } from "xstate";
import type { NodeContext, NodeMachine } from "../machines/node.machine.js";
import type { NodeMode } from "../protocol/enums.js";
import type { NodeActorRow } from "../store/node-client-state.repository.js";
import type { NodeProjection } from "./projection.js";

/**
 * A persisted node snapshot as stored (`getPersistedSnapshot()` JSON), status checked `active`
 * by `parsePersistedNode` (stored-snapshot.ts): what XState's `createActor(..., { snapshot })`
 * restores from.
 */
export interface PersistedNode {
  status: "active";
  output: undefined;
  error: undefined;
  value: unknown;
  context: NodeContext;
}

/** A live node actor's snapshot (`getSnapshot()`). */
export type NodeActorSnapshot = ReturnType<Actor<NodeMachine>["getSnapshot"]>;

/**
 * A node's actor, or, for a restored node that has had no event yet, its stored snapshot JSON,
 * newest signal time and stored projection. The actor of a dormant node is created on its
 * first event (`Rehydrator.actorOf`).
 */
export type EntryState =
  | { kind: "live"; actor: Actor<NodeMachine> }
  | { kind: "dormant"; snapshot: string; lastSignalAt: number | null; projection: NodeProjection };

/**
 * One node under management. The parts of the registry each keep their own fields here (one
 * object per node, no per-part map to look up on the hot path): the group commit `committed` and
 * `written`, the presence sweep `deadline`, the recorder sink `seen` to `marks`, the heartbeat
 * coalescer `signalOnly` and `pendingSignalAt`.
 */
export interface Entry {
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
   * `snapshot`, a heartbeat carrying `wgOnline` only sets `lastSignalAt` (heartbeat-coalescer.ts).
   */
  signalOnly?: { snapshot: NodeActorSnapshot; wgOnline: boolean | undefined };
  /** `at` of the newest coalesced heartbeat not yet delivered to the actor, ms; undefined when none. */
  pendingSignalAt?: number;
}

/** The ids and stored mode a node's entry and its actor's input are made from. */
export type EntryIds = Pick<Entry, "configId" | "nodeId" | "mode">;

/** A node's entry as the registry makes it at start, reload or create. */
export function newEntry(ids: EntryIds, row: NodeActorRow, state: EntryState, committed: NodeProjection | undefined): Entry {
  return { ...ids, state, committed, written: undefined, deadline: null, seen: undefined, head: row.transition_head ?? null, appended: 0, marks: [] };
}

/** Stops a node's actor, if it has one (a dormant node has none). */
export function stopActor(entry: Entry): void {
  if (entry.state.kind === "live") entry.state.actor.stop();
}

/** The key of a node under management: `config_id/node_id` (design card). */
export function nodeKey(configId: string, nodeId: string): string {
  return `${configId}/${nodeId}`;
}

/**
 * The nodes under management, keyed by `config_id/node_id`. The MQTT router asks for one node
 * twice per message (its mode, then the event), so {@link lookup} keeps the entry it found last
 * and the second call builds no key string; every change of the map forgets it.
 */
export class NodeEntries {
  readonly #byKey = new Map<string, Entry>();
  #last: Entry | undefined;

  /** The node's entry, if it is under management (the hot path: the last one found is kept). */
  lookup(configId: string, nodeId: string): Entry | undefined {
    const last = this.#last;
    if (last !== undefined && last.nodeId === nodeId && last.configId === configId) return last;
    const entry = this.#byKey.get(nodeKey(configId, nodeId));
    if (entry !== undefined) this.#last = entry;
    return entry;
  }

  /** The entry under `key` ({@link nodeKey}), without touching the kept lookup. */
  get(key: string): Entry | undefined {
    return this.#byKey.get(key);
  }

  has(configId: string, nodeId: string): boolean {
    return this.#byKey.has(nodeKey(configId, nodeId));
  }

  /** Puts the node under management (replacing an entry with its ids). */
  set(entry: Entry): void {
    this.#byKey.set(nodeKey(entry.configId, entry.nodeId), entry);
    this.#last = undefined;
  }

  /** Forgets the entry under `key` ({@link nodeKey}). */
  delete(key: string): void {
    this.#byKey.delete(key);
    this.#last = undefined;
  }

  clear(): void {
    this.#byKey.clear();
    this.#last = undefined;
  }

  values(): IterableIterator<Entry> {
    return this.#byKey.values();
  }

  get size(): number {
    return this.#byKey.size;
  }
}
