import type { z } from "zod";
import { isoTime } from "../lib/clock.js";
import { checkPairIntegrity, hasPublicEndpoint, HubGraph } from "../domain/render.js";
import { configVersionState } from "../domain/config-version.js";
import type { AwgParams } from "../domain/awg.js";
import type { NodeMode, PresenceState, RuntimeState } from "../protocol/enums.js";
import type {
  configViewSchema,
  meshPairViewSchema,
  nodeViewSchema,
  portForwardViewSchema,
} from "../protocol/views.schema.js";
import type { NodeClientViewRow } from "../store/node-list.repository.js";
import type { ConfigRow, MeshPairRow, NodeRow, PortForwardRow } from "../store/schema.js";

/**
 * Wire shapes of the REST resources (DESIGN §5), built from store rows. Times are ISO 8601 UTC
 * strings; private keys and config texts never appear here.
 */

// The view types derive from the wire schemas of src/protocol/views.schema.ts (one schema per
// wire shape, DESIGN §2); the builders below produce exactly those shapes.

/** A config (spec §2.2). */
export type ConfigView = z.output<typeof configViewSchema>;

/**
 * A node's client state (spec §2.7); `config_version_state` (spec §3.5) is null for nodes
 * effectively static (they have no agent to confirm anything).
 */
export type NodeClientView = NodeView["client"];

/** A node (spec §2.3); `effective_mode`: dynamic nodes are projected as static while MQTT services are disabled (spec §1.7). */
export type NodeView = z.output<typeof nodeViewSchema>;

/** A mesh pair's connection-integrity result (spec §2.4). */
export type PairIntegrityView = MeshPairView["integrity"];

/** A mesh pair (spec §2.4). */
export type MeshPairView = z.output<typeof meshPairViewSchema>;

/** A port forward of a node. */
export type PortForwardView = z.output<typeof portForwardViewSchema>;

export function configView(row: ConfigRow): ConfigView {
  return {
    config_id: row.config_id,
    name: row.name,
    tunnel_protocol: row.tunnel_protocol,
    network_cidr: row.network_cidr,
    awg: row.awg_params === null ? null : (JSON.parse(row.awg_params) as AwgParams),
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
    apply_mode: row.apply_mode,
  };
}

/** What is known about a node's client, from its actor's projection or its stored row. */
export interface ClientFacts {
  initialized: boolean;
  presence: PresenceState;
  runtime: RuntimeState;
  lastReachableAt: number | null;
  clientVersion: string | null;
  confirmedSha: string | null;
}

/**
 * The one derivation of a node's client state for every answer and event (spec §2.7; §6.5 rule
 * 7: nothing downstream re-derives it): dynamic nodes are projected as static while MQTT is off
 * (spec §1.7); never bound or static → offline (§3.1) and unknown (§3.3); `latest` iff the
 * confirmed sha is the staged one ({@link configVersionState}), `null` for static nodes (§3.5).
 */
export function clientView(
  node: Pick<NodeRow, "mode" | "staged_config_sha256">,
  facts: ClientFacts | undefined,
  mqttEnabled: boolean,
): NodeClientView & { effective_mode: NodeMode } {
  const dynamic = node.mode === "dynamic" && mqttEnabled;
  const initialized = dynamic && (facts?.initialized ?? false);
  return {
    effective_mode: dynamic ? "dynamic" : "static",
    client_initialized: initialized,
    client_presence_state: initialized ? (facts?.presence ?? "offline") : "offline",
    runtime_state: initialized ? (facts?.runtime ?? "unknown") : "unknown",
    last_reachable_at: facts?.lastReachableAt == null ? null : isoTime(facts.lastReachableAt),
    client_version: facts?.clientVersion ?? null,
    config_version_state: dynamic ? configVersionState(node.staged_config_sha256, facts?.confirmedSha ?? null) : null,
  };
}

/** A node's view from its stored row (without its private key), tags and client state. */
export function nodeView(
  row: Omit<NodeRow, "private_key" | "mesh_seq" | "auto_pair">,
  tags: readonly string[],
  client: NodeClientViewRow | undefined,
  mqttEnabled: boolean,
): NodeView {
  const { effective_mode, ...clientState } = clientView(
    row,
    {
      initialized: client?.client_initialized === 1,
      presence: client?.client_presence_state ?? "offline",
      runtime: client?.runtime_state ?? "unknown",
      lastReachableAt: client?.last_reachable_at ?? null,
      clientVersion: client?.client_version ?? null,
      confirmedSha: row.confirmed_config_sha256,
    },
    mqttEnabled,
  );
  return {
    node_id: row.node_id,
    config_id: row.config_id,
    name: row.name,
    mode: row.mode,
    effective_mode,
    interface_name: row.interface_name,
    address: row.address,
    public_address: row.public_address,
    listen_port: row.listen_port,
    public_key: row.public_key,
    hub: row.hub === 1,
    tags: [...tags],
    staged_config: { config_version: row.staged_config_version, config_sha256: row.staged_config_sha256 },
    client: clientState,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

/**
 * A pair's view with its connection integrity and route (spec §6.5 `workspace.connections[*]`;
 * README "Hubs: meshes behind NAT"), from the pair row, its two sides (only their endpoint fields
 * are read) and the config's hubs; a side missing from `nodes` reports the pair broken.
 */
export function meshPairView(
  row: MeshPairRow,
  nodes: ReadonlyMap<string, Pick<NodeRow, "node_id" | "public_address" | "listen_port">>,
  hubs: HubGraph = HubGraph.EMPTY,
): MeshPairView {
  const a = nodes.get(row.node_a);
  const b = nodes.get(row.node_b);
  const hidden = a !== undefined && b !== undefined && row.enabled === 1 && !hasPublicEndpoint(a) && !hasPublicEndpoint(b);
  const integrity =
    a && b
      ? checkPairIntegrity(a, b, row.enabled === 1, hidden ? hubs.hubFor(a.node_id, b.node_id) : null)
      : { status: "broken" as const, reason: "a node of this pair no longer exists", initiators: [], route: null, hub_node_id: null };
  return {
    pair_id: row.pair_id,
    config_id: row.config_id,
    node_a: row.node_a,
    node_b: row.node_b,
    enabled: row.enabled === 1,
    integrity: { status: integrity.status, reason: integrity.reason, initiators: [...integrity.initiators] },
    route: integrity.route,
    hub_node_id: integrity.hub_node_id,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

export function portForwardView(row: PortForwardRow): PortForwardView {
  return {
    forward_id: row.forward_id,
    node_id: row.node_id,
    protocol: row.protocol,
    listen_port: row.listen_port,
    target_address: row.target_address,
    target_port: row.target_port,
    enabled: row.enabled === 1,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}
