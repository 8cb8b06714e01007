/**
 * Rendering of one node's tunnel config, staging of config versions, and the connection-integrity
 * check of a mesh pair.
 *
 * - {@link renderNodeConfig}: the `wg-quick` / `awg-quick` config text of one node (spec §6.3
 *   `config_text`; `tunnel_protocol` is `wireguard` or `awg_2`, DESIGN §3 "awg_2").
 * - {@link stageConfig}: `(config_version, config_sha256, config_text)` of the staged config; the
 *   version increments only when the rendered text changes (DESIGN §3 "Config versions").
 * - {@link checkPairIntegrity}: whether a mesh pair can handshake at all (spec §6.5
 *   `workspace.connections[*]`, the broken-link indicators).
 *
 * Pure: no I/O, no clocks. Every string that reaches the config text is validated first, so no
 * input can inject a line (a `PostUp` would run as root on the agent).
 */
import { createHash } from "node:crypto";
import ipaddr from "ipaddr.js";
import { AppError } from "../errors.js";
import type { TunnelProtocol } from "../protocol/enums.js";
import { ipv4ToNumber, networkRange, parseNetworkCidr } from "./address-pool.js";
import { awgParamsSchema, type AwgParams } from "./awg.js";
import { isWireGuardKey } from "./keys.js";

/** Tunnel protocol of a config (spec §6.3 `tunnel_protocol`); declared in src/protocol/enums.ts. */
export type { TunnelProtocol } from "../protocol/enums.js";

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
  };
  /** Already filtered by the caller to enabled, unbroken pairs. */
  peers: readonly RenderPeer[];
  /** Already filtered to enabled ones. */
  port_forwards: readonly RenderPortForward[];
}

/** A node's staged config (DESIGN §3 "Config versions"). */
export interface StagedConfig {
  /** Positive integer, 1 for the first staging. */
  config_version: number;
  /** Lowercase hex SHA-256 of the UTF-8 `config_text` (spec §6.3 `config_sha256`). */
  config_sha256: string;
  config_text: string;
}

/** One side of a mesh pair, as far as reachability goes. */
export interface PairSide {
  node_id: string;
  public_address: string | null;
  listen_port: number | null;
}

/** Result of {@link checkPairIntegrity}. */
export interface PairIntegrity {
  status: "ok" | "broken" | "disabled";
  /** Human-readable reason for `broken` / `disabled`; null when `ok`. */
  reason: string | null;
  /** node_ids that can initiate a handshake toward the other side; empty when disabled. */
  initiators: string[];
}

/** Id syntax of config_id and node_id (DESIGN §3 "Ids"). */
const ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** Interval (seconds) of PersistentKeepalive, the usual value for keeping NAT mappings open. */
const PERSISTENT_KEEPALIVE_SECONDS = 25;

/** The reason reported for a pair in which neither side can initiate. */
export const NO_INITIATOR_REASON =
  "neither node has a public address and listen port, so no side can initiate a handshake";

/**
 * True when a node is reachable from outside: it has both a public address and a listen port.
 * Peers can then initiate handshakes toward it (its `Endpoint` is rendered for them).
 */
export function hasPublicEndpoint<T extends { public_address: string | null; listen_port: number | null }>(
  side: T,
): side is T & { public_address: string; listen_port: number } {
  return side.public_address !== null && side.public_address !== "" && side.listen_port !== null;
}

/**
 * Renders one node's config text.
 *
 * Layout (LF line endings, trailing newline, deterministic; only ids, never names):
 * a `# Managed by svc` comment; `[Interface]` with PrivateKey, Address (`address/prefix` of
 * `network_cidr`), ListenPort (when set), Jc..H4 (awg_2 only), then per port forward (sorted by
 * protocol, listen port, target address, target port) two `PostUp` iptables rules (DNAT in
 * PREROUTING, MASQUERADE in POSTROUTING) and afterwards the matching `PostDown` rules with `-D`;
 * then one `[Peer]` per peer sorted by node_id with a `# node <id>` comment, PublicKey,
 * AllowedIPs (`address/32`), Endpoint (when the peer has a public address and listen port; IPv6
 * literals bracketed) and `PersistentKeepalive = 25` when this node itself has no public endpoint.
 *
 * @throws AppError `VALIDATION_FAILED` (details name the offending field) when: an id does not
 *   match `^[a-z0-9][a-z0-9_-]{0,63}$`; `network_cidr` is invalid; `awg` is null or invalid for
 *   awg_2; a key is not a WireGuard key; an address is not a host address of the network; a port
 *   is not an integer 1..65535; a public address is not an IPv4/IPv6 literal or DNS name; peers
 *   repeat a node_id, public key or address, or include the node itself; two port forwards share
 *   protocol and listen port, or a UDP forward takes the node's own listen port.
 */
