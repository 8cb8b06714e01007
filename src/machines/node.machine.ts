import { and, assign, enqueueActions, raise, setup, stateIn } from "xstate";
import { configVersionState } from "../domain/config-version.js";
import type { NodeMode, TunnelProtocol } from "../protocol/enums.js";

/**
 * The statechart of one node (design card: one XState actor per node). Pure: no I/O, no clock
 * reads — every event carries `at` (ms since the epoch, stamped by the actor layer), and the
 * delays are computed from context and that `at`, so a restored actor re-arms its timers with
 * the time that is left (`system.restored`; XState does not re-arm `after` timers of a restored
 * snapshot, github.com/statelyai/xstate/issues/5331). The online TTL is the exception: it is decided here (guard
 * `ttlExpired`) but timed by the actor layer's single presence sweep, which sends
 * `presence.ttl_check` at {@link presenceDeadline} — one timer for all nodes instead of one
 * cancelled and re-armed per heartbeat.
 *
 * Parallel regions:
 * - `mode`            static | dynamic                          (spec §1.1, §3.1 dynamic→static)
 * - `initialization`  uninitialized | initialized               (spec §3.2)
 * - `presence`        offline | online | dropped                (spec §3.1; TTL, will, detect)
 * - `runtime`         unknown | running | stopped               (spec §3.3)
 * - `bindToken`       none | valid | used | expired | invalidated (spec §3.6)
 * - `sync`            pending | latest                          (spec §3.5)
 * - `probe`           idle | waiting                            (spec §6.4 rule 8: detect timeout;
 *                                                                also the window after a broker outage)
 *
 * Effects are named actions with empty defaults here; `src/actors` provides the real ones with
 * `machine.provide()`. Persisting the snapshot and emitting SSE happen in the actor layer after
 * each event, from the settled snapshot (an action would see a half-applied transition).
 */

/** Version of this machine's persisted snapshot shape; stored beside the snapshot. */
export const NODE_MACHINE_VERSION = 1;

export interface NodeMachineInput {
  configId: string;
  nodeId: string;
  mode: NodeMode;
  /** Online TTL, ms; must exceed the 30-minute heartbeat interval (spec §6.4 rule 7, §8). */
  onlineTtlMs: number;
  /** How long a detect waits for its ACK, ms (DESIGN §3: 20 s). */
  detectTimeoutMs: number;
}

export interface NodeContext {
  configId: string;
  nodeId: string;
  mode: NodeMode;
  onlineTtlMs: number;
  detectTimeoutMs: number;
  /** Last reachable signal (heartbeat, any ACK, non-offline event), ms. */
  lastSignalAt: number | null;
  /** Last ACK, ms (spec §6.4 rule 3: every ACK refreshes last_reachable_at). */
  lastReachableAt: number | null;
  /** When the outstanding detect was sent, ms. */
  detectSentAt: number | null;
  /** Expiry of the current bind token, ms. */
  bindTokenExpiresAt: number | null;
  stagedVersion: number;
  stagedSha: string | null;
  confirmedVersion: number | null;
  confirmedSha: string | null;
  /** Tunnel protocol of the confirmed config: the next push's `previous_tunnel_protocol`. */
  confirmedProtocol: TunnelProtocol | null;
  /** Reported by bind requests and detect ACKs (spec §9 rule 3). */
  clientVersion: string | null;
}

/** Which upstream message a reachable signal came from. */
/**
 * A node's context when its machine starts (spec §3: nothing seen yet, nothing staged or
 * confirmed). Also what the machine's delays are evaluated on for the statechart's graph.
 */
export function initialNodeContext(input: NodeMachineInput): NodeContext {
  return {
    configId: input.configId,
    nodeId: input.nodeId,
    mode: input.mode,
    onlineTtlMs: input.onlineTtlMs,
    detectTimeoutMs: input.detectTimeoutMs,
    lastSignalAt: null,
    lastReachableAt: null,
    detectSentAt: null,
    bindTokenExpiresAt: null,
    stagedVersion: 0,
    stagedSha: null,
    confirmedVersion: null,
    confirmedSha: null,
    confirmedProtocol: null,
    clientVersion: null,
  };
}

