/**
 * Which nodes' rendered text a mesh write changes (DESIGN §3 Config versions, lazy staging),
 * worked out from the write alone: a node reaches another's config through a rendered pair
 * (a `[Peer]` block), or, for a pair neither side can initiate, through the hub that forwards
 * between them (an address in the hub's `AllowedIPs`; README "Hubs: meshes behind NAT").
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import type { HubGraph } from "../../domain/render.js";
import { requireNode } from "../node-lookup.js";
import { findConfig } from "../../store/configs.repository.js";
import type { Db } from "../../store/db.js";
import { listPairsOfNode, type PairOfNode } from "../../store/mesh-pairs.repository.js";
import { listPortForwards } from "../../store/port-forwards.repository.js";
import { forEachConfigPair } from "../../store/mesh-policy.js";
import { listRenderSides } from "../../store/render-inputs.repository.js";
import { isPairRendered, readHubGraph, viaHub, type RenderSide } from "../../store/render-job.js";
import type { MeshPairRow, NodeRow } from "../../store/schema.js";
import { renderBeforeAndAfter } from "../rendering.service.js";

/** Ids of the nodes whose configs list `node` as a peer (rendered pairs only). */
export async function renderedPeerIds(db: Db, node: RenderSide): Promise<string[]> {
  const pairs = await listPairsOfNode(db, node.node_id);
  return pairs.filter((p) => isPairRendered(node, p.peer, p.enabled === 1)).map((p) => p.peer.node_id);
}

/** Ids of the nodes that reach `node` through a hub of `hubs` (their text holds its address). */
export function routedPeerIds(node: RenderSide, pairs: readonly PairOfNode[], hubs: HubGraph): string[] {
  return pairs.filter((p) => viaHub(node, p.peer, p.enabled === 1, hubs) !== null).map((p) => p.peer.node_id);
}

/**
 * Nodes whose text changes when `node` is created with its pairs already inserted: the node
 * itself (first staging), every peer whose pair with it is rendered, and every node that reaches
 * it through a hub (`hubs`: the config's hubs after the write).
 */
export async function changedByNodeCreated(db: Db, node: RenderSide, hubs: HubGraph): Promise<string[]> {
  const pairs = await listPairsOfNode(db, node.node_id, () => nextTurn());
  // A turn between reading a full mesh's pairs and working through them (each ~O(nodes) of CPU).
  await nextTurn();
  // One pass, no intermediate arrays: a full mesh's create asks this of every node of the config.
  const rendered = [node.node_id];
  const routed: string[] = [];
  for (const p of pairs) {
    const enabled = p.enabled === 1;
    if (isPairRendered(node, p.peer, enabled)) rendered.push(p.peer.node_id);
    else if (viaHub(node, p.peer, enabled, hubs) !== null) routed.push(p.peer.node_id);
  }
  return [...rendered, ...routed];
}

/** The part of a node's `[Peer]` block in other configs that depends on the node (keepalive does not). */
function peerBlockKey(n: RenderSide): string {
  const endpoint = n.public_address !== null && n.public_address !== "" && n.listen_port !== null ? `${n.public_address}:${n.listen_port}` : "";
  return `${n.public_key}|${n.address}|${endpoint}|${n.name}`;
}

/**
 * Nodes whose text changes when a node's row changes from `before` to `after` (pairs and port
 * forwards unchanged; the config's hubs `hubsBefore` and `hubsAfter`, which differ when the
 * node's hub flag did): the node itself when its own rendering differs, each peer whose pair
 * starts or stops being rendered, keeps it while the node's peer block changed, or goes through
 * another hub (or none) than before.
 */
export async function changedByNodeUpdated(db: Db, before: NodeRow, after: NodeRow, hubsBefore: HubGraph, hubsAfter: HubGraph): Promise<string[]> {
  const config = await findConfig(db, after.config_id);
  if (!config) return [];
  const [pairs, forwards] = await Promise.all([listPairsOfNode(db, after.node_id, () => nextTurn()), listPortForwards(db, after.node_id)]);
  const changed: string[] = [];
  // Turns between the steps, each O(nodes of the config) of CPU: reading, rendering, comparing.
  await nextTurn();
  if (before.staged_config_version < 1) changed.push(after.node_id);
  else {
    const [textBefore, textAfter] = await renderBeforeAndAfter(config, [before, after], pairs, forwards, [hubsBefore, hubsAfter], () => nextTurn());
    if (textBefore !== textAfter) changed.push(after.node_id);
    await nextTurn();
  }
  const blockChanged = peerBlockKey(before) !== peerBlockKey(after);
  for (const p of pairs) {
    const enabled = p.enabled === 1;
    const was = isPairRendered(before, p.peer, enabled);
    const is = isPairRendered(after, p.peer, enabled);
    const hubBefore = viaHub(before, p.peer, enabled, hubsBefore);
    const hubAfter = viaHub(after, p.peer, enabled, hubsAfter);
    // A peer routed through a hub names this node's address in its hub peer's AllowedIPs.
    const rerouted = hubBefore !== hubAfter || (hubAfter !== null && before.address !== after.address);
    if (was !== is || (is && blockChanged) || rerouted) changed.push(p.peer.node_id);
  }
  return changed;
}

