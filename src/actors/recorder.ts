import type { AnyStateNode } from "xstate";
import type { NodeContext, NodeEvent } from "../machines/node.machine.js";
import type { TransitionSource } from "../store/node-transitions.repository.js";

/**
 * The pure parts of the flight recorder (docs/history/decisions-2026.md "flight
 * recorder"): which changes of a node's snapshot make a row, where its event came from, and what
 * the row says about the context. The registry calls these on every snapshot change of an actor,
 * so the "nothing changed" answers cost a few comparisons and allocate nothing.
 */

/** A node event as the router and the services send it: an ACK's may carry its `request_id`. */
export type RoutedNodeEvent = NodeEvent & { requestId?: string };

/** Where a transition's event came from: the stored `source`, `request_id` and `route`. */
export interface TransitionOrigin {
  source: TransitionSource;
  requestId?: string | null;
  route?: string | null;
}

/** The origins that carry nothing but their source, shared (one allocation each, not one per event). */
const HEARTBEAT: TransitionOrigin = Object.freeze({ source: "heartbeat" });
const CLIENT_EVENT: TransitionOrigin = Object.freeze({ source: "event" });
const WILL: TransitionOrigin = Object.freeze({ source: "will" });
const DETECT: TransitionOrigin = Object.freeze({ source: "detect" });
/** The origin of a machine timer's transition (shared). */
export const TIMER: TransitionOrigin = Object.freeze({ source: "timer" });
const RESTORE: TransitionOrigin = Object.freeze({ source: "restore" });

/**
 * The origin of an event delivered to a node's actor: heartbeats, client events
 * and wills from MQTT, ACKs with their `request_id`, detects, the presence sweep (`timer`), the
 * start-up re-arm (`restore`); every other event comes from a REST request (`rest`, with the route
 * `currentRoute` names; null when none is being served).
 */
export function originOf(event: RoutedNodeEvent, currentRoute?: () => string | undefined): TransitionOrigin {
  switch (event.type) {
    case "mqtt.signal":
      if (event.source === "ack") return { source: "ack", requestId: event.requestId ?? null };
      return event.source === "heartbeat" ? HEARTBEAT : CLIENT_EVENT;
    case "mqtt.will":
      return WILL;
    case "detect.sent":
    case "presence.outage_ended":
      return DETECT;
    case "detect.failed":
      return event.ack === true ? { source: "ack", requestId: event.requestId ?? null } : DETECT;
    case "config.applied":
      return { source: "ack", requestId: event.requestId ?? null };
    case "presence.ttl_check":
    case "detect.timed_out":
    case "presence.lost":
      return TIMER;
    case "system.restored":
      return RESTORE;
    default:
      return { source: "rest", route: currentRoute?.() ?? null };
  }
}

/** True when two state values name the same states (parallel regions, nested compound states). */
export function sameStateValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  let n = 0;
  for (const k in ao) {
    if (!sameStateValue(ao[k], bo[k])) return false;
    n++;
  }
  for (const _ in bo) n--;
  return n === 0;
}

/**
 * The context fields the console shows beside the state value by wire
 * name. A change of one of them makes a row even when the state value stays.
 * The signal timestamps (`lastSignalAt`, `lastReachableAt`, `detectSentAt`) are not among them:
 * every heartbeat or ACK moves them, and `GET .../machine` answers them.
 */
const SHOWN: ReadonlyArray<readonly [keyof NodeContext, string]> = [
  ["mode", "mode"],
  ["clientVersion", "client_version"],
  ["stagedVersion", "staged_version"],
  ["stagedSha", "staged_sha256"],
  ["confirmedVersion", "confirmed_version"],
  ["confirmedSha", "confirmed_sha256"],
  ["confirmedProtocol", "confirmed_tunnel_protocol"],
  ["bindTokenExpiresAt", "bind_token_expires_at"],
];

/** True when two contexts agree on every shown field. */
export function sameShownContext(a: NodeContext, b: NodeContext): boolean {
  for (const [field] of SHOWN) if ((a[field] ?? null) !== (b[field] ?? null)) return false;
  return true;
}

/** A shown field's value on the wire: times as ISO 8601 UTC strings (spec §6.5), the rest as is. */
function wireValue(field: keyof NodeContext, v: unknown): unknown {
  if (v === undefined || v === null) return null;
  return field === "bindTokenExpiresAt" && typeof v === "number" ? new Date(v).toISOString() : v;
}

/**
 * The shown fields that differ, by wire name, as `[before, after]` (before null for a node's
 * first state: every non-null field is listed).
 */
export function shownChanges(before: NodeContext | undefined, after: NodeContext): Record<string, [unknown, unknown]> {
  const out: Record<string, [unknown, unknown]> = {};
  for (const [field, wire] of SHOWN) {
    const b = before === undefined ? null : wireValue(field, before[field]);
    const a = wireValue(field, after[field]);
    if (a !== b) out[wire] = [b, a];
  }
  return out;
}

/** The ids of every active state of a state value (`node.presence`, `node.presence.online`, ...). */
export function activeStateIds(value: unknown, prefix = "node"): string[] {
  const out: string[] = [];
  const walk = (v: unknown, at: string) => {
    if (typeof v === "string") {
      out.push(`${at}.${v}`);
      return;
    }
    if (v === null || typeof v !== "object") return;
    for (const [k, inner] of Object.entries(v)) {
      out.push(`${at}.${k}`);
      walk(inner, `${at}.${k}`);
    }
  };
  walk(value, prefix);
  return out;
}

/** The `after` event type of every state that has a timer, by state id (the first, if several). */
export function afterEventsOf(root: AnyStateNode): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (node: AnyStateNode) => {
    const first = node.after[0];
    if (first !== undefined) out.set(node.id, first.eventType);
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(root);
  return out;
}

/** A trie node of {@link StateValueTexts}: the next token, or {@link TEXT} for the value's JSON. */
type Trie = Map<string | symbol, Trie | string>;
const OPEN = Symbol("{");
const CLOSE = Symbol("}");
const TEXT = Symbol("text");

/**
 * The JSON text of state values, interned (the flight recorder's hot path, docs/history/decisions-2026.md
 * "recorder cost, compact rows"): equal values give the same string instance. A value
 * is found by walking a trie of its keys and leaf state names (strings of the machine definition,
 * so their hashes are cached), so a transition to a value seen before costs a few map lookups, no
 * `JSON.stringify` and no new string; and the store's lookup of that string by value finds its
 * hash already computed. The trie grows with the distinct values met (a machine has few).
 */
export class StateValueTexts {
  readonly #root: Trie = new Map();

  /** `JSON.stringify(value)`, the same instance for equal values (objects compared by their keys in order). */
  text(value: unknown): string {
    const node = this.#walk(this.#root, value);
    let text = node.get(TEXT);
    if (typeof text !== "string") {
      text = JSON.stringify(value) ?? "null";
      node.set(TEXT, text);
    }
    return text;
  }

  #walk(node: Trie, value: unknown): Trie {
    if (typeof value === "string") return step(node, value);
    if (value === null || typeof value !== "object") return step(step(node, OPEN), JSON.stringify(value) ?? "undefined");
    let at = step(node, OPEN);
    const object = value as Record<string, unknown>;
    for (const k in object) at = this.#walk(step(at, k), object[k]);
    return step(at, CLOSE);
  }
}

/** The child of `node` under `token`, made when missing. */
function step(node: Trie, token: string | symbol): Trie {
  let next = node.get(token);
  if (next === undefined || typeof next === "string") {
    next = new Map();
    node.set(token, next);
  }
  return next;
}
