/** The rows a mesh write inserts or patches, built from its validated input. */
import { allocateAddress, isHostAddress } from "../../domain/address-pool.js";
import { generateAwgParams } from "../../domain/awg.js";
import { generateKeyPair } from "../../domain/keys.js";
import { AppError } from "../../errors.js";
import { newId } from "../../protocol/ids.js";
import type { ConfigRow, NodeRow, PortForwardRow } from "../../store/schema.js";
import { newNodeId } from "./mesh-ids.js";
import { DEFAULT_INTERFACE_NAME, DEFAULT_LISTEN_PORT, type CreateConfigInput, type CreateNodeInput, type PortForwardInput } from "./mesh-types.js";

/**
 * A new config: a fresh id, the normalized network `cidr`, AmneziaWG parameters, and pushes
 * applied by the spec's restart sequence (§3.8) unless `apply_mode` says `hitless`.
 */
export function newConfigRow(input: CreateConfigInput, cidr: string, now: number): ConfigRow {
  return {
    config_id: newId("cfg"),
    name: input.name,
    tunnel_protocol: input.tunnel_protocol,
    network_cidr: cidr,
    // Generated once per config, so every peer of the mesh agrees (DESIGN §3 awg_2); kept
    // even while the config runs plain WireGuard, so switching back and forth is stable.
    awg_params: JSON.stringify(generateAwgParams()),
    created_at: now,
    updated_at: now,
    apply_mode: input.apply_mode ?? "restart",
  };
}

/**
 * A new node of `config`: the address asked for (a free host address of the config's network)
 * or the next free one, fresh keys, never staged.
 * @param used the addresses of the config's nodes
 * @param meshSeq the node's place in creation order (`nextMeshSeq`): with `auto_pair` (default
 *   true) it joins every node of its config created before it (the full-mesh policy)
 * @throws AppError VALIDATION_FAILED (address outside the network), CONFLICT (address in use),
 *   ADDRESS_POOL_EXHAUSTED
 */
export function newNodeRow(config: ConfigRow, input: CreateNodeInput, used: readonly string[], now: number, meshSeq: number): NodeRow {
  const address = input.address !== undefined ? checkedAddress(config, input.address, used) : allocateAddress(config.network_cidr, used);
  const publicAddress = input.public_address ?? null;
  if (input.hub === true) requireHubEndpoint(publicAddress);
  const keys = generateKeyPair();
  return {
    node_id: newNodeId(now),
    config_id: config.config_id,
    name: input.name,
    mode: input.mode,
    interface_name: input.interface_name ?? DEFAULT_INTERFACE_NAME,
    address,
    public_address: publicAddress,
    listen_port: input.listen_port ?? (publicAddress !== null ? DEFAULT_LISTEN_PORT : null),
    private_key: keys.privateKey,
    public_key: keys.publicKey,
    staged_config_version: 0,
    staged_config_sha256: null,
    confirmed_config_version: null,
    confirmed_config_sha256: null,
    created_at: now,
    updated_at: now,
    hub: input.hub === true ? 1 : 0,
    mesh_seq: meshSeq,
    auto_pair: input.auto_pair === false ? 0 : 1,
  };
}

/**
 * A tunnel address asked for a node of `config` (on create or PATCH): a host address of the
 * config's network that no other node of the config holds.
 * @param used the addresses of the config's other nodes
 * @throws AppError VALIDATION_FAILED (outside the network, or its network or broadcast address),
 *   CONFLICT (in use)
 */
export function checkedAddress(config: ConfigRow, address: string, used: readonly string[]): string {
  if (!isHostAddress(address, config.network_cidr)) {
    throw new AppError("VALIDATION_FAILED", `address must be a host address inside ${config.network_cidr}`, { field: "address" });
  }
  if (used.includes(address)) throw new AppError("CONFLICT", `address ${address} is already used in this config`, { field: "address" });
  return address;
}

/**
 * A hub must be reachable by the nodes it forwards for (README "Hubs: meshes behind NAT"): its
 * listen port defaults to 51820 once it has a public address, so the address is what it needs.
 * @throws AppError HUB_NEEDS_PUBLIC_ENDPOINT when `publicAddress` is null or empty
 */
export function requireHubEndpoint(publicAddress: string | null): void {
  if (publicAddress === null || publicAddress === "") {
    throw new AppError("HUB_NEEDS_PUBLIC_ENDPOINT", "a hub needs a public address that the other nodes can reach: set public_address, or leave hub off", { field: "hub" });
  }
}

/** A new port forward of a node. */
export function newPortForwardRow(nodeId: string, input: PortForwardInput, now: number): PortForwardRow {
  return {
    forward_id: newId("pf"),
    node_id: nodeId,
    protocol: input.protocol,
    listen_port: input.listen_port,
    target_address: input.target_address,
    target_port: input.target_port,
    enabled: input.enabled === false ? 0 : 1,
    created_at: now,
    updated_at: now,
  };
}

/** `current` with the fields `input` sets. */
export function patchedPortForward(current: PortForwardRow, input: Partial<PortForwardInput>, now: number): PortForwardRow {
  return {
    ...current,
    ...(input.protocol !== undefined ? { protocol: input.protocol } : {}),
    ...(input.listen_port !== undefined ? { listen_port: input.listen_port } : {}),
    ...(input.target_address !== undefined ? { target_address: input.target_address } : {}),
    ...(input.target_port !== undefined ? { target_port: input.target_port } : {}),
    ...(input.enabled !== undefined ? { enabled: input.enabled ? 1 : 0 } : {}),
    updated_at: now,
  };
}