export type SignalSource = "heartbeat" | "ack" | "event";

export type NodeEvent =
  /** The stored mode changed (REST). */
  | { type: "node.mode_changed"; at: number; mode: NodeMode }
  /** A bind succeeded (the guarded database write already happened). */
  | { type: "client.bound"; at: number; clientVersion: string | null }
  /** reset-client (spec §4 rule 12). */
  | { type: "client.reset"; at: number }
  /** bind-command issued a token; any earlier token is invalidated (spec §3.6). */
  | { type: "bind_token.issued"; at: number; expiresAt: number }
  /**
   * A reachable signal (spec §3.1): heartbeat, any ACK, or an event other than `offline`.
   * `wgOnline` is the runtime report it carries, if any (heartbeat, detect ACK, or a start/stop
   * control ACK). `ack` marks ACKs, which refresh last_reachable_at (spec §6.4 rule 3).
   */
  | { type: "mqtt.signal"; at: number; source: SignalSource; wgOnline?: boolean; clientVersion?: string }
  /** The will message: event `offline` (spec §6.3, §6.4 rule 6). */
  | { type: "mqtt.will"; at: number }
  /** A detect was published. */
  | { type: "detect.sent"; at: number }
  /**
   * The detect failed: publish error, or an ACK with status failed (spec §3.1). A failed ACK
   * (`ack: true`) still refreshes last_reachable_at (spec §6.4 rule 3). To an online node it is
   * not "another recent signal" but the failure itself (→ dropped); to an offline or dropped
   * node it is an ACK received after the will or the drop (→ online, spec §3.1 transition 2).
   */
  | { type: "detect.failed"; at: number; ack?: boolean }
  /** The staged config changed (DESIGN §3 Config versions). */
  | { type: "config.staged"; at: number; version: number; sha: string }
  /** An `applied` config push ACK confirmed a version (spec §3.5). */
  | { type: "config.applied"; at: number; version: number; sha: string; protocol?: TunnelProtocol }
  /** The actor was restored from a persisted snapshot: re-arm timers with the time left. */
  | { type: "system.restored"; at: number }
  /** Raised internally: the detect ACK did not arrive in time. */
  | { type: "detect.timed_out"; at: number }
  /**
   * The actor layer's presence sweep (one timer for all nodes instead of one per heartbeat):
   * sent at or after {@link presenceDeadline}. The machine decides whether the TTL ran out.
   */
  | { type: "presence.ttl_check"; at: number }
  /** Raised internally: presence left `online`. */
  | { type: "presence.lost"; at: number }
  /**
   * The backend's broker link, down since `since`, came back at `returnedAt` (spec §3.1): what
   * the node sent while it was down may not have been heard. An online node with no signal since
   * `since` is treated as having an outstanding detect sent at `returnedAt`: its agent's
   * reconnect (`mqtt_connected`) or any other signal answers it; with none by
   * `returnedAt + detectTimeoutMs` it is dropped, as after a detect timeout. `at` is when the
   * event reached the node (the registry paces them).
   */
  | { type: "presence.outage_ended"; at: number; since: number; returnedAt: number };

function eventAt(event: { type: string; at?: number }, fallback: number | null): number {
  return typeof event.at === "number" ? event.at : (fallback ?? 0);
}

