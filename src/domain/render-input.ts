import ipaddr from "ipaddr.js";
import { AppError } from "../errors.js";
import type { TunnelProtocol } from "../protocol/enums.js";
import { ipv4ToNumber, networkRange, parseNetworkCidr } from "./address-pool.js";
import { awgParamsSchema, type AwgParams } from "./awg.js";
import { isWireGuardKey } from "./keys.js";

/**
 * What a rendering of a node's config takes, and its validation: every string that reaches the
 * config text is checked here first, so no input can inject a line (a `PostUp` would run as root
 * on the agent). Each check throws `VALIDATION_FAILED` naming the offending field. Pure.
 */

/** One peer of the rendered node, as the caller selected it. */
export interface RenderPeer {
  node_id: string;
  /** 44-character base64 WireGuard public key. */
  public_key: string;
  /** Tunnel address (dotted quad) inside the config's network. */
  address: string;
  /** Public IPv4/IPv6 address or DNS name the peer is reachable at, or null. */
  public_address: string | null;
  /** UDP port the peer listens on, or null. */
  listen_port: number | null;
  /** The peer's node name, shown in the comment above its block (printable, 1..64 characters); the comment names the id alone without it. */
  name?: string | undefined;
  /**
   * Tunnel addresses of further nodes reached through this peer, a hub (README "Hubs: meshes
   * behind NAT"): added to its `AllowedIPs` after its own address.
   */
  routed_addresses?: readonly string[] | undefined;
}

/** One port forward on the rendered node: traffic to `listen_port` goes to the target. */
export interface RenderPortForward {
  protocol: "tcp" | "udp";
  /** Port (1..65535) on the rendered node. */
  listen_port: number;
  /** Destination address (dotted-quad IPv4). */
  target_address: string;
  /** Destination port (1..65535). */
  target_port: number;
}

/** Everything needed to render one node's config. */
export interface RenderInput {
  config_id: string;
  tunnel_protocol: TunnelProtocol;
  /** The config's IPv4 network, e.g. `"10.0.0.0/24"`. */
  network_cidr: string;
  /** Obfuscation parameters; required for `awg_2`, ignored for `wireguard`. */
  awg: AwgParams | null;
  node: {
    node_id: string;
    /** 44-character base64 WireGuard private key. */
    private_key: string;
    /** The node's own public key, when the caller has it: a peer repeating it is refused. */
    public_key?: string;
    /** Tunnel address (dotted quad) inside `network_cidr`. */
    address: string;
    listen_port: number | null;
    public_address: string | null;
    /** A hub forwards between its peers: its config turns IPv4 forwarding on (`PostUp`/`PostDown`). */
    hub?: boolean | undefined;
  };
  /** Already filtered by the caller to enabled, unbroken pairs. */
  peers: readonly RenderPeer[];
  /** Already filtered to enabled ones. */
  port_forwards: readonly RenderPortForward[];
}

/** The config-wide inputs of a rendering: the part of {@link RenderInput} every node of a config shares. */
export type RenderCommon = Pick<RenderInput, "config_id" | "tunnel_protocol" | "network_cidr" | "awg">;

/** Id syntax of config_id and node_id (DESIGN §3 "Ids"). */
const ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** @throws AppError `VALIDATION_FAILED` naming `field` in its message and details */
export function fail(field: string, message: string): never {
  throw new AppError("VALIDATION_FAILED", `${field}: ${message}`, { field });
}

function checkId(field: string, value: string): void {
  if (!ID_PATTERN.test(value)) fail(field, "must match ^[a-z0-9][a-z0-9_-]{0,63}$");
}

function checkPort(field: string, value: number): void {
  if (!Number.isInteger(value) || value < 1 || value > 65535) fail(field, "must be an integer port 1..65535");
}

/** One DNS label: letters, digits, inner hyphens, 1..63 characters. */
const DNS_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/** True for an IPv4 dotted quad, an IPv6 literal without zone, or a DNS name with a non-numeric TLD. */
function isEndpointHost(host: string): boolean {
  if (ipv4ToNumber(host) !== undefined) return true;
  if (host.includes(":")) return !host.includes("%") && ipaddr.IPv6.isValid(host);
  const name = host.endsWith(".") ? host.slice(0, -1) : host;
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split(".");
  const tld = labels[labels.length - 1] ?? "";
  return labels.every((label) => DNS_LABEL.test(label)) && !/^[0-9]+$/.test(tld);
}

function checkEndpoint(field: string, side: { public_address: string | null; listen_port: number | null }): void {
  if (side.public_address !== null && !isEndpointHost(side.public_address)) {
    fail(`${field}.public_address`, "must be an IPv4 or IPv6 address or a DNS name");
  }
  if (side.listen_port !== null) checkPort(`${field}.listen_port`, side.listen_port);
}

