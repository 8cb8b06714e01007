import { setImmediate as nextTurn } from "node:timers/promises";
import { sql, type SqlBool } from "kysely";
import type { Db } from "./connection.js";
import { insertClientState } from "./node-client-state.repository.js";
import type { ConfigRow, NewNodeRow, NodeClientStateRow, NodeRow, NodeUpdate } from "./schema.js";

/** Repository of `nodes` and `node_tags`, and the client-state reads of node views (writes: `node-client-state.repository.ts`). */

/**
 * The columns of a node that its views show, in the order of the covering index `nodes_views`
 * (migration 0012): never its private key (its config text is in `node_staged_texts`). A whole
 * config's are read from that index alone (`mapConfigNodes`, node-list.repository.ts).
 */
export const NODE_VIEW_COLUMNS = [
  "node_id",
  "config_id",
  "name",
  "mode",
  "interface_name",
  "address",
  "public_address",
  "listen_port",
  "public_key",
  "staged_config_version",
  "staged_config_sha256",
  "confirmed_config_version",
  "confirmed_config_sha256",
  "created_at",
  "updated_at",
  "hub",
] as const satisfies ReadonlyArray<Exclude<keyof NodeRow, "private_key">>;

/** Inserts a node and its client-state row; a row without `mesh_seq` gets the store's next one. */
export async function insertNode(db: Db, row: NewNodeRow, now: number): Promise<void> {
  await db
    .insertInto("nodes")
    .values({ ...row, mesh_seq: row.mesh_seq ?? sql<number>`(SELECT coalesce(max(mesh_seq), 0) + 1 FROM nodes)` })
    .execute();
  await insertClientState(db, row.node_id, now);
}

export async function findNode(db: Db, configId: string, nodeId: string): Promise<NodeRow | undefined> {
  return db
    .selectFrom("nodes")
    .selectAll()
    .where("config_id", "=", configId)
    .where("node_id", "=", nodeId)
    .executeTakeFirst();
}

export async function findNodeByName(db: Db, configId: string, name: string): Promise<NodeRow | undefined> {
  return db.selectFrom("nodes").selectAll().where("config_id", "=", configId).where("name", "=", name).executeTakeFirst();
}

export async function listNodes(db: Db, configId: string): Promise<NodeRow[]> {
  return db.selectFrom("nodes").selectAll().where("config_id", "=", configId).orderBy("created_at").orderBy("node_id").execute();
}

export async function listNodeAddresses(db: Db, configId: string): Promise<string[]> {
  const rows = await db.selectFrom("nodes").select("address").where("config_id", "=", configId).execute();
  return rows.map((r) => r.address);
}

