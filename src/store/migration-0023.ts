/**
 * Migration 0023 (frozen once released, like every migration): the latest peer report of each
 * dynamic node's host (docs/links.md): what its interface's dump said, one row per node,
 * replaced by each newer report and gone with the node. Handshake times stay the host's unix
 * seconds beside the host's clock at the dump (`host_time`), so ages never depend on skew.
 */
import { sql, type Kysely, type Migration } from "kysely";

export const nodePeerReports: Migration = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on today's types
  async up(db: Kysely<any>): Promise<void> {
    await sql`CREATE TABLE node_peer_reports (
      node_id TEXT PRIMARY KEY NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
      config_id TEXT NOT NULL,
      received_at INTEGER NOT NULL,
      host_time INTEGER NOT NULL,
      running INTEGER NOT NULL CHECK (running IN (0, 1)),
      interface_name TEXT NOT NULL,
      tunnel_protocol TEXT NOT NULL,
      public_key TEXT,
      listen_port INTEGER,
      peers_json TEXT NOT NULL
    ) STRICT`.execute(db);
    await sql`CREATE INDEX node_peer_reports_config ON node_peer_reports (config_id)`.execute(db);
  },
};
