import type { Db } from "./connection.js";
import type { NodePeerReportsTable } from "./schema.js";

/**
 * Repository of measured link health (docs/links.md): each node's latest peer report
 * (`node_peer_reports`, migration 0023) and the node fields the link matrix names peers by.
 */

export type PeerReportRow = NodePeerReportsTable;

/** Stores a node's report, replacing the one before it. */
export async function putPeerReport(db: Db, row: PeerReportRow): Promise<void> {
  await db
    .insertInto("node_peer_reports")
    .values(row)
    .onConflict((oc) =>
      oc.column("node_id").doUpdateSet({
        config_id: row.config_id,
        received_at: row.received_at,
        host_time: row.host_time,
        running: row.running,
        interface_name: row.interface_name,
        tunnel_protocol: row.tunnel_protocol,
        public_key: row.public_key,
        listen_port: row.listen_port,
        peers_json: row.peers_json,
      }),
    )
    .execute();
}

/** Every stored report of a config's nodes, keyed by node id. O(nodes of the config). */
export async function listPeerReports(db: Db, configId: string): Promise<Map<string, PeerReportRow>> {
  const rows = await db.selectFrom("node_peer_reports").selectAll().where("config_id", "=", configId).execute();
  return new Map(rows.map((r) => [r.node_id, r]));
}

/** One node's stored report; undefined before its first. */
export async function findPeerReport(db: Db, nodeId: string): Promise<PeerReportRow | undefined> {
  return db.selectFrom("node_peer_reports").selectAll().where("node_id", "=", nodeId).executeTakeFirst();
}

/** A node of a config as the link matrix names it: never its private key. */
export interface LinkNodeRow {
  node_id: string;
  name: string;
  public_key: string;
  mode: string;
}

/** The nodes of a config with their public keys, in id order. */
export async function listLinkNodes(db: Db, configId: string): Promise<LinkNodeRow[]> {
  return db.selectFrom("nodes").select(["node_id", "name", "public_key", "mode"]).where("config_id", "=", configId).orderBy("node_id").execute();
}
