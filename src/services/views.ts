import { isoTime } from "../clock.js";
import { checkPairIntegrity } from "../domain/render.js";
import type { AwgParams } from "../domain/awg.js";
import type { ConfigRow, MeshPairRow, NodeClientStateRow, NodeRow, PortForwardRow } from "../store/schema.js";

/**
 * Wire shapes of the REST resources (DESIGN §5), built from store rows. Times are ISO 8601 UTC
 * strings; private keys and config texts never appear here.
 */

export interface ConfigView {
  config_id: string;
  name: string;
  tunnel_protocol: "wireguard" | "awg_2";
  network_cidr: string;
  awg: AwgParams | null;
  created_at: string;
  updated_at: string;
}

export interface NodeClientView {
  client_initialized: boolean;
  client_presence_state: "online" | "dropped" | "offline";
  runtime_state: "unknown" | "running" | "stopped";
  last_reachable_at: string | null;
  client_version: string | null;
  /** spec §3.5; null for nodes effectively static (they have no agent to confirm anything). */
  config_version_state: "latest" | "pending" | null;
}

export interface NodeView {
  node_id: string;
  config_id: string;
  name: string;
  mode: "static" | "dynamic";
  /** spec §1.7: dynamic nodes are projected as static while MQTT services are disabled. */
  effective_mode: "static" | "dynamic";
  interface_name: string;
  address: string;
  public_address: string | null;
  listen_port: number | null;
  public_key: string;
  tags: string[];
  staged_config: { config_version: number; config_sha256: string | null };
  client: NodeClientView;
  created_at: string;
  updated_at: string;
}

export interface PairIntegrityView {
  status: "ok" | "broken" | "disabled";
  reason: string | null;
  initiators: string[];
}

export interface MeshPairView {
  pair_id: string;
  config_id: string;
  node_a: string;
  node_b: string;
  enabled: boolean;
  integrity: PairIntegrityView;
  created_at: string;
  updated_at: string;
}

export interface PortForwardView {
  forward_id: string;
  node_id: string;
  protocol: "tcp" | "udp";
  listen_port: number;
  target_address: string;
  target_port: number;
  enabled: boolean;
  created_at: string;
  updated_at: string;
}

export function configView(row: ConfigRow): ConfigView {
  return {
    config_id: row.config_id,
    name: row.name,
    tunnel_protocol: row.tunnel_protocol,
    network_cidr: row.network_cidr,
    awg: row.awg_params === null ? null : (JSON.parse(row.awg_params) as AwgParams),
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

/** What is known about a node's client, from its actor's projection or its stored row. */
export interface ClientFacts {
  initialized: boolean;
  presence: "online" | "dropped" | "offline";
  runtime: "unknown" | "running" | "stopped";
  lastReachableAt: number | null;
  clientVersion: string | null;
  confirmedSha: string | null;
}

/**
 * The one derivation of a node's client state for every answer and event (spec §2.7; §6.5 rule
 * 7: nothing downstream re-derives it): dynamic nodes are projected as static while MQTT is off
 * (spec §1.7); never bound or static → offline (§3.1) and unknown (§3.3); `latest` iff the
 * confirmed sha is the staged one, `null` for static nodes (§3.5).
 */
export function clientView(
  node: Pick<NodeRow, "mode" | "staged_config_sha256">,
  facts: ClientFacts | undefined,
  mqttEnabled: boolean,
): NodeClientView & { effective_mode: "static" | "dynamic" } {
  const dynamic = node.mode === "dynamic" && mqttEnabled;
  const initialized = dynamic && (facts?.initialized ?? false);
  return {
    effective_mode: dynamic ? "dynamic" : "static",
    client_initialized: initialized,
    client_presence_state: initialized ? (facts?.presence ?? "offline") : "offline",
    runtime_state: initialized ? (facts?.runtime ?? "unknown") : "unknown",
    last_reachable_at: facts?.lastReachableAt == null ? null : isoTime(facts.lastReachableAt),
    client_version: facts?.clientVersion ?? null,
    config_version_state: dynamic
      ? node.staged_config_sha256 !== null && facts?.confirmedSha === node.staged_config_sha256
        ? "latest"
        : "pending"
      : null,
  };
}

export function nodeView(
  row: NodeRow,
  tags: readonly string[],
  client: NodeClientStateRow | undefined,
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
    tags: [...tags],
    staged_config: { config_version: row.staged_config_version, config_sha256: row.staged_config_sha256 },
    client: clientState,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

export function meshPairView(row: MeshPairRow, nodes: ReadonlyMap<string, NodeRow>): MeshPairView {
  const a = nodes.get(row.node_a);
  const b = nodes.get(row.node_b);
  const integrity =
    a && b
      ? checkPairIntegrity(a, b, row.enabled === 1)
      : { status: "broken" as const, reason: "a node of this pair no longer exists", initiators: [] };
  return {
    pair_id: row.pair_id,
    config_id: row.config_id,
    node_a: row.node_a,
    node_b: row.node_b,
    enabled: row.enabled === 1,
    integrity: { status: integrity.status, reason: integrity.reason, initiators: [...integrity.initiators] },
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
