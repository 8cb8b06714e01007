/**
 * Rendering of one node's tunnel config, and staging of config versions.
 *
 * - {@link renderNodeConfig}: the `wg-quick` / `awg-quick` config text of one node (spec §6.3
 *   `config_text`; `tunnel_protocol` is `wireguard` or `awg_2`, DESIGN §3 "awg_2").
 * - {@link ConfigRenderer}: the same text for many nodes of one config, validated and sorted once.
 * - {@link stageConfig}: `(config_version, config_sha256, config_text)` of the staged config; the
 *   version increments only when the rendered text changes (DESIGN §3 "Config versions").
 * - `checkPairIntegrity` (pair-integrity.ts, re-exported): whether a mesh pair can handshake at
 *   all (spec §6.5 `workspace.connections[*]`, the broken-link indicators).
 *
 * Pure: no I/O, no clocks. Every input is validated first (render-input.ts), so no input can
 * inject a line (a `PostUp` would run as root on the agent).
 */
import { createHash } from "node:crypto";
import { AppError } from "../errors.js";
import { ipv4ToNumber } from "./address-pool.js";
import type { AwgParams } from "./awg.js";
import { hasPublicEndpoint } from "./pair-integrity.js";
import {
  fail,
  validateCommon,
  validateInput,
  validateNode,
  validatePeerFields,
  validatePortForwards,
  validateRouted,
  type RenderCommon,
  type RenderInput,
  type RenderPeer,
  type RenderPortForward,
} from "./render-input.js";

export { checkPairIntegrity, hasPublicEndpoint, HubGraph, isDirectPair, NO_INITIATOR_REASON, type PairIntegrity, type PairSide } from "./pair-integrity.js";
export type { RenderCommon, RenderInput, RenderPeer, RenderPortForward } from "./render-input.js";

/** Tunnel protocol of a config (spec §6.3 `tunnel_protocol`); declared in src/protocol/enums.ts. */
export type { TunnelProtocol } from "../protocol/enums.js";

/** A node's staged config (DESIGN §3 "Config versions"). */
export interface StagedConfig {
  /** Positive integer, 1 for the first staging. */
  config_version: number;
  /** Lowercase hex SHA-256 of the UTF-8 `config_text` (spec §6.3 `config_sha256`). */
  config_sha256: string;
  config_text: string;
}

/** Interval (seconds) of PersistentKeepalive, the usual value for keeping NAT mappings open. */
const PERSISTENT_KEEPALIVE_SECONDS = 25;

/**
 * What a hub's config runs after its interface is up (wg-quick substitutes `%i`, the interface):
 * IPv4 forwarding on (a per-namespace sysctl), and forwarding from the tunnel back into the tunnel
 * accepted ahead of any other rule (a host whose FORWARD policy is DROP, as Docker sets it,
 * would drop it). Packets between two nodes keep their tunnel addresses, so nothing is NATed.
 */
export const HUB_POST_UP = ["sysctl -w net.ipv4.ip_forward=1", "iptables -I FORWARD -i %i -o %i -j ACCEPT"] as const;
/**
 * What a hub's config runs after its interface is down: its forwarding rule removed. Forwarding
 * stays on (other services of the host may rely on it; README "Hubs: meshes behind NAT").
 */
export const HUB_POST_DOWN = ["iptables -D FORWARD -i %i -o %i -j ACCEPT"] as const;

