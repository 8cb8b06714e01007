import { AppError } from "../../errors.js";
import { PAIR_PAGE_LIMIT_MAX } from "../../protocol/rest.schema.js";
import type { Store } from "../../store/db.js";
import { hubPartners } from "../../store/mesh-pairs.repository.js";
import { pairPage } from "../mesh/mesh-views.js";

/** A mesh pair's integrity now (spec §6.5 `workspace.connections[*]`), as the alert rules compare it. */
export interface PairIntegrityState {
  pair_id: string;
  node_a: string;
  node_b: string;
  status: "ok" | "broken" | "disabled";
  reason: string | null;
}

/**
 * The pairs `nodes` are a side of, each once, with their integrity: read page by page the way
 * the pairs list answers them (`pairPage`: O(pairs of the node)). A node gone meanwhile is skipped.
 */
export async function pairsOf(store: Store, configId: string, nodes: ReadonlySet<string>): Promise<PairIntegrityState[]> {
  const seen = new Map<string, PairIntegrityState>();
  for (const nodeId of nodes) {
    let cursor: string | undefined;
    do {
      let page;
      try {
        page = await pairPage(store.db, configId, { limit: PAIR_PAGE_LIMIT_MAX, node_id: nodeId, ...(cursor === undefined ? {} : { cursor }) });
      } catch (err) {
        if (err instanceof AppError && err.code === "NOT_FOUND") break; // deleted meanwhile: its pairs went with it
        throw err;
      }
      for (const p of page.mesh_pairs) seen.set(p.pair_id, { pair_id: p.pair_id, node_a: p.node_a, node_b: p.node_b, status: p.integrity.status, reason: p.integrity.reason });
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }
  return [...seen.values()];
}

/**
 * Every pair of a config that can be broken now, and the pairs of the nodes named in `alsoOf`
 * (the sides of its open pair alerts), with their integrity: what a full check compares with the
 * open alerts (at start-up, when a pair rule starts to count). Only a pair of two nodes without a
 * public endpoint can be broken, so only those nodes' pairs are read (`privateNodes`, from one
 * statement over the nodes); none when there are fewer than two, or when one hub is paired with
 * all of them (it forwards between any two): a mesh of public nodes, or of NAT'd nodes behind a
 * hub, costs O(nodes + hubs × nodes), never its n²/2 pairs.
 */
export async function pairsToRecheck(store: Store, configId: string, privateNodes: readonly string[], alsoOf: readonly string[]): Promise<PairIntegrityState[]> {
  const pairedWithAll = (partners: readonly string[]) => {
    const set = new Set(partners);
    return privateNodes.every((n) => set.has(n));
  };
  const canBreak = privateNodes.length >= 2 && !(await hubPartners(store.db, configId)).some(([, partners]) => pairedWithAll(partners));
  return pairsOf(store, configId, new Set([...(canBreak ? privateNodes : []), ...alsoOf]));
}
