import { z } from "zod";
import { nodeModeSchema, tunnelProtocolSchema } from "./enums.js";
import { queryInt } from "./fields.js";

/**
 * Wire shapes of the state machine views (the node statechart as data, a node's live state, its flight
 * recorder): the answers of `GET /api/v1/machines/node`, `GET .../nodes/{node_id}/machine` and
 * `GET .../nodes/{node_id}/timeline`. The console imports their types. Times are ISO 8601 UTC
 * strings (spec §6.5). Objects are not strict: as response whitelists they drop unknown keys,
 * so nothing outside these fields (no password, token or key) can leave.
 */

const isoTime = z.string();

/** Where the event of a recorded transition came from. */
export const TRANSITION_SOURCES = ["heartbeat", "event", "will", "ack", "detect", "timer", "rest", "restore"] as const;
export const transitionSourceSchema = z.enum(TRANSITION_SOURCES);
export type TransitionSource = z.output<typeof transitionSourceSchema>;

/** A state node of the machine. */
export const machineStateSchema = z.object({
  /** XState id, `node.presence.online.fresh`: the machine id and the path of keys. */
  id: z.string(),
  key: z.string(),
  /** Id of the parent state; null for the root. */
  parent: z.string().nullable(),
  kind: z.enum(["parallel", "compound", "atomic", "final", "history"]),
  /** Id of the initial child of a compound state; null otherwise. */
  initial: z.string().nullable(),
});

/** A transition of the machine, as defined (one per target list and guard). */
export const machineTransitionSchema = z.object({
  /** Id of the state that defines it (a region's transitions apply to all its children). */
  source: z.string(),
  /** Ids of its target states; empty for a transition that only runs actions. */
  targets: z.array(z.string()),
  /** `event`: on an event; `after`: a timer; `always`: eventless (checked after every step). */
  trigger: z.enum(["event", "after", "always"]),
  /** The event type (`xstate.after.<delay>.<state id>` for a timer); null for `always`. */
  event: z.string().nullable(),
  /** The named guard; null when unguarded. */
  guard: z.string().nullable(),
  /** The named delay of a timer; null otherwise. */
  delay: z.string().nullable(),
  /**
   * The timer's delay in ms when its state is entered now, from this service's settings
   * (detect timeout, bind token TTL); null for a transition that is not a timer.
   */
  delay_ms: z.number().nullable(),
  /** True when the target is exited and entered again (timers re-armed). */
  reenter: z.boolean(),
});

/** `GET /api/v1/machines/node`: the node statechart, generated from its definition. */
export const machineGraphSchema = z.object({
  machine_id: z.string(),
  /** Version of the machine's persisted snapshot shape. */
  machine_version: z.number(),
  states: z.array(machineStateSchema),
  transitions: z.array(machineTransitionSchema),
});
export type MachineGraph = z.output<typeof machineGraphSchema>;

/** A state value region by region: `{presence: "online.fresh", runtime: "running", ...}`. */
export const regionValuesSchema = z.record(z.string(), z.string());
export type RegionValues = z.output<typeof regionValuesSchema>;

/** What a node's machine context holds, without anything secret (none of it is). */
export const machineContextViewSchema = z.object({
  mode: nodeModeSchema,
  online_ttl_ms: z.number(),
  detect_timeout_ms: z.number(),
  last_signal_at: isoTime.nullable(),
  last_reachable_at: isoTime.nullable(),
  detect_sent_at: isoTime.nullable(),
  bind_token_expires_at: isoTime.nullable(),
  staged_version: z.number(),
  staged_sha256: z.string().nullable(),
  confirmed_version: z.number().nullable(),
  confirmed_sha256: z.string().nullable(),
  confirmed_tunnel_protocol: tunnelProtocolSchema.nullable(),
  client_version: z.string().nullable(),
});

/** `GET /api/v1/configs/{config_id}/nodes/{node_id}/machine`: a node's live state. */
export const nodeMachineViewSchema = z.object({
  config_id: z.string(),
  node_id: z.string(),
  /**
   * `live`: the node's running actor; `stored`: the persisted snapshot of a dormant node (no
   * actor until its next event); `none`: the node has no machine (quarantined at start).
   */
  origin: z.enum(["live", "stored", "none"]),
  /** Active state per region; empty when `origin` is `none`. */
  regions: regionValuesSchema,
  /** Ids of every active state (what the console highlights). */
  active_states: z.array(z.string()),
  context: machineContextViewSchema.nullable(),
});
export type NodeMachineView = z.output<typeof nodeMachineViewSchema>;

/** One flight-recorder row. */
export const nodeTransitionViewSchema = z.object({
  /** Cursor: pass it as `before` to get the rows older than this one. */
  transition_id: z.number(),
  at: isoTime,
  /** Machine event type. */
  event: z.string(),
  source: transitionSourceSchema,
  /** The ACK's `request_id` (source `ack`). */
  request_id: z.string().nullable(),
  /** `METHOD /route` of the REST request (source `rest`, or `restore` by a snapshot restore). */
  route: z.string().nullable(),
  /** State per region before; null for the node's first state. */
  before: regionValuesSchema.nullable(),
  /**
   * State per region after it. The ids of the active states (what the console highlights for
   * this row) are `node.<region>` and `node.<region>.<path prefix>`: `presence: "online.fresh"`
   * → `node.presence`, `node.presence.online`, `node.presence.online.fresh`.
   */
  after: regionValuesSchema,
  /** Shown context fields that changed: `{field: [before, after]}`. */
  changes: z.record(z.string(), z.tuple([z.unknown(), z.unknown()])),
});

/** `GET .../nodes/{node_id}/timeline`: newest first. */
export const nodeTimelineSchema = z.object({
  transitions: z.array(nodeTransitionViewSchema),
  /** `before` of the next (older) page; null when this page is the last. */
  next_before: z.number().nullable(),
});
export type NodeTimeline = z.output<typeof nodeTimelineSchema>;

/**
 * `GET /api/v1/configs/{config_id}/timeline/latest`: the newest recorded
 * transition of each node of the config, ordered by `node_id`; a node with none is absent.
 */
export const configLatestTransitionsSchema = z.object({
  transitions: z.array(nodeTransitionViewSchema.extend({ node_id: z.string() })),
});
export type ConfigLatestTransitions = z.output<typeof configLatestTransitionsSchema>;

/** Query of the timeline: `before` a transition id (exclusive), at most `limit` rows (1..500, default 50). */
export const timelineQuerySchema = z.strictObject({
  before: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
  limit: queryInt(1, 500).default(50),
});