export function renderNodeConfig(input: RenderInput): string {
  const { awg, prefixLength } = validateInput(input);
  const keepalive = !hasPublicEndpoint(input.node);
  const peers = [...input.peers].sort((a, b) => compareStrings(a.node_id, b.node_id));
  return assembleConfig(input, input.node, prefixLength, awg, input.port_forwards, peers.map((peer) => peerBlock(peer, keepalive)));
}

/** The config-wide inputs of a rendering: the part of {@link RenderInput} every node of a config shares. */
export type RenderCommon = Pick<RenderInput, "config_id" | "tunnel_protocol" | "network_cidr" | "awg">;

/**
 * Renders many nodes of one config against one set of candidate peers (every node of the
 * config, say), doing once what {@link renderNodeConfig} does per node: the config-wide checks,
 * each candidate's own checks (id, key, address, endpoint), the sort by node_id, and each
 * candidate's `[Peer]` block. A node's rendering is then O(candidates) set look-ups and string
 * concatenation instead of O(peers) validations, a sort and ~6 lines per peer (issue 14: a
 * protocol switch of a 1,000-node full mesh renders 999,000 peer blocks).
 *
 * {@link ConfigRenderer.render} returns byte for byte the text of `renderNodeConfig` for the same
 * node, peers and port forwards, and throws `VALIDATION_FAILED` exactly when it would (the
 * `details.field` named may differ when the input has several faults:
 * test/domain/config-renderer.test.ts).
 */
export class ConfigRenderer {
  readonly #common: RenderCommon;
  readonly #awg: AwgParams | null;
  readonly #prefixLength: number;
  readonly #isHost: (address: string) => boolean;
  /** Candidates sorted by node_id (code-unit order), the order of the `[Peer]` blocks. */
  readonly #sorted: readonly RenderPeer[];
  /** True when no two candidates share a node_id, public key or address. */
  readonly #distinct: boolean;
  /** A candidate's own checks, run on first use: null = valid, else the failure. */
  readonly #checked = new Map<RenderPeer, AppError | null>();
  /** A candidate's `[Peer]` block, without and with PersistentKeepalive. */
  readonly #blocks = new Map<RenderPeer, [string | undefined, string | undefined]>();

  /**
   * @param common the config's id, protocol, network and AWG parameters
   * @param candidates every node that may be a peer of a rendered node (a caller's choice;
   *   invalid candidates fail only the renderings that select them)
   * @throws AppError `VALIDATION_FAILED` when the config-wide inputs are invalid (as every
   *   `renderNodeConfig` of this config would)
   */
  constructor(common: RenderCommon, candidates: readonly RenderPeer[]) {
    const checked = validateCommon(common);
    this.#common = common;
    this.#awg = checked.awg;
    this.#prefixLength = checked.prefixLength;
    this.#isHost = checked.isHost;
    this.#sorted = [...candidates].sort((a, b) => compareStrings(a.node_id, b.node_id));
    const ids = new Set(candidates.map((c) => c.node_id));
    const keys = new Set(candidates.map((c) => c.public_key));
    const addresses = new Set(candidates.map((c) => c.address));
    this.#distinct = ids.size === candidates.length && keys.size === candidates.length && addresses.size === candidates.length;
  }

