/** The node, tag and mesh-pair views of the mesh service's reads (spec §6.5 rule 7: one derivation). */
import { meshPairCursorSchema, PAIR_PAGE_LIMIT_MAX } from "../../protocol/rest.schema.js";
import type { Db, Store } from "../../store/db.js";
import * as pairsRepo from "../../store/mesh-pairs.repository.js";
import * as nodeListRepo from "../../store/node-list.repository.js";
import * as nodesRepo from "../../store/nodes.repository.js";
import { readHubGraph } from "../../store/render-job.js";
import type { NodeRow } from "../../store/schema.js";
import { decodeCursor, encodeCursor } from "../list-cursor.js";
import { requireConfig, requireNode } from "../node-lookup.js";
import { meshPairView, nodeView, type MeshPairView, type NodeView } from "../views.js";
import type { MeshPairListQuery, TagView } from "./mesh-types.js";

/**
 * Every node's view of a config, in list order (the workspace read: two raw statements, run in
 * {@link Store.read}, never in the middle of another caller's open transaction).
 */
export function configNodeViews(store: Store, configId: string, mqttEnabled: boolean): Promise<NodeView[]> {
  return store.read((conn) => {
    const tags = nodeListRepo.configTagsByNode(conn, configId);
    return nodeListRepo.mapConfigNodes(conn, configId, (node, client) => nodeView(node, tags.get(node.node_id) ?? [], client, mqttEnabled));
  });
}

/** One node's view: reads that node's tags and client state only (O(1) in the config's size). */
export async function nodeViewOf(db: Db, node: NodeRow, mqttEnabled: boolean): Promise<NodeView> {
  const [tags, client] = await Promise.all([nodesRepo.listTagsOfNode(db, node.node_id), nodesRepo.findClientState(db, node.node_id)]);
  return nodeView(node, tags, client, mqttEnabled);
}

/** The tags of some node views, each with the nodes carrying it, sorted by tag. */
export function tagViews(nodes: readonly NodeView[]): TagView[] {
  const out = new Map<string, string[]>();
  for (const n of nodes) {
    for (const t of n.tags) {
      const ids = out.get(t);
      if (ids === undefined) out.set(t, [n.node_id]);
      else ids.push(n.node_id);
    }
  }
  return [...out.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([tag, node_ids]) => ({ tag, node_ids }));
}

/**
 * One page of a config's mesh pairs with their connection integrity (spec §6.5), in creation
 * order (`created_at`, `pair_id`); with `node_id` only that node's pairs. Reads the page's rows
 * and their sides only: O(page), never the config's n²/2 pairs.
 * @throws AppError NOT_FOUND (config, or the `node_id` in it), INVALID_CURSOR (not this list's cursor)
 */
export async function pairPage(db: Db, configId: string, query: MeshPairListQuery = { limit: PAIR_PAGE_LIMIT_MAX }): Promise<{ mesh_pairs: MeshPairView[]; next_cursor: string | null }> {
  await requireConfig(db, configId);
  if (query.node_id !== undefined) await requireNode(db, configId, query.node_id);
  const cursor = decodeCursor(meshPairCursorSchema, query.cursor, (p) => p.c === configId && p.n === query.node_id);
  const rows = await pairsRepo.pairPage(db, configId, {
    nodeId: query.node_id,
    after: cursor && { created_at: cursor.at, pair_id: cursor.id },
    limit: query.limit,
  });
  const page = rows.slice(0, query.limit);
  const sides = await pairsRepo.pairSides(db, page.flatMap((p) => [p.node_a, p.node_b]));
  // The config's hubs decide the route of pairs neither side can initiate.
  const hubs = page.length === 0 ? undefined : await readHubGraph(db, configId);
  const last = page[page.length - 1];
  const more = rows.length > query.limit && last !== undefined;
  return {
    mesh_pairs: page.map((p) => meshPairView(p, sides, hubs)),
    next_cursor: more ? encodeCursor({ l: "mesh_pairs", c: configId, ...(query.node_id === undefined ? {} : { n: query.node_id }), at: last.created_at, id: last.pair_id }) : null,
  };
}