/**
 * Renders one node's config text.
 *
 * Layout (LF line endings, trailing newline, deterministic): a `# Managed by svc` comment;
 * `[Interface]` with PrivateKey, Address (`address/prefix` of `network_cidr`), ListenPort (when
 * set), Jc..H4 (awg_2 only); then, on a hub, the `PostUp` lines that turn IPv4 forwarding on and
 * accept forwarding from the interface to itself ({@link HUB_POST_UP}); then per port forward
 * (sorted by protocol, listen port, target address, target port) two `PostUp` iptables rules
 * (DNAT in PREROUTING, MASQUERADE in POSTROUTING) and afterwards the matching `PostDown` rules
 * with `-D`; on a hub, last, the `PostDown` removing its forwarding rule ({@link HUB_POST_DOWN});
 * then one `[Peer]` per peer sorted by node_id with a comment naming it (`# <name> (node <id>)`,
 * or `# node <id>` without a name), PublicKey, AllowedIPs (`address/32`, then the addresses routed
 * through that peer in address order, each `/32`), Endpoint (when the peer has a public address
 * and listen port; IPv6 literals bracketed) and `PersistentKeepalive = 25` when this node itself
 * has no public endpoint.
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
  return assembleConfig(input, input.node, prefixLength, awg, input.port_forwards, peers.map((peer) => peerBlock(peer, keepalive, peer.routed_addresses ?? [])));
}

/**
 * Renders many nodes of one config against one set of candidate peers (every node of the
 * config, say), doing once what {@link renderNodeConfig} does per node: the config-wide checks,
 * each candidate's own checks (id, key, address, endpoint), the sort by node_id, and each
 * candidate's `[Peer]` block. A node's rendering is then O(candidates) set look-ups and string
 * concatenation instead of O(peers) validations, a sort and ~6 lines per peer (a
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
   * @param routed selected peer node_id → addresses routed through it (`RenderPeer.routed_addresses`)
   * @returns the text `renderNodeConfig` gives for the same input (spec §6.3 `config_text`)
   * @throws AppError `VALIDATION_FAILED` in the cases of {@link renderNodeConfig}; Error when a
   *   selected id is not a candidate (a caller's fault)
   */
  render(node: RenderInput["node"], peerIds: ReadonlySet<string>, portForwards: readonly RenderPortForward[], routed: ReadonlyMap<string, readonly string[]> = new Map()): string {
    const blocks = this.#peerBlocks(node, peerIds, routed);
    validatePortForwards(portForwards, node);
    return assembleConfig(this.#common, node, this.#prefixLength, this.#awg, portForwards, blocks);
  }

  /**
   * Runs every check {@link render} runs for the same input and assembles nothing: a text that
   * is not needed yet (staged lazily) is known to render. O(candidates), no text of O(peers) bytes.
   * @throws what {@link render} throws for the same input
   */
  check(node: RenderInput["node"], peerIds: ReadonlySet<string>, portForwards: readonly RenderPortForward[], routed: ReadonlyMap<string, readonly string[]> = new Map()): void {
    this.#peerBlocks(node, peerIds, routed);
    validatePortForwards(portForwards, node);
  }

  /** The node's own checks, then each selected peer's, in `[Peer]` order: the blocks. */
  #peerBlocks(node: RenderInput["node"], peerIds: ReadonlySet<string>, routed: ReadonlyMap<string, readonly string[]>): string[] {
    validateNode(node, this.#common.network_cidr, this.#isHost);
    const keepalive = !hasPublicEndpoint(node);
    const seen = this.#distinct ? null : { ids: new Set<string>(), keys: new Set<string>(), addresses: new Set<string>() };
    const blocks: string[] = [];
    const routedBlocks: Array<[index: number, peer: RenderPeer, addresses: readonly string[]]> = [];
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
      const through = routed.get(peer.node_id) ?? [];
      if (through.length > 0) routedBlocks.push([blocks.length, peer, through]);
      blocks.push(this.#block(peer, keepalive));
    }
    if (blocks.length !== peerIds.size) throw new Error("ConfigRenderer.render: a selected peer is not a candidate");
    if (routedBlocks.length > 0) {
      // Few (one per hub peer): checked against the node's and its selected peers' addresses.
      const taken = new Set([node.address, ...this.#sorted.filter((p) => peerIds.has(p.node_id)).map((p) => p.address)]);
      for (const [index, peer, through] of [...routedBlocks].sort((x, y) => x[0] - y[0])) {
        validateRouted(`peers[${index}].routed_addresses`, through, taken, this.#isHost, this.#common.network_cidr);
        blocks[index] = peerBlock(peer, keepalive, through);
      }
    }
    return blocks;
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
    const block = cached[i] ?? peerBlock(peer, keepalive, []);
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

  const hub = node.hub === true;
  if (hub) lines.push(...HUB_POST_UP.map((command) => `PostUp = ${command}`));
  const forwards = [...portForwards].sort(comparePortForwards);
  for (const forward of forwards) {
    lines.push(...portForwardRules(forward, "-A").map((rule) => `PostUp = ${rule}`));
  }
  for (const forward of forwards) {
    lines.push(...portForwardRules(forward, "-D").map((rule) => `PostDown = ${rule}`));
  }
  if (hub) lines.push(...HUB_POST_DOWN.map((command) => `PostDown = ${command}`));
  return `${lines.join("\n")}${peerBlocks.join("")}\n`;
}

/**
 * One `[Peer]` block, starting with the blank line that separates it from what precedes it.
 * `routed`: validated addresses reached through the peer, listed after its own in address order.
 */
function peerBlock(peer: RenderPeer, keepalive: boolean, routed: readonly string[]): string {
  const comment = peer.name === undefined ? `node ${peer.node_id}` : `${peer.name} (node ${peer.node_id})`;
  const allowed = [peer.address, ...[...routed].sort((x, y) => (ipv4ToNumber(x) ?? 0) - (ipv4ToNumber(y) ?? 0))].map((a) => `${a}/32`).join(", ");
  let block = `\n\n[Peer]\n# ${comment}\nPublicKey = ${peer.public_key}\nAllowedIPs = ${allowed}`;
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

