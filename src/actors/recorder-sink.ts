import type { Actor } from "xstate";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { NodeContext, NodeEvent, NodeMachine } from "../machines/node.machine.js";
import type { Store } from "../store/db.js";
import { appendNodeTransitions, forgetNodeStateValues, type NewNodeTransition } from "../store/node-transitions.repository.js";
import type { Entry } from "./node-entries.js";
import {
  activeStateIds,
  originOf,
  sameShownContext,
  sameStateValue,
  shownChanges,
  StateValueTexts,
  TIMER,
  type RoutedNodeEvent,
  type TransitionOrigin,
} from "./recorder.js";

/**
 * Flight-recorder rows kept queued across failed commits at most; past it the oldest are dropped
 * (and counted in the log): a long storage outage must not grow memory without bound.
 */
export const MAX_REQUEUED_TRANSITIONS = 50_000;

/** A flight-recorder row waiting for the group commit, with the entry of the node it belongs to. */
export type NewTransition = NewNodeTransition & { entry: Entry };

/**
 * What a group commit appended to the flight recorder: each node's new newest row (to store with
 * its state), the transitions in order, and the id of the row that holds each.
 */
export interface StoredRows {
  heads: Map<Entry, number>;
  appended: NewTransition[];
  rowIds: number[];
}

/** The flight recorder's retention (`RegistryDeps.timelineRetention`). */
export interface TimelineRetention {
  keep: number;
  slack: number;
  prune(nodeId: string, cutoff: number): void;
}

export interface RecorderSinkDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** `after` event type of each state with a timer, by state id (`afterEventsOf(machine.root)`): names a timer's transition. */
  afterEvents: Map<string, string>;
  /** The REST route being served (`RegistryDeps.currentRoute`). */
  currentRoute?: () => string | undefined;
  timelineRetention?: TimelineRetention;
}

/**
 * The flight recorder's sink (`node_transitions`, docs/decisions.md, flight recorder): it watches
 * every snapshot change of a started actor, queues a row when the state value or a shown context
 * field moved, with its cause (the event being delivered through {@link sendAs}, or the `after`
 * timer of a state that was left), and hands the queue to the group commit, which appends it in
 * the transaction that writes the states the rows lead to (persist before emit). After the
 * commit it moves each node's newest row and hands retention a node's cut-off once `keep` +
 * `slack` of its rows came since the last one.
 */
export class RecorderSink {
  readonly #deps: RecorderSinkDeps;
  /** Rows waiting for the group commit. */
  #recorded: NewTransition[] = [];
  /** The recorded state values' JSON, interned (one string instance per distinct value). */
  readonly #valueTexts = new StateValueTexts();
  /** The event being delivered to an actor by {@link sendAs}; undefined while a timer fires. */
  #sending: RoutedNodeEvent | undefined = undefined;
  #stopped = false;
  /**
   * Whether transitions are recorded. Always true in the service; the ingest benchmark turns it
   * off to measure what recording costs in the same run (`scripts/bench/ingest.ts`, plan suffix `-norec`).
   */
  recording = true;

  constructor(deps: RecorderSinkDeps) {
    this.#deps = deps;
  }

  /** Rows queued for the next group commit. */
  get queued(): number {
    return this.#recorded.length;
  }

  /** Sends `event` to a started actor, remembered meanwhile as the cause of the rows its change makes. */
  sendAs(actor: Actor<NodeMachine>, event: RoutedNodeEvent): void {
    this.#sending = event;
    try {
      actor.send(event);
    } finally {
      this.#sending = undefined;
    }
  }

  /**
   * Sends an event before the actor is subscribed (start-up catch-up) and records the transition
   * it makes, if any, as coming from `origin` (default: derived from the event).
   */
  sendRecorded(entry: Entry, actor: Actor<NodeMachine>, event: NodeEvent, origin?: TransitionOrigin): void {
    const before = actor.getSnapshot();
    actor.send(event);
    const after = actor.getSnapshot();
    entry.seen = after;
    if (sameStateValue(before.value, after.value) && sameShownContext(before.context, after.context)) return;
    this.record(entry, before, after, event.type, origin ?? originOf(event, this.#deps.currentRoute), event.at);
  }

  /**
   * The hook on every snapshot change of a started actor: compares it with the one observed
   * before and queues a row when the state value or a shown context field moved (a heartbeat that
   * changes neither costs two comparisons and records nothing).
   */
  observe(entry: Entry, snap: { value: unknown; context: NodeContext }): void {
    const seen = entry.seen;
    entry.seen = snap;
    if (seen === undefined) return;
    if (sameStateValue(seen.value, snap.value) && (seen.context === snap.context || sameShownContext(seen.context, snap.context))) return;
    const sending = this.#sending;
    if (sending !== undefined) {
      this.record(entry, seen, snap, sending.type, originOf(sending, this.#deps.currentRoute), sending.at);
      return;
    }
    const afterEvents = this.#deps.afterEvents;
    const left = activeStateIds(seen.value);
    const now = new Set(activeStateIds(snap.value));
    const timer = left.find((id) => afterEvents.has(id) && !now.has(id));
    const event = (timer === undefined ? undefined : afterEvents.get(timer)) ?? "xstate.after";
    this.record(entry, seen, snap, event, TIMER, this.#deps.clock.now());
  }

  /** Queues one row for the next group commit (`before` undefined: the node's first state). */
  record(
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

  /** Takes the queued rows for a group commit (the queue starts empty again). */
  take(): NewTransition[] {
    const recorded = this.#recorded;
    this.#recorded = [];
    return recorded;
  }

  /**
   * Appends taken rows of nodes still under management (inside the group commit's transaction),
   * each chained to its node's newest row.
   * @returns each recording node's newest row after the append (not yet stored in its state row)
   */
  append(recorded: NewTransition[]): StoredRows {
    // A node deleted (or reloaded) since its row was queued: the row goes with it.
    const rows = recorded.some((r) => r.entry.gone === true) ? recorded.filter((r) => r.entry.gone !== true) : recorded;
    const heads = new Map<Entry, number>();
    if (rows.length === 0) return { heads, appended: rows, rowIds: [] };
    const appended = appendNodeTransitions(this.#deps.store, rows, (first) => first.entry.head);
    for (const [first, head] of appended.heads) heads.set(first.entry, head);
    return { heads, appended: rows, rowIds: appended.rowIds };
  }

  /**
   * After the commit: each recording node's newest row moves to what was written, and retention
   * gets a node's cut-off once `keep` + `slack` of its rows came since the last one (marks of
   * every `slack`-th row: no chain walk to find where to cut).
   */
  committed({ heads, appended, rowIds }: StoredRows): void {
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

  /** The commit's transaction rolled back: a state value it stored first is gone with it, so the store forgets its interned ids. */
  rolledBack(): void {
    forgetNodeStateValues(this.#deps.store);
  }

  /** Puts a failed commit's rows back in front of those queued since, dropping the oldest past {@link MAX_REQUEUED_TRANSITIONS}. */
  requeue(recorded: NewTransition[]): void {
    const rows = recorded.concat(this.#recorded);
    const dropped = Math.max(0, rows.length - MAX_REQUEUED_TRANSITIONS);
    if (dropped > 0) this.#deps.log.warn({ dropped }, "flight-recorder rows dropped while the store refuses writes");
    this.#recorded = dropped > 0 ? rows.slice(dropped) : rows;
  }

  /** Drops the queued rows (a reload: the store is the truth). */
  discard(): void {
    this.#recorded = [];
  }

  /** Records nothing more. */
  stop(): void {
    this.#stopped = true;
  }
}
