import type { Actor } from "xstate";
import { presenceDeadline, type NodeContext, type NodeMachine } from "../machines/node.machine.js";
import type { Entry, NodeActorSnapshot } from "./node-entries.js";
import { sameStateValue, type RoutedNodeEvent } from "./recorder.js";

/** A heartbeat as the router sends it: `mqtt.signal` from source `heartbeat`. */
export type HeartbeatEvent = Extract<RoutedNodeEvent, { type: "mqtt.signal" }>;

export interface HeartbeatCoalescerDeps {
  /** `RegistryDeps.coalesceHeartbeats`: false delivers every heartbeat (the reference the property test compares against). */
  enabled: boolean;
  /** Where a held heartbeat still moves the node's online-TTL deadline. */
  sweep: { track(entry: Entry, deadline: number | null): void };
  /** How a held heartbeat reaches the actor when it must (as the cause of what it changes). */
  recorder: { sendAs(actor: Actor<NodeMachine>, event: RoutedNodeEvent): void };
}

/**
 * Coalesced heartbeats: most heartbeats of an online node repeat what it already reported, and
 * the machine's only answer is `recordSignal` (`lastSignalAt` = the event's `at`). When one
 * heartbeat delivered in full changed nothing but `lastSignalAt` (same state value, same context
 * otherwise, no effect queued, no flight-recorder row: {@link learn}), the next heartbeats with
 * the same `wg_online`, while the actor's snapshot is still that one, skip XState
 * ({@link hold}): the coalescer keeps the newest `at` on the entry (`pendingSignalAt`) and moves
 * the presence deadline to `at + onlineTtlMs`; the caller queues the entry for the group commit,
 * which writes the `last_signal_at` column (as it does for such a heartbeat delivered in full).
 * Reads overlay that time on the snapshot, and any other event for the node, or a full write of
 * its state, first delivers the newest held heartbeat ({@link deliverHeld}), so the actor sees
 * the same events in the same order, with runs of identical heartbeats cut to their last.
 *
 * This assumes that a heartbeat's outcome does not depend on its `at` or on `lastSignalAt` (true
 * of the node machine: no guard of `mqtt.signal` reads them); `test/actors/coalesced-heartbeats.test.ts`
 * compares a registry with `coalesceHeartbeats: false` over random event sequences.
 */
export class HeartbeatCoalescer {
  readonly #enabled: boolean;
  readonly #sweep: HeartbeatCoalescerDeps["sweep"];
  readonly #recorder: HeartbeatCoalescerDeps["recorder"];
  /** Heartbeats held instead of delivered since start. */
  #held = 0;

  constructor(deps: HeartbeatCoalescerDeps) {
    this.#enabled = deps.enabled;
    this.#sweep = deps.sweep;
    this.#recorder = deps.recorder;
  }

  /** Heartbeats held instead of delivered to XState since start. */
  get held(): number {
    return this.#held;
  }

  /** True for an event that may be held: a plain heartbeat (no client version, no `request_id`), while coalescing is on. */
  coalesces(event: RoutedNodeEvent): event is HeartbeatEvent {
    return this.#enabled && event.type === "mqtt.signal" && event.source === "heartbeat" && event.clientVersion === undefined && event.requestId === undefined;
  }

  /**
   * Holds a heartbeat whose only effect would be `lastSignalAt = at`: moves the presence
   * deadline and keeps `at` as the entry's newest held signal. The caller queues the entry's
   * write (`GroupCommit.markDirty`) when this returns true.
   * @returns false when the heartbeat must be delivered to the actor
   */
  hold(entry: Entry, at: number, wgOnline: boolean | undefined): boolean {
    const learned = entry.signalOnly;
    if (learned === undefined || entry.state.kind !== "live" || learned.wgOnline !== wgOnline) return false;
    if (entry.state.actor.getSnapshot() !== learned.snapshot) return false;
    entry.pendingSignalAt = at;
    this.#held++;
    this.#sweep.track(entry, at + learned.snapshot.context.onlineTtlMs);
    return true;
  }

  /** Delivers the newest held heartbeat to the actor (before another event, or a full write). */
  deliverHeld(entry: Entry): void {
    const at = entry.pendingSignalAt;
    const learned = entry.signalOnly;
    entry.pendingSignalAt = undefined;
    if (at === undefined || learned === undefined || entry.state.kind !== "live") return;
    const event: RoutedNodeEvent = { type: "mqtt.signal", at, source: "heartbeat" };
    if (learned.wgOnline !== undefined) event.wgOnline = learned.wgOnline;
    this.#recorder.sendAs(entry.state.actor, event);
  }

  /**
   * Learns from a heartbeat delivered in full whether the next identical ones may be held: yes
   * when it queued nothing (`quiet`: no effect, no flight-recorder row) and moved nothing but
   * `lastSignalAt` to its `at` (and so the presence deadline to `at + onlineTtlMs`).
   */
  learn(entry: Entry, event: HeartbeatEvent, before: NodeActorSnapshot, after: NodeActorSnapshot, quiet: boolean): void {
    const signalOnly =
      quiet &&
      after.context.lastSignalAt === event.at &&
      presenceDeadline(after) === event.at + after.context.onlineTtlMs &&
      sameStateValue(before.value, after.value) &&
      sameContextButSignal(before.context, after.context);
    entry.signalOnly = signalOnly ? { snapshot: after, wgOnline: event.wgOnline } : undefined;
  }
}

/** True when two node contexts differ in `lastSignalAt` at most. */
export function sameContextButSignal(a: NodeContext, b: NodeContext): boolean {
  if (a === b) return true;
  for (const k of Object.keys(a) as Array<keyof NodeContext>) {
    if (k !== "lastSignalAt" && a[k] !== b[k]) return false;
  }
  return Object.keys(a).length === Object.keys(b).length;
}