/** Validates the config-wide inputs; returns what rendering needs of them. */
export function validateCommon(common: RenderCommon): { awg: AwgParams | null; prefixLength: number; isHost: (address: string) => boolean } {
  checkId("config_id", common.config_id);
  if (common.tunnel_protocol !== "wireguard" && common.tunnel_protocol !== "awg_2") {
    fail("tunnel_protocol", 'must be "wireguard" or "awg_2"');
  }
  // Parsed once: a full mesh renders N-1 peers per node, N nodes per write.
  const range = networkRange(common.network_cidr); // throws VALIDATION_FAILED itself
  const isHost = (address: string): boolean => {
    const n = ipv4ToNumber(address);
    return n !== undefined && n > range.first && n < range.last;
  };
  let awg: AwgParams | null = null;
  if (common.tunnel_protocol === "awg_2") {
    if (common.awg === null) fail("awg", "awg_2 needs obfuscation parameters");
    const parsed = awgParamsSchema.safeParse(common.awg);
    if (!parsed.success) fail("awg", parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; "));
    awg = parsed.data;
  }
  return { awg, prefixLength: parseNetworkCidr(common.network_cidr).prefixLength, isHost };
}

/** Validates the rendered node's own fields. */
export function validateNode(node: RenderInput["node"], networkCidr: string, isHost: (address: string) => boolean): void {
  checkId("node.node_id", node.node_id);
  if (!isWireGuardKey(node.private_key)) fail("node.private_key", "must be a WireGuard key");
  if (!isHost(node.address)) {
    fail("node.address", `must be a host address of ${networkCidr}`);
  }
  checkEndpoint("node", node);
}

/** A node name as the API takes it: 1..64 characters, no C0/C1 control or DEL (so no line break). */
// eslint-disable-next-line no-control-regex
const PRINTABLE_NAME = /^[^\u0000-\u001f\u007f-\u009f]{1,64}$/;

function checkName(field: string, name: string | undefined): void {
  if (name !== undefined && (!PRINTABLE_NAME.test(name) || name.trim() !== name)) fail(field, "must be 1..64 printable characters without surrounding blanks");
}

/**
 * Validates the addresses routed through peers: host addresses of the network, none the node's
 * own, a peer's or another routed one (`taken` holds the node's and its peers' addresses, and
 * gains the routed ones).
 */
export function validateRouted(field: string, routed: readonly string[], taken: Set<string>, isHost: (address: string) => boolean, networkCidr: string): void {
  routed.forEach((address, i) => {
    if (!isHost(address)) fail(`${field}[${i}]`, `must be a host address of ${networkCidr}`);
    if (taken.has(address)) fail(`${field}[${i}]`, "repeats the node's own address, a peer's or another routed one");
    taken.add(address);
  });
}

/** Validates one peer's own fields (not whether it repeats another). */
export function validatePeerFields(field: string, peer: RenderPeer, networkCidr: string, isHost: (address: string) => boolean): void {
  checkId(`${field}.node_id`, peer.node_id);
  checkName(`${field}.name`, peer.name);
  if (!isWireGuardKey(peer.public_key)) fail(`${field}.public_key`, "must be a WireGuard key");
  if (!isHost(peer.address)) {
    fail(`${field}.address`, `must be a host address of ${networkCidr}`);
  }
  checkEndpoint(field, peer);
}

/** Validates everything that reaches the text; returns the AWG parameters to render (awg_2 only) and the prefix length. */
export function validateInput(input: RenderInput): { awg: AwgParams | null; prefixLength: number } {
  const { awg, prefixLength, isHost } = validateCommon(input);
  const { node } = input;
  validateNode(node, input.network_cidr, isHost);
  // The node's own public key is not derived here (≈0.5 ms of X25519 per render): a peer that
  // is the node itself is caught by its node_id and address.
  const nodeIds = new Set([node.node_id]);
  const publicKeys = new Set<string>(node.public_key === undefined ? [] : [node.public_key]);
  const addresses = new Set([node.address]);
  input.peers.forEach((peer, i) => {
    const field = `peers[${i}]`;
    checkId(`${field}.node_id`, peer.node_id);
    checkName(`${field}.name`, peer.name);
    if (nodeIds.has(peer.node_id)) fail(`${field}.node_id`, "repeats the node itself or another peer");
    nodeIds.add(peer.node_id);
    if (!isWireGuardKey(peer.public_key)) fail(`${field}.public_key`, "must be a WireGuard key");
    if (publicKeys.has(peer.public_key)) fail(`${field}.public_key`, "repeats the node's own key or another peer's");
    publicKeys.add(peer.public_key);
    if (!isHost(peer.address)) {
      fail(`${field}.address`, `must be a host address of ${input.network_cidr}`);
    }
    if (addresses.has(peer.address)) fail(`${field}.address`, "repeats the node's own address or another peer's");
    addresses.add(peer.address);
    checkEndpoint(field, peer);
  });
  input.peers.forEach((peer, i) => validateRouted(`peers[${i}].routed_addresses`, peer.routed_addresses ?? [], addresses, isHost, input.network_cidr));
  validatePortForwards(input.port_forwards, node);
  return { awg, prefixLength };
}

/** Validates a node's port forwards (fields, no repeated protocol/port, not the tunnel's UDP port). */
export function validatePortForwards(portForwards: readonly RenderPortForward[], node: RenderInput["node"]): void {
  const forwardKeys = new Set<string>();
  portForwards.forEach((forward, i) => {
    const field = `port_forwards[${i}]`;
    if (forward.protocol !== "tcp" && forward.protocol !== "udp") fail(`${field}.protocol`, 'must be "tcp" or "udp"');
    checkPort(`${field}.listen_port`, forward.listen_port);
    checkPort(`${field}.target_port`, forward.target_port);
    if (ipv4ToNumber(forward.target_address) === undefined) {
      fail(`${field}.target_address`, "must be a dotted-quad IPv4 address");
    }
    const key = `${forward.protocol}/${forward.listen_port}`;
    if (forwardKeys.has(key)) fail(`${field}.listen_port`, `another forward already takes ${key}`);
    forwardKeys.add(key);
    if (forward.protocol === "udp" && forward.listen_port === node.listen_port) {
      fail(`${field}.listen_port`, "is the node's own tunnel listen port");
    }
  });
}
