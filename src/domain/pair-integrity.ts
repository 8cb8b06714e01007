/**
 * The connection integrity of a mesh pair (spec §6.5 `workspace.connections[*]`, the broken-link
 * indicators): whether either side can initiate a handshake, which needs the other side to be
 * reachable at a public address and listen port (it then has an `Endpoint` in the initiator's
 * config). Pure.
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
  /** node_ids that can initiate a handshake toward the other side; empty when disabled. */
  initiators: string[];
}

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