export const nodeMachine = setup({
  types: {
    context: {} as NodeContext,
    events: {} as NodeEvent,
    input: {} as NodeMachineInput,
  },
  actions: {
    /** Delete or disable the node's broker user and cut its live connection (spec §3.1, §4 rule 12). */
    revokeClient: (_args, _params: { reason: "reset" | "made_static" }) => {},
    /** The node came online, or its staged config changed while online and pending: push it. */
    requestConfigPush: () => {},
    recordSignal: assign(({ context, event }) => {
      if (event.type !== "mqtt.signal") return {};
      return {
        lastSignalAt: event.at,
        lastReachableAt: event.source === "ack" ? event.at : context.lastReachableAt,
        clientVersion: event.clientVersion ?? context.clientVersion,
      };
    }),
    recordFailedAck: assign(({ context, event }) =>
      event.type === "detect.failed" && event.ack === true ? { lastReachableAt: event.at } : { lastReachableAt: context.lastReachableAt },
    ),
    /**
     * A failed detect ACK that brings an offline or dropped node back (spec §3.1 transition 2):
     * it is the newest reachable signal, so the online TTL runs from it.
     */
    recordFailedAckSignal: assign(({ context, event }) =>
      event.type === "detect.failed" ? { lastSignalAt: event.at, lastReachableAt: event.at } : { lastSignalAt: context.lastSignalAt },
    ),
    recordBind: assign(({ context, event }) =>
      event.type === "client.bound" ? { clientVersion: event.clientVersion ?? context.clientVersion } : {},
    ),
    recordStaged: assign(({ context, event }) =>
      event.type === "config.staged" ? { stagedVersion: event.version, stagedSha: event.sha } : { stagedVersion: context.stagedVersion },
    ),
    recordApplied: assign(({ context, event }) =>
      event.type === "config.applied"
        ? { confirmedVersion: event.version, confirmedSha: event.sha, confirmedProtocol: event.protocol ?? context.confirmedProtocol }
        : { confirmedVersion: context.confirmedVersion },
    ),
    clearClientState: assign({
      lastSignalAt: null,
      detectSentAt: null,
    }),
  },
  guards: {
    isDynamic: ({ context }) => context.mode === "dynamic",
    /** Signals count only for a dynamic node that has bound (spec §3.1: never bound → offline). */
    acceptsSignals: and(["isDynamic", stateIn({ initialization: "initialized" })]),
    /** The detect failure is an ACK from the node, not a publish error (spec §6.4 rule 3). */
    failureIsAck: ({ event }) => event.type === "detect.failed" && event.ack === true,
    /**
     * spec §3.1 transition 2, §6.4 rule 6: any ACK — a failed detect ACK too — received after
     * the will or the drop restores online.
     */
    failedAckRestores: and(["acceptsSignals", "failureIsAck"]),
    toStatic: ({ event }) => event.type === "node.mode_changed" && event.mode === "static",
    toDynamic: ({ event }) => event.type === "node.mode_changed" && event.mode === "dynamic",
    /** An online node silent since the broker link went down (`presence.outage_ended`). */
    silentSinceOutage: and([
      stateIn({ presence: "online" }),
      ({ context, event }) => event.type === "presence.outage_ended" && (context.lastSignalAt === null || context.lastSignalAt < event.since),
    ]),
    /** No reachable signal since the outstanding detect was sent (spec §3.1 "no other recent signal"). */
    noSignalSinceProbe: ({ context }) =>
      context.detectSentAt !== null && (context.lastSignalAt === null || context.lastSignalAt < context.detectSentAt),
    carriesRunning: ({ event }) => event.type === "mqtt.signal" && event.wgOnline === true,
    carriesStopped: ({ event }) => event.type === "mqtt.signal" && event.wgOnline === false,
    /** spec §3.3: running/stopped only from an online (accepted) client's report. */
    reportsRunning: and(["acceptsSignals", "carriesRunning"]),
    reportsStopped: and(["acceptsSignals", "carriesStopped"]),
    /** spec §3.5: the newly staged config is the one the client already confirmed. */
    stagedIsConfirmed: ({ context, event }) =>
      event.type === "config.staged" && configVersionState(event.sha, context.confirmedSha) === "latest",
    /** spec §3.5: the applied ACK confirms the staged config → latest. */
    appliedIsStaged: ({ context, event }) =>
      event.type === "config.applied" && configVersionState(context.stagedSha, event.sha) === "latest",
    /** spec §3.1 heartbeat timeout: the online TTL has run out since the newest signal. */
    ttlExpired: ({ context, event }) =>
      context.lastSignalAt === null || eventAt(event, 0) >= context.lastSignalAt + context.onlineTtlMs,
  },
  delays: {
    /** Time left until the outstanding detect times out. */
    detectTimeout: ({ context, event }) =>
      Math.max(0, (context.detectSentAt ?? eventAt(event, 0)) + context.detectTimeoutMs - eventAt(event, context.detectSentAt)),
    /** Time left until the bind token expires. */
    bindTokenTtl: ({ context, event }) =>
      Math.max(0, (context.bindTokenExpiresAt ?? 0) - eventAt(event, context.bindTokenExpiresAt)),
  },
}).createMachine({
  id: "node",
  type: "parallel",
  context: ({ input }) => initialNodeContext(input),
  states: {
    mode: {
      initial: "starting",
      states: {
        starting: {
          always: [{ guard: "isDynamic", target: "dynamic" }, { target: "static" }],
        },
        static: {
          on: {
            "node.mode_changed": {
              guard: "toDynamic",
              target: "dynamic",
              actions: assign({ mode: "dynamic" }),
            },
          },
        },
        dynamic: {
          on: {
            "node.mode_changed": {
              guard: "toStatic",
              target: "static",
              actions: [assign({ mode: "static" }), { type: "revokeClient", params: { reason: "made_static" } }],
            },
          },
        },
      },
    },

    initialization: {
      initial: "uninitialized",
      states: {
        uninitialized: {
          on: { "client.bound": { guard: "isDynamic", target: "initialized", actions: "recordBind" } },
        },
        initialized: {
          on: {
            "client.bound": { guard: "isDynamic", actions: "recordBind" },
            // spec §3.2: a bind on an initialized node rotates credentials; it stays initialized.
            "client.reset": { target: "uninitialized" },
            "node.mode_changed": { guard: "toStatic", target: "uninitialized" },
          },
        },
      },
    },

    presence: {
      initial: "offline",
      states: {
        offline: {
          entry: raise(({ event }) => ({ type: "presence.lost" as const, at: eventAt(event, null) })),
          on: {
            "mqtt.signal": { guard: "acceptsSignals", target: "online", actions: "recordSignal" },
            "detect.failed": { guard: "failedAckRestores", target: "online", actions: "recordFailedAckSignal" },
          },
        },
        online: {
          entry: "requestConfigPush",
          initial: "fresh",
          states: {
            // The TTL is not an `after` timer: re-arming one per heartbeat was the ingest path's
            // largest cost. A signal only moves `lastSignalAt`; the actor layer's presence sweep
            // sends `presence.ttl_check` once {@link presenceDeadline} has passed, and the guard
            // here decides (spec §3.1 "heartbeat timeout with no other recent signal").
            fresh: {
              on: {
                "mqtt.signal": { actions: "recordSignal" },
                "presence.ttl_check": { guard: "ttlExpired", target: "#node.presence.dropped" },
              },
            },
          },
          on: {
            "detect.timed_out": { guard: "noSignalSinceProbe", target: "dropped" },
            "detect.failed": { guard: "noSignalSinceProbe", target: "dropped" },
          },
        },
        dropped: {
          entry: raise(({ event }) => ({ type: "presence.lost" as const, at: eventAt(event, null) })),
          on: {
            "mqtt.signal": { guard: "acceptsSignals", target: "online", actions: "recordSignal" },
            "detect.failed": { guard: "failedAckRestores", target: "online", actions: "recordFailedAckSignal" },
          },
        },
      },
      on: {
        "mqtt.will": { target: ".offline" },
        "client.reset": { target: ".offline", actions: ["clearClientState", { type: "revokeClient", params: { reason: "reset" } }] },
        "node.mode_changed": { guard: "toStatic", target: ".offline", actions: "clearClientState" },
      },
    },

    runtime: {
      initial: "unknown",
      // Each state listens only for the report that changes it: a heartbeat repeating the
      // current runtime evaluates one guard and re-enters nothing.
      states: {
        unknown: {
          on: {
            "mqtt.signal": [
              { guard: "reportsRunning", target: "running" },
              { guard: "reportsStopped", target: "stopped" },
            ],
          },
        },
        running: { on: { "mqtt.signal": { guard: "reportsStopped", target: "stopped" } } },
        stopped: { on: { "mqtt.signal": { guard: "reportsRunning", target: "running" } } },
      },
      on: {
        "presence.lost": { target: ".unknown" },
        "detect.timed_out": { target: ".unknown" },
        "client.reset": { target: ".unknown" },
        "node.mode_changed": { guard: "toStatic", target: ".unknown" },
      },
    },

    bindToken: {
      initial: "none",
      states: {
        none: {},
        valid: {
          after: { bindTokenTtl: { target: "expired" } },
          on: {
            "client.bound": { target: "used" },
            "bind_token.issued": {
              target: "valid",
              reenter: true,
              actions: assign(({ event }) => ({ bindTokenExpiresAt: event.expiresAt })),
            },
            "client.reset": { target: "invalidated" },
            "node.mode_changed": { guard: "toStatic", target: "invalidated" },
            "system.restored": { target: "valid", reenter: true },
          },
        },
        used: {},
        expired: {},
        invalidated: {},
      },
      on: {
        "bind_token.issued": {
          target: ".valid",
          actions: assign(({ event }) => ({ bindTokenExpiresAt: event.expiresAt })),
        },
      },
    },

    sync: {
      // Explicit transitions rather than `always`: eventless transitions are re-evaluated after
      // every event the node gets (every heartbeat), these only on the two events that matter.
      initial: "pending",
      on: {
        "config.staged": [
          { guard: "stagedIsConfirmed", target: ".latest", actions: "recordStaged" },
          {
            target: ".pending",
            actions: [
              "recordStaged",
              // An online node whose new staged config it has not confirmed gets it pushed.
              enqueueActions(({ check, enqueue }) => {
                if (check(stateIn({ presence: "online" }))) enqueue("requestConfigPush");
              }),
            ],
          },
        ],
        "config.applied": [
          { guard: "appliedIsStaged", target: ".latest", actions: "recordApplied" },
          { target: ".pending", actions: "recordApplied" },
        ],
      },
      states: {
        pending: {},
        latest: {},
      },
    },

    probe: {
      initial: "idle",
      states: {
        idle: {
          on: {
            "detect.sent": { target: "waiting", actions: assign(({ event }) => ({ detectSentAt: event.at })) },
            // The window after a broker outage is an outstanding probe sent when the link came back.
            "presence.outage_ended": {
              guard: "silentSinceOutage",
              target: "waiting",
              actions: assign(({ event }) => (event.type === "presence.outage_ended" ? { detectSentAt: event.returnedAt } : {})),
            },
          },
        },
        waiting: {
          after: {
            detectTimeout: {
              target: "idle",
              actions: raise(({ context }) => ({
                type: "detect.timed_out" as const,
                at: (context.detectSentAt ?? 0) + context.detectTimeoutMs,
              })),
            },
          },
          on: {
            "mqtt.signal": { target: "idle" },
            "detect.failed": { target: "idle", actions: "recordFailedAck" },
            "detect.sent": { target: "waiting", reenter: true, actions: assign(({ event }) => ({ detectSentAt: event.at })) },
            "system.restored": { target: "waiting", reenter: true },
            "client.reset": { target: "idle" },
            "node.mode_changed": { guard: "toStatic", target: "idle" },
          },
        },
      },
    },
  },
});

