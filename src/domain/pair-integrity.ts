/**
 * The connection integrity of a mesh pair (spec §6.5 `workspace.connections[*]`, the broken-link
 * indicators) and its route: whether either side can initiate a handshake, which needs the other
 * side to be reachable at a public address and listen port (it then has an `Endpoint` in the
 * initiator's config); and, when neither can, whether a hub paired with both forwards between
 * them (README "Hubs: meshes behind NAT"). Pure.
 */

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
  /**
   * node_ids that can initiate a handshake toward the other side; empty when disabled, broken or
   * routed through a hub (the two then never handshake with each other, each does with the hub).
   */
  initiators: string[];
  /** How an `ok` pair's packets travel: straight between the two, or through the hub `hub_node_id`; null otherwise. */
  route: "direct" | "via_hub" | null;
  /** The hub a `via_hub` pair goes through; null otherwise. */
  hub_node_id: string | null;
}

/** The reason reported for a pair in which neither side can initiate. */
export const NO_INITIATOR_REASON =
  "neither node has a public address and listen port, so no side can initiate a handshake, and no hub is paired with both";

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
 * Whether a pair is direct: enabled, and a side can initiate (the other has a public endpoint).
 * Exactly {@link checkPairIntegrity}'s route `direct` (what renders each side as the other's
 * `[Peer]`), without building its answer: mesh writes ask it for every peer of a node.
 */
export function isDirectPair(a: PairSide, b: PairSide, enabled: boolean): boolean {
  return enabled && (hasPublicEndpoint(a) || hasPublicEndpoint(b));
}

/**
 * Checks whether a mesh pair can establish a tunnel, and how.
 *
 * A side can initiate toward the other when the OTHER side has both a public address and a
 * listen port (it then has an `Endpoint` in the initiator's config).
 *
 * @param a One side of the pair.
 * @param b The other side.
 * @param enabled Whether the pair is enabled.
 * @param hub The hub that forwards between the two when neither can initiate (the first hub
 *   paired with both: {@link HubGraph.hubFor}), or null when there is none.
 * @returns `disabled` (reason "pair disabled", no initiators, no route) when `enabled` is false;
 *   otherwise `ok` with reason null, route `direct` and the node_ids that can initiate (in the
 *   order a, b); `ok` with route `via_hub`, `hub_node_id` and no initiators when none can but a
 *   hub is given; else `broken` with {@link NO_INITIATOR_REASON}.
 */
export function checkPairIntegrity(a: PairSide, b: PairSide, enabled: boolean, hub: string | null = null): PairIntegrity {
  if (!enabled) return { status: "disabled", reason: "pair disabled", initiators: [], route: null, hub_node_id: null };
  const initiators: string[] = [];
  if (hasPublicEndpoint(b)) initiators.push(a.node_id);
  if (hasPublicEndpoint(a)) initiators.push(b.node_id);
  if (initiators.length > 0) return { status: "ok", reason: null, initiators, route: "direct", hub_node_id: null };
  if (hub !== null) return { status: "ok", reason: null, initiators, route: "via_hub", hub_node_id: hub };
  return { status: "broken", reason: NO_INITIATOR_REASON, initiators, route: null, hub_node_id: null };
}

/**
 * The hubs of one config, each with the nodes it has an enabled mesh pair with: what decides
 * which hub a pair of two nodes without a public endpoint goes through. Hubs are few (a handful
 * per config), so a lookup is O(hubs).
 */
export class HubGraph {
  /** Hub node_ids in code-unit order, each with its enabled partners. */
  readonly #hubs: ReadonlyArray<readonly [string, ReadonlySet<string>]>;

  /** @param hubs hub node_id → node_ids of the nodes it has an enabled pair with (any order) */
  constructor(hubs: Iterable<readonly [string, Iterable<string>]>) {
    this.#hubs = [...hubs].map(([id, partners]) => [id, new Set(partners)] as const).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  }

  /** A config without hubs. */
  static readonly EMPTY = new HubGraph([]);

  /** Number of hubs. */
  get size(): number {
    return this.#hubs.length;
  }

  /** True when `nodeId` is one of the hubs. */
  isHub(nodeId: string): boolean {
    return this.#hubs.some(([id]) => id === nodeId);
  }

  /**
   * The hub that forwards between `a` and `b`: the first hub (by node_id) with an enabled pair
   * with each of them, other than the two themselves; null when there is none.
   */
  hubFor(a: string, b: string): string | null {
    for (const [id, partners] of this.#hubs) {
      if (id !== a && id !== b && partners.has(a) && partners.has(b)) return id;
    }
    return null;
  }
}