/**
 * Nodes whose text changes when a pair's enabled state goes from `before` to `after` (null: no
 * pair), the config's hubs going from `hubsBefore` to `hubsAfter` (they differ when a side is a
 * hub: the other side joins or leaves its partners): both sides when the pair starts or stops
 * being rendered or goes through another hub; and, when a side is a hub, the other side and each
 * of its partners whose pair with it now goes through another hub (or none).
 */
export async function changedByPair(
  db: Db,
  sides: readonly [RenderSide, RenderSide],
  before: boolean | null,
  after: boolean | null,
  hubsBefore: HubGraph,
  hubsAfter: HubGraph,
): Promise<string[]> {
  const [a, b] = sides;
  const was = before !== null && isPairRendered(a, b, before);
  const is = after !== null && isPairRendered(a, b, after);
  const routeBefore = before === null ? null : viaHub(a, b, before, hubsBefore);
  const routeAfter = after === null ? null : viaHub(a, b, after, hubsAfter);
  const changed = was === is && routeBefore === routeAfter ? [] : [a.node_id, b.node_id];
  for (const [hub, other] of [[a, b], [b, a]] as const) {
    if (hub.hub !== 1 || other.hub === 1) continue;
    for (const p of await listPairsOfNode(db, other.node_id)) {
      const enabled = p.enabled === 1;
      if (p.peer.node_id !== hub.node_id && viaHub(other, p.peer, enabled, hubsBefore) !== viaHub(other, p.peer, enabled, hubsAfter)) {
        changed.push(other.node_id, p.peer.node_id);
      }
    }
  }
  return changed;
}

/**
 * Nodes whose text changes because the config's hubs themselves changed (a hub created, deleted,
 * made or unmade) from `before` to `after`: the two sides of every enabled pair without a public
 * endpoint on either side whose hub differs, leaving out the pairs of `exclude` (the node the
 * write changed, whose pairs its caller works out). Reads every pair of the config once
 * (O(pairs): 499,500 for a 1,000-node full mesh, most of them generated from the policy), so only a write that changed the hubs asks.
 */
export async function changedByHubs(db: Db, configId: string, before: HubGraph, after: HubGraph, exclude: string): Promise<string[]> {
  const sides = new Map((await listRenderSides(db, configId)).map((n) => [n.node_id, n]));
  const changed = new Set<string>();
  await forEachConfigPair(db, configId, (aId, bId, enabled) => {
    const a = sides.get(aId);
    const b = sides.get(bId);
    if (a === undefined || b === undefined || aId === exclude || bId === exclude || enabled !== 1) return;
    if (viaHub(a, b, true, before) !== viaHub(a, b, true, after)) {
      changed.add(aId);
      changed.add(bId);
    }
  });
  return [...changed];
}

/**
 * Runs `remove`, which deletes `node` (with its pairs `pairs`), and answers the nodes whose text
 * changes: its peers, the nodes that reached it through a hub, and, when it was a hub, the nodes
 * of pairs it forwarded for that now go through another hub or none.
 */
export async function changedByNodeDeleted(db: Db, node: NodeRow, pairs: readonly PairOfNode[], remove: () => Promise<void>): Promise<string[]> {
  const hubsBefore = await readHubGraph(db, node.config_id);
  const changed = [...pairs.filter((p) => isPairRendered(node, p.peer, p.enabled === 1)).map((p) => p.peer.node_id), ...routedPeerIds(node, pairs, hubsBefore)];
  await remove();
  if (node.hub === 1) changed.push(...(await changedByHubs(db, node.config_id, hubsBefore, await readHubGraph(db, node.config_id), node.node_id)));
  return changed;
}

/**
 * Runs `write`, which takes `pair` to `enabled` (null: deletes it), and works out the nodes whose
 * text changes ({@link changedByPair}); also answers the config's hubs after the write.
 * @throws AppError NOT_FOUND when a side of the pair is not a node of `configId`
 */
export async function pairWrite(db: Db, configId: string, pair: MeshPairRow, write: () => Promise<void>, enabled: boolean | null): Promise<{ changed: string[]; after: HubGraph }> {
  const [a, b] = await Promise.all([requireNode(db, configId, pair.node_a), requireNode(db, configId, pair.node_b)]);
  const before = await readHubGraph(db, configId);
  await write();
  const after = a.hub === 1 || b.hub === 1 ? await readHubGraph(db, configId) : before;
  return { changed: await changedByPair(db, [a, b], pair.enabled === 1, enabled, before, after), after };
}
