/**
 * Which nodes' rendered text a mesh write changes (DESIGN §3 Config versions, lazy staging),
 * worked out from the write alone: a node reaches another's config only through a rendered pair.
 */
import { findConfig } from "../../store/configs.repository.js";
import type { Db } from "../../store/db.js";
import { listPairsOfNode } from "../../store/mesh-pairs.repository.js";
import { listPortForwards } from "../../store/port-forwards.repository.js";
import { isPairRendered, type RenderSide } from "../../store/render-job.js";
import type { NodeRow } from "../../store/schema.js";
import { renderWith } from "../rendering.service.js";

/** Ids of the nodes whose configs list `node` as a peer (rendered pairs only). */
export async function renderedPeerIds(db: Db, node: RenderSide): Promise<string[]> {
  const pairs = await listPairsOfNode(db, node.node_id);
  return pairs.filter((p) => isPairRendered(node, p.peer, p.enabled === 1)).map((p) => p.peer.node_id);
}

/**
 * Nodes whose text changes when `node` is created with its pairs already inserted: the node
 * itself (first staging) and every peer whose pair with it is rendered.
 */
export async function changedByNodeCreated(db: Db, node: RenderSide): Promise<string[]> {
  return [node.node_id, ...(await renderedPeerIds(db, node))];
}

/** The part of a node's `[Peer]` block in other configs that depends on the node (keepalive does not). */
function peerBlockKey(n: RenderSide): string {
  const endpoint = n.public_address !== null && n.public_address !== "" && n.listen_port !== null ? `${n.public_address}:${n.listen_port}` : "";
  return `${n.public_key}|${n.address}|${endpoint}`;
}

/**
 * Nodes whose text changes when a node's row changes from `before` to `after` (pairs and port
 * forwards unchanged): the node itself when its own rendering differs, and each peer whose pair
 * starts or stops being rendered, or that keeps it while the node's peer block changed.
 */
export async function changedByNodeUpdated(db: Db, before: NodeRow, after: NodeRow): Promise<string[]> {
  const config = await findConfig(db, after.config_id);
  if (!config) return [];
  const [pairs, forwards] = await Promise.all([listPairsOfNode(db, after.node_id), listPortForwards(db, after.node_id)]);
  const changed: string[] = [];
  if (before.staged_config_version < 1 || renderWith(config, before, pairs, forwards) !== renderWith(config, after, pairs, forwards)) {
    changed.push(after.node_id);
  }
  const blockChanged = peerBlockKey(before) !== peerBlockKey(after);
  for (const p of pairs) {
    const was = isPairRendered(before, p.peer, p.enabled === 1);
    const is = isPairRendered(after, p.peer, p.enabled === 1);
    if (was !== is || (is && blockChanged)) changed.push(p.peer.node_id);
  }
  return changed;
}

/** Nodes whose text changes when a pair's enabled state goes from `before` to `after` (null: no pair). */
export function changedByPair(a: RenderSide, b: RenderSide, before: boolean | null, after: boolean | null): string[] {
  const was = before !== null && isPairRendered(a, b, before);
  const is = after !== null && isPairRendered(a, b, after);
  return was === is ? [] : [a.node_id, b.node_id];
}