export type NodeMachine = typeof nodeMachine;

/** The parts of a node snapshot the helpers below read. */
interface NodeSnapshotLike {
  value: unknown;
  context: Pick<NodeContext, "lastSignalAt" | "onlineTtlMs">;
}

function regionOf(value: unknown, region: string): unknown {
  return value !== null && typeof value === "object" ? (value as Record<string, unknown>)[region] : undefined;
}

/**
 * When an online node's TTL runs out (ms since the epoch): its newest signal plus the online
 * TTL (spec §3.1, §6.4 rule 7). Null when the node is not online. The actor layer must send
 * `presence.ttl_check` to the node at or after this time.
 */
export function presenceDeadline(snapshot: NodeSnapshotLike): number | null {
  const presence = regionOf(snapshot.value, "presence");
  if (presence === undefined || presence === "offline" || presence === "dropped") return null;
  const last = snapshot.context.lastSignalAt;
  return last === null ? 0 : last + snapshot.context.onlineTtlMs;
}

/**
 * True when a restored snapshot sits in a state with an `after` timer (a valid bind token, an
 * outstanding detect): only then must the actor layer send `system.restored` to re-arm it
 * (XState does not re-arm timers of a restored snapshot, github.com/statelyai/xstate/issues/5331).
 */
export function hasPendingTimers(value: unknown): boolean {
  return regionOf(value, "bindToken") === "valid" || regionOf(value, "probe") === "waiting";
}
