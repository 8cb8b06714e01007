import type { SnapshotFrom } from "xstate";
import type { NodeMachine } from "../machines/node.machine.js";
import type { ConfigVersionState, NodeMode, PresenceState, RuntimeState, TunnelProtocol } from "../protocol/enums.js";

/**
 * What a node actor's state means to the rest of the service: the `node_client_state` columns
 * (spec §2.7) and the `endpoint.status.updated` payload are both derived from this, never
 * re-derived elsewhere (spec §6.5 rule 7).
 */
export interface NodeProjection {
  mode: NodeMode;
  clientInitialized: boolean;
  presence: PresenceState;
  runtime: RuntimeState;
  bindToken: "none" | "valid" | "used" | "expired" | "invalidated";
  sync: ConfigVersionState;
  lastReachableAt: number | null;
  lastSignalAt: number | null;
  clientVersion: string | null;
  confirmedVersion: number | null;
  confirmedSha: string | null;
  confirmedProtocol: TunnelProtocol | null;
  /** The staged config the node's actor knows of (DESIGN §3 Config versions). */
  stagedVersion: number;
  stagedSha: string | null;
}

type NodeSnapshot = SnapshotFrom<NodeMachine>;

/** What a projection reads: a live snapshot, or a persisted one (state value and context). */
type ProjectedSnapshot = Pick<NodeSnapshot, "context"> & { value: unknown };

function region<T extends string>(snapshot: ProjectedSnapshot, name: string, fallback: T): T {
  const value = (snapshot.value as Record<string, unknown>)[name];
  if (typeof value === "string") return value as T;
  if (value !== null && typeof value === "object") return Object.keys(value)[0] as T;
  return fallback;
}

/** Projects a node machine snapshot. */
export function projectNode(snapshot: ProjectedSnapshot): NodeProjection {
  const c = snapshot.context;
  return {
    mode: c.mode,
    clientInitialized: region<string>(snapshot, "initialization", "uninitialized") === "initialized",
    presence: region(snapshot, "presence", "offline"),
    runtime: region(snapshot, "runtime", "unknown"),
    bindToken: region(snapshot, "bindToken", "none"),
    sync: region(snapshot, "sync", "pending"),
    lastReachableAt: c.lastReachableAt,
    lastSignalAt: c.lastSignalAt,
    clientVersion: c.clientVersion,
    confirmedVersion: c.confirmedVersion,
    confirmedSha: c.confirmedSha,
    confirmedProtocol: c.confirmedProtocol ?? null,
    stagedVersion: c.stagedVersion,
    stagedSha: c.stagedSha,
  };
}

/** True when two projections differ in anything an operator can see. */
export function projectionChanged(a: NodeProjection | undefined, b: NodeProjection): boolean {
  if (a === undefined) return true;
  return (
    a.mode !== b.mode ||
    a.clientInitialized !== b.clientInitialized ||
    a.presence !== b.presence ||
    a.runtime !== b.runtime ||
    a.sync !== b.sync ||
    a.lastReachableAt !== b.lastReachableAt ||
    a.clientVersion !== b.clientVersion ||
    a.confirmedSha !== b.confirmedSha ||
    a.stagedSha !== b.stagedSha
  );
}
