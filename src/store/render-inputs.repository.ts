/**
 * The inputs of rendering many nodes of one config at once (src/store/staging.ts
 * `renderDeferred`, e.g. a protocol switch of a 1,000-node full mesh). Each read is one
 * statement per 500 ids and never reads a config text (texts are in `node_staged_texts`,
 * migration 0013).
 */
import type { Db } from "./connection.js";
import type { NodeRow, PortForwardRow } from "./schema.js";

/** What rendering and staging need of a node: its render fields, key, mode and staged version/sha. */
export type RenderSideRow = Pick<
  NodeRow,
  "node_id" | "config_id" | "name" | "mode" | "hub" | "address" | "public_address" | "listen_port" | "private_key" | "public_key" | "staged_config_version" | "staged_config_sha256"
>;

const SIDE_COLUMNS = [
  "node_id",
  "config_id",
  "name",
  "mode",
  "hub",
  "address",
  "public_address",
  "listen_port",
  "private_key",
  "public_key",
  "staged_config_version",
  "staged_config_sha256",
] as const;

/** Every node of a config as a {@link RenderSideRow}, in `listNodes` order (`created_at`, `node_id`). O(nodes of the config). */
export async function listRenderSides(db: Db, configId: string): Promise<RenderSideRow[]> {
  return db.selectFrom("nodes").select(SIDE_COLUMNS).where("config_id", "=", configId).orderBy("created_at").orderBy("node_id").execute();
}

/** The nodes among `nodeIds` that belong to `configId`, as {@link RenderSideRow}s (order unspecified). */
export async function listRenderSidesAmong(db: Db, configId: string, nodeIds: readonly string[]): Promise<RenderSideRow[]> {
  const out: RenderSideRow[] = [];
  for (let i = 0; i < nodeIds.length; i += 500) {
    out.push(...(await db.selectFrom("nodes").select(SIDE_COLUMNS).where("node_id", "in", nodeIds.slice(i, i + 500)).where("config_id", "=", configId).execute()));
  }
  return out;
}

/** The port forwards of the nodes among `nodeIds`: node_id → rows (nodes without any are absent). */
export async function listPortForwardsAmong(db: Db, nodeIds: readonly string[]): Promise<Map<string, PortForwardRow[]>> {
  const out = new Map<string, PortForwardRow[]>();
  for (let i = 0; i < nodeIds.length; i += 500) {
    const rows = await db.selectFrom("port_forwards").selectAll().where("node_id", "in", nodeIds.slice(i, i + 500)).orderBy("protocol").orderBy("listen_port").execute();
    for (const r of rows) out.set(r.node_id, [...(out.get(r.node_id) ?? []), r]);
  }
  return out;
}