export async function countNodes(db: Db, configId: string): Promise<number> {
  const row = await db
    .selectFrom("nodes")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("config_id", "=", configId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function updateNode(db: Db, nodeId: string, patch: NodeUpdate): Promise<void> {
  await db.updateTable("nodes").set(patch).where("node_id", "=", nodeId).execute();
}

export async function deleteNode(db: Db, nodeId: string): Promise<void> {
  await db.deleteFrom("nodes").where("node_id", "=", nodeId).execute();
}

export async function replaceNodeTags(db: Db, nodeId: string, tags: readonly string[]): Promise<void> {
  await db.deleteFrom("node_tags").where("node_id", "=", nodeId).execute();
  if (tags.length > 0) {
    await db
      .insertInto("node_tags")
      .values(tags.map((tag) => ({ node_id: nodeId, tag })))
      .execute();
  }
}

/** Client state of every node of a config: node_id → row. */
export async function listClientStates(db: Db, configId: string): Promise<Map<string, NodeClientStateRow>> {
  const rows = await db
    .selectFrom("node_client_state")
    .innerJoin("nodes", "nodes.node_id", "node_client_state.node_id")
    .selectAll("node_client_state")
    .where("nodes.config_id", "=", configId)
    .execute();
  return new Map(rows.map((r) => [r.node_id, r]));
}

/** What a detect command carries for a node (spec §3.1 detect): its interface and its config's protocol. */
export async function findDetectTarget(
  db: Db,
  nodeId: string,
): Promise<{ interface_name: NodeRow["interface_name"]; tunnel_protocol: ConfigRow["tunnel_protocol"] } | undefined> {
  return db
    .selectFrom("nodes")
    .innerJoin("configs", "configs.config_id", "nodes.config_id")
    .select(["nodes.interface_name", "configs.tunnel_protocol"])
    .where("nodes.node_id", "=", nodeId)
    .executeTakeFirst();
}

/**
 * The node with this id, in whichever config (a redeemed bind token names only its node).
 * @throws NoResultError (Kysely) when no such node exists
 */
export async function getNodeById(db: Db, nodeId: string): Promise<NodeRow> {
  return db.selectFrom("nodes").selectAll().where("node_id", "=", nodeId).executeTakeFirstOrThrow();
}

/**
 * Marks nodes' staged configs as changed without rendering them (lazy staging):
 * `staged_config_version + 1`, `staged_config_sha256` NULL until rendered on demand
 * (`materializeStaged`). The old text stays in `node_staged_texts`, stale, until the next
 * rendering replaces it: freeing ~100 KB of pages per node here would hold the writer's
 * transaction (migration 0013). One UPDATE per 500 ids, a turn of the event loop between two
 * (a full mesh's write bumps every node: at 5,000 nodes one statement blocked ~25 ms; the
 * transaction holds the connection meanwhile, so nothing else writes in between).
 */
export async function bumpStagedVersions(db: Db, nodeIds: readonly string[], now: number): Promise<void> {
  for (let i = 0; i < nodeIds.length; i += 500) {
    if (i > 0) await nextTurn();
    await db
      .updateTable("nodes")
      .set((eb) => ({ staged_config_version: eb("staged_config_version", "+", 1), staged_config_sha256: null, updated_at: now }))
      .where(idIn(nodeIds.slice(i, i + 500)))
      .execute();
  }
}

/**
 * `node_id IN (…ids)` as one JSON text bound once (`json_each`), not one parameter per id: a
 * full mesh's write names every node of the config, and a list of thousands of parameters costs
 * the query builder more than the statement does.
 */
function idIn(ids: readonly string[]) {
  return sql<SqlBool>`node_id IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`;
}

/** Marks every node of a config as changed, like {@link bumpStagedVersions}, in one UPDATE. */
export async function bumpStagedVersionsOfConfig(db: Db, configId: string, now: number): Promise<string[]> {
  const rows = await db
    .updateTable("nodes")
    .set((eb) => ({ staged_config_version: eb("staged_config_version", "+", 1), staged_config_sha256: null, updated_at: now }))
    .where("config_id", "=", configId)
    .returning("node_id")
    .execute();
  return rows.map((r) => r.node_id);
}

export async function findNodeById(db: Db, nodeId: string): Promise<NodeRow | undefined> {
  return db.selectFrom("nodes").selectAll().where("node_id", "=", nodeId).executeTakeFirst();
}

/**
 * The ids of the dynamic nodes among `nodeIds` (one query per 500 ids, a turn of the event loop
 * between two; order unspecified). Ids only: a protocol switch asks this of every node of a
 * config inside its write transaction.
 */
export async function listDynamicNodeIdsAmong(db: Db, nodeIds: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < nodeIds.length; i += 500) {
    if (i > 0) await nextTurn();
    const rows = await db.selectFrom("nodes").select("node_id").where(idIn(nodeIds.slice(i, i + 500))).where("mode", "=", "dynamic").execute();
    for (const r of rows) out.push(r.node_id);
  }
  return out;
}

/** The nodes among `nodeIds` that exist (one query per 500 ids; order unspecified). */
export async function listNodesAmong(db: Db, nodeIds: readonly string[]): Promise<NodeRow[]> {
  const out: NodeRow[] = [];
  for (let i = 0; i < nodeIds.length; i += 500) {
    out.push(...(await db.selectFrom("nodes").selectAll().where("node_id", "in", nodeIds.slice(i, i + 500)).execute()));
  }
  return out;
}

/**
 * Stores the rendering of a node's staged config, only if the node is still at `version` with
 * no rendering or with this one (a write that bumped it meanwhile wins: the text would be
 * stale). The text goes first, so a node's sha is never set before its text is there
 * ({@link putStagedText}).
 * @returns true when stored
 */
export async function storeStagedRendering(db: Db, nodeId: string, version: number, sha: string, text: string): Promise<boolean> {
  await putStagedText(db, nodeId, version, sha, text);
  const res = await db
    .updateTable("nodes")
    .set({ staged_config_sha256: sha })
    .where("node_id", "=", nodeId)
    .where("staged_config_version", "=", version)
    .where((eb) => eb.or([eb("staged_config_sha256", "is", null), eb("staged_config_sha256", "=", sha)]))
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/**
 * Writes a node's rendered text labelled with the version and sha it was rendered for
 * (migration 0013), replacing its older one; a text of an older version than the stored one is
 * dropped (versions only move forward). Write it before the node's sha.
 */
export async function putStagedText(db: Db, nodeId: string, version: number, sha: string, text: string): Promise<void> {
  await db
    .insertInto("node_staged_texts")
    .values({ node_id: nodeId, config_version: version, config_sha256: sha, config_text: text })
    .onConflict((oc) =>
      oc
        .column("node_id")
        .doUpdateSet((eb) => ({ config_version: eb.ref("excluded.config_version"), config_sha256: eb.ref("excluded.config_sha256"), config_text: eb.ref("excluded.config_text") }))
        .where("excluded.config_version", ">=", (eb) => eb.ref("node_staged_texts.config_version")),
    )
    .execute();
}

/**
 * A node's staged text, if the stored one is the rendering of this version and sha (a stale or
 * missing text answers undefined: render it again).
 */
export async function findStagedText(db: Db, nodeId: string, version: number, sha: string): Promise<string | undefined> {
  const row = await db
    .selectFrom("node_staged_texts")
    .select("config_text")
    .where("node_id", "=", nodeId)
    .where("config_version", "=", version)
    .where("config_sha256", "=", sha)
    .executeTakeFirst();
  return row?.config_text;
}

/** The node ids of a config, in `listNodes` order. */
export async function listNodeIds(db: Db, configId: string): Promise<string[]> {
  const rows = await db.selectFrom("nodes").select("node_id").where("config_id", "=", configId).orderBy("created_at").orderBy("node_id").execute();
  return rows.map((r) => r.node_id);
}

/** One node's tags, sorted (the per-node form of `configTagsByNode`, node-list.repository.ts). */
export async function listTagsOfNode(db: Db, nodeId: string): Promise<string[]> {
  const rows = await db.selectFrom("node_tags").select("tag").where("node_id", "=", nodeId).orderBy("tag").execute();
  return rows.map((r) => r.tag);
}

/** One node's client state row (the per-node form of {@link listClientStates}). */
export async function findClientState(db: Db, nodeId: string): Promise<NodeClientStateRow | undefined> {
  return db.selectFrom("node_client_state").selectAll().where("node_id", "=", nodeId).executeTakeFirst();
}

/** Dynamic nodes staged but not rendered yet (`staged_config_version >= 1`, no sha): config_id and node_id. */
export async function listUnrenderedDynamicNodes(db: Db): Promise<Array<{ config_id: string; node_id: string }>> {
  return db
    .selectFrom("nodes")
    .select(["config_id", "node_id"])
    .where("mode", "=", "dynamic")
    .where("staged_config_sha256", "is", null)
    .where("staged_config_version", ">=", 1)
    .orderBy("config_id")
    .execute();
}