  /**
   * The config text of `node` with the candidates whose node_id is in `peerIds` as its peers.
   * @param peerIds node_ids of the selected peers (already filtered to enabled, unbroken pairs);
   *   each must be a candidate's
   * @param portForwards the node's enabled port forwards
   * @returns the text `renderNodeConfig` gives for the same input (spec §6.3 `config_text`)
   * @throws AppError `VALIDATION_FAILED` in the cases of {@link renderNodeConfig}; Error when a
   *   selected id is not a candidate (a caller's fault)
   */
  render(node: RenderInput["node"], peerIds: ReadonlySet<string>, portForwards: readonly RenderPortForward[]): string {
    validateNode(node, this.#common.network_cidr, this.#isHost);
    const keepalive = !hasPublicEndpoint(node);
    const seen = this.#distinct ? null : { ids: new Set<string>(), keys: new Set<string>(), addresses: new Set<string>() };
    const blocks: string[] = [];
    for (const peer of this.#sorted) {
      if (!peerIds.has(peer.node_id)) continue;
      const field = `peers[${blocks.length}]`;
      const failure = this.#check(peer);
      if (failure !== null) throw failure;
      if (peer.node_id === node.node_id || seen?.ids.has(peer.node_id)) fail(`${field}.node_id`, "repeats the node itself or another peer");
      if (peer.public_key === node.public_key || seen?.keys.has(peer.public_key)) fail(`${field}.public_key`, "repeats the node's own key or another peer's");
      if (peer.address === node.address || seen?.addresses.has(peer.address)) fail(`${field}.address`, "repeats the node's own address or another peer's");
      seen?.ids.add(peer.node_id);
      seen?.keys.add(peer.public_key);
      seen?.addresses.add(peer.address);
      blocks.push(this.#block(peer, keepalive));
    }
    if (blocks.length !== peerIds.size) throw new Error("ConfigRenderer.render: a selected peer is not a candidate");
    validatePortForwards(portForwards, node);
    return assembleConfig(this.#common, node, this.#prefixLength, this.#awg, portForwards, blocks);
  }

  #check(peer: RenderPeer): AppError | null {
    let failure = this.#checked.get(peer);
    if (failure === undefined) {
      try {
        validatePeerFields("peers[]", peer, this.#common.network_cidr, this.#isHost);
        failure = null;
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        failure = err;
      }
      this.#checked.set(peer, failure);
    }
    return failure;
  }

  #block(peer: RenderPeer, keepalive: boolean): string {
    const cached = this.#blocks.get(peer) ?? [undefined, undefined];
    const i = keepalive ? 1 : 0;
    const block = cached[i] ?? peerBlock(peer, keepalive);
    cached[i] = block;
    this.#blocks.set(peer, cached);
    return block;
  }
}

/** The text of a node's config from validated parts: the interface, then the given `[Peer]` blocks in order. */
function assembleConfig(
  common: RenderCommon,
  node: RenderInput["node"],
  prefixLength: number,
  awg: AwgParams | null,
  portForwards: readonly RenderPortForward[],
  peerBlocks: readonly string[],
): string {
  const lines: string[] = [
    `# Managed by svc: config ${common.config_id}, node ${node.node_id}. Changes here are overwritten.`,
    "[Interface]",
    `PrivateKey = ${node.private_key}`,
    `Address = ${node.address}/${prefixLength}`,
  ];
  if (node.listen_port !== null) lines.push(`ListenPort = ${node.listen_port}`);

  if (awg !== null) {
    lines.push(
      `Jc = ${awg.jc}`,
      `Jmin = ${awg.jmin}`,
      `Jmax = ${awg.jmax}`,
      `S1 = ${awg.s1}`,
      `S2 = ${awg.s2}`,
      `S3 = ${awg.s3}`,
      `S4 = ${awg.s4}`,
      `H1 = ${awg.h1}`,
      `H2 = ${awg.h2}`,
      `H3 = ${awg.h3}`,
      `H4 = ${awg.h4}`,
    );
  }

  const forwards = [...portForwards].sort(comparePortForwards);
  for (const forward of forwards) {
    lines.push(...portForwardRules(forward, "-A").map((rule) => `PostUp = ${rule}`));
  }
  for (const forward of forwards) {
    lines.push(...portForwardRules(forward, "-D").map((rule) => `PostDown = ${rule}`));
  }
  return `${lines.join("\n")}${peerBlocks.join("")}\n`;
}

/** One `[Peer]` block, starting with the blank line that separates it from what precedes it. */
function peerBlock(peer: RenderPeer, keepalive: boolean): string {
  let block = `\n\n[Peer]\n# node ${peer.node_id}\nPublicKey = ${peer.public_key}\nAllowedIPs = ${peer.address}/32`;
  if (hasPublicEndpoint(peer)) block += `\nEndpoint = ${formatEndpoint(peer.public_address, peer.listen_port)}`;
  if (keepalive) block += `\nPersistentKeepalive = ${PERSISTENT_KEEPALIVE_SECONDS}`;
  return block;
}

/**
 * Stages a rendered config (DESIGN §3 "Config versions").
 *
 * @param previous The currently staged version and sha, or null when the node has none.
 * @param configText The freshly rendered text.
 * @returns version 1 when there is no previous; the previous version when the SHA-256 is
 *   unchanged; previous + 1 otherwise. `config_sha256` is the lowercase hex SHA-256 of the UTF-8
 *   text.
 * @throws AppError `VALIDATION_FAILED` when `previous.config_version` is not a positive integer.
 */
export function stageConfig(
  previous: { config_version: number; config_sha256: string } | null,
  configText: string,
): StagedConfig {
  const config_sha256 = createHash("sha256").update(configText, "utf8").digest("hex");
  if (previous === null) return { config_version: 1, config_sha256, config_text: configText };
  if (!Number.isSafeInteger(previous.config_version) || previous.config_version < 1) {
    throw new AppError("VALIDATION_FAILED", "previous config_version must be a positive integer", {
      config_version: previous.config_version,
    });
  }
  const config_version =
    previous.config_sha256.toLowerCase() === config_sha256 ? previous.config_version : previous.config_version + 1;
  return { config_version, config_sha256, config_text: configText };
}

/**
 * Checks whether a mesh pair can establish a tunnel.
 *
 * A side can initiate toward the other when the OTHER side has both a public address and a
 * listen port (it then has an `Endpoint` in the initiator's config).
 *
 * @param a One side of the pair.
 * @param b The other side.
 * @param enabled Whether the pair is enabled.
 * @returns `disabled` (reason "pair disabled", no initiators) when `enabled` is false; otherwise
 *   `ok` with reason null and the node_ids that can initiate (in the order a, b), or `broken`
 *   with {@link NO_INITIATOR_REASON} when none can.
 */
export function checkPairIntegrity(a: PairSide, b: PairSide, enabled: boolean): PairIntegrity {
  if (!enabled) return { status: "disabled", reason: "pair disabled", initiators: [] };
  const initiators: string[] = [];
  if (hasPublicEndpoint(b)) initiators.push(a.node_id);
  if (hasPublicEndpoint(a)) initiators.push(b.node_id);
  if (initiators.length === 0) return { status: "broken", reason: NO_INITIATOR_REASON, initiators };
  return { status: "ok", reason: null, initiators };
}

/** The two iptables rules of a port forward, with `-A` (add) or `-D` (delete). */
function portForwardRules(forward: RenderPortForward, op: "-A" | "-D"): [string, string] {
  const { protocol, listen_port, target_address, target_port } = forward;
  return [
    `iptables -t nat ${op} PREROUTING -p ${protocol} --dport ${listen_port} -j DNAT --to-destination ${target_address}:${target_port}`,
    `iptables -t nat ${op} POSTROUTING -p ${protocol} -d ${target_address} --dport ${target_port} -j MASQUERADE`,
  ];
}

/** `host:port`, with IPv6 literals bracketed. */
function formatEndpoint(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Code-unit order, independent of locale. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function comparePortForwards(a: RenderPortForward, b: RenderPortForward): number {
  return (
    compareStrings(a.protocol, b.protocol) ||
    a.listen_port - b.listen_port ||
    (ipv4ToNumber(a.target_address) ?? 0) - (ipv4ToNumber(b.target_address) ?? 0) ||
    a.target_port - b.target_port
  );
}

function fail(field: string, message: string): never {
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
function validateCommon(common: RenderCommon): { awg: AwgParams | null; prefixLength: number; isHost: (address: string) => boolean } {
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
function validateNode(node: RenderInput["node"], networkCidr: string, isHost: (address: string) => boolean): void {
  checkId("node.node_id", node.node_id);
  if (!isWireGuardKey(node.private_key)) fail("node.private_key", "must be a WireGuard key");
  if (!isHost(node.address)) {
    fail("node.address", `must be a host address of ${networkCidr}`);
  }
  checkEndpoint("node", node);
}

/** Validates one peer's own fields (not whether it repeats another). */
function validatePeerFields(field: string, peer: RenderPeer, networkCidr: string, isHost: (address: string) => boolean): void {
  checkId(`${field}.node_id`, peer.node_id);
  if (!isWireGuardKey(peer.public_key)) fail(`${field}.public_key`, "must be a WireGuard key");
  if (!isHost(peer.address)) {
    fail(`${field}.address`, `must be a host address of ${networkCidr}`);
  }
  checkEndpoint(field, peer);
}

/** Validates everything that reaches the text; returns the AWG parameters to render (awg_2 only) and the prefix length. */
function validateInput(input: RenderInput): { awg: AwgParams | null; prefixLength: number } {
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
  validatePortForwards(input.port_forwards, node);
  return { awg, prefixLength };
}

/** Validates a node's port forwards (fields, no repeated protocol/port, not the tunnel's UDP port). */
function validatePortForwards(portForwards: readonly RenderPortForward[], node: RenderInput["node"]): void {
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
