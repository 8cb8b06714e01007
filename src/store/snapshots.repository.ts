import SQLite from "better-sqlite3";
import { sqliteOf, type Connection } from "./connection.js";
import type { Store } from "./db.js";

/**
 * The SQLite work of snapshots (spec §2.4; docs/history/decisions-2026.md "Bulk packages, snapshots and
 * MCP"): copying the live database, scrubbing the copy, reading an untrusted copy read-only,
 * and the restore's one replacing transaction. The service (`src/services/backups.service.ts`,
 * `snapshots.ts`, `snapshot-rows.ts`) orders, validates and locks; every statement is here.
 */

/**
 * Tables a snapshot carries and a restore replaces, parents before children (foreign-key order).
 * `settings_kv` (broker secrets), `users` (people and password hashes), `admin_sessions`, `download_tokens`,
 * `bind_tokens` and `broker_credentials` (sealed broker passwords) are not among them: they are
 * emptied in every snapshot and a restore keeps the live ones (bind tokens are dropped, node
 * config tokens revoked; see {@link replaceDataFromSnapshot}).
 */
export const DATA_TABLES = [
  "configs",
  "nodes",
  "node_staged_texts",
  "node_tags",
  "node_client_state",
  "mesh_pairs",
  "mesh_pair_removals",
  "port_forwards",
  "control_logs",
] as const;

/**
 * The migration that created each data table not made by the first one (`0001_init`). A
 * snapshot from a server before that migration has no such table yet: it is required only of
 * snapshots whose migrations include it, and migrating the imported copy creates it
 * (docs/history/decisions-2026.md "Snapshots from before a table existed"). A test derives this map from the
 * migrations themselves.
 */
export const DATA_TABLE_SINCE: Readonly<Partial<Record<(typeof DATA_TABLES)[number], string>>> = {
  node_staged_texts: "0013_node_staged_texts",
  mesh_pair_removals: "0016_mesh_pair_policy",
};

/**
 * Tables whose rows never leave the service inside a snapshot. `node_transitions` (the nodes'
 * flight recorder) is history of this service's live nodes, not data a restore brings back: it
 * is emptied in exports with `node_state_values` (its interned state values), and each node's
 * `node_client_state.transition_head` is cleared with it ({@link scrubDatabaseCopy}); a restore
 * clears the live rows with the nodes they belong to (the client-state rows by foreign-key
 * cascade, their rows by that table's delete trigger; docs/history/decisions-2026.md "flight
 * recorder", "recorder cost, compact rows"). `node_config_downloads` (what each node's config
 * download last served) is history of this service's downloads too: a restored node has not
 * been downloaded from it, and its rows go with the nodes by foreign-key cascade. `users`,
 * `access_tokens` and `user_oidc_links` (the people who sign in, their roles, password and token hashes) belong to this installation: a snapshot
 * restored elsewhere must not bring another team's accounts, and a restore keeps the live ones.
 * `audit_log` and `audit_chain` are this installation's history (README "Audit log"): a restore
 * must not rewrite who did what here, and the restore itself is an entry of the live log.
 * Alert channels (their secrets sealed under this installation's key file) and their deliveries
 * belong to this installation too: a copy elsewhere must not start alerting someone's receivers;
 * so do the alert rules that name them, their open alerts and the notices waiting to be grouped.
 * `node_peer_reports` are measurements of hosts as they ran then, not part of the mesh.
 */
export const SCRUBBED_TABLES = [
  "settings_kv",
  "users",
  "access_tokens",
  "user_oidc_links",
  "admin_sessions",
  "download_tokens",
  "bind_tokens",
  "broker_credentials",
  "node_transitions",
  "node_state_values",
  "node_config_downloads",
  "audit_log",
  "audit_chain",
  "alert_notices",
  "alert_open",
  "alert_rule_channels",
  "alert_rules",
  "alert_delivery_attempts",
  "alert_deliveries",
  "alert_channels",
  "node_peer_reports",
] as const;

/**
 * Writes a consistent copy of the live database to `file` (`VACUUM INTO`), holding the
 * connection so that no request transaction is open meanwhile.
 * @param file path of a file that does not exist yet
 */
export async function copyDatabaseTo(store: Store, file: string): Promise<void> {
  await store.read((conn) => {
    sqliteOf(conn).prepare("VACUUM INTO ?").run(file);
  });
}

/**
 * Empties the tables of {@link SCRUBBED_TABLES} in a fresh database copy and compacts it, so no
 * secret, session or token leaves in an export; the copy is left in rollback-journal mode.
 */
export function scrubDatabaseCopy(file: string): void {
  const db = new SQLite(file, { fileMustExist: true });
  try {
    db.pragma("journal_mode = DELETE");
    db.pragma("secure_delete = ON");
    db.transaction(() => {
      for (const table of SCRUBBED_TABLES) db.prepare(`DELETE FROM "${table}"`).run();
      // The flight recorder's rows are gone: no node names a newest one.
      db.prepare("UPDATE node_client_state SET transition_head = NULL").run();
    })();
    db.exec("VACUUM");
  } finally {
    db.close();
  }
}

/** CREATE TABLE text of every table of a database (`schema`: "main" or an attached name), by name. */
export function tableDefinitions(conn: Connection, schema = "main"): Map<string, string> {
  const db = sqliteOf(conn);
  const rows = db
    .prepare(`SELECT name, sql FROM "${schema}".sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
    .all() as Array<{ name: string; sql: string | null }>;
  return new Map(rows.map((r) => [r.name, r.sql ?? ""]));
}

/** CREATE TABLE texts of a database file, opened read-only for this read alone. */
export function fileTableDefinitions(file: string): Map<string, string> {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    return tableDefinitions(db);
  } finally {
    db.close();
  }
}

/** An untrusted database file opened read-only with `trusted_schema = OFF` ({@link openSnapshotReader}). */
export interface SnapshotReader {
  /** `PRAGMA integrity_check` rows: `["ok"]` for a sound file. */
  integrityCheck(): string[];
  /** CREATE TABLE text of every table, by name. */
  tableDefinitions(): Map<string, string>;
  /** Names of the applied migrations (`kysely_migration`), sorted; throws when the table is missing. */
  appliedMigrations(): string[];
  /** Number of rows `PRAGMA foreign_key_check` reports. */
  foreignKeyViolations(): number;
  /** Every row of a table in rowid order, read lazily (the statement stays open while iterated). */
  rows(table: string): Iterable<Record<string, unknown>>;
  close(): void;
}

/**
 * Opens a snapshot's database file read-only with an untrusted schema (no function of its
 * schema runs). Throws what better-sqlite3 throws when the file is not a database.
 */
export function openSnapshotReader(file: string): SnapshotReader {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    db.pragma("trusted_schema = OFF");
  } catch (err) {
    db.close();
    throw err;
  }
  return {
    integrityCheck: () => (db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check),
    tableDefinitions: () => tableDefinitions(db),
    appliedMigrations: () =>
      (db.prepare("SELECT name FROM kysely_migration ORDER BY name").all() as Array<{ name: unknown }>).map((r) => String(r.name)),
    foreignKeyViolations: () => (db.pragma("foreign_key_check") as unknown[]).length,
    rows: (table) => db.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).iterate() as Iterable<Record<string, unknown>>,
    close: () => db.close(),
  };
}

/** A node's staged config text of a snapshot copy, for nodes with a stored sha. */
export interface StagedConfigText {
  node_id: string;
  /** The text stored for the node's staged version (whatever sha it is labelled with), or null. */
  staged_config_text: string | null;
}

/** Nodes of a database whose staged config has a stored sha256, with their staged text. */
export function listStagedConfigTexts(conn: Connection): StagedConfigText[] {
  const sqlite = sqliteOf(conn);
  return sqlite
    .prepare(
      `SELECT n.node_id, t.config_text AS staged_config_text FROM nodes n
       LEFT JOIN node_staged_texts t ON t.node_id = n.node_id AND t.config_version = n.staged_config_version
       WHERE n.staged_config_sha256 IS NOT NULL`,
    )
    .all() as StagedConfigText[];
}

/** Every config id of a database, sorted. */
export function listConfigIds(conn: Connection): string[] {
  const sqlite = sqliteOf(conn);
  return (sqlite.prepare("SELECT config_id FROM configs ORDER BY config_id").all() as Array<{ config_id: string }>).map((r) => r.config_id);
}

/** Clears every node's confirmed config (`confirmed_config_version`/`_sha256` to NULL). */
export function clearConfirmedConfigs(conn: Connection): void {
  const sqlite = sqliteOf(conn);
  sqlite.prepare("UPDATE nodes SET confirmed_config_version = NULL, confirmed_config_sha256 = NULL").run();
}

/**
 * Sets the stored staged-config sha256 of nodes, one `[nodeId, sha256]` pair each, and labels
 * the text stored for each node's staged version with the same sha.
 */
export function setStagedConfigShas(conn: Connection, shas: Iterable<readonly [nodeId: string, sha256: string]>): void {
  const sqlite = sqliteOf(conn);
  const setSha = sqlite.prepare("UPDATE nodes SET staged_config_sha256 = ? WHERE node_id = ?");
  const label = sqlite.prepare(
    "UPDATE node_staged_texts SET config_sha256 = ? WHERE node_id = ? AND config_version = (SELECT staged_config_version FROM nodes WHERE node_id = ?)",
  );
  for (const [nodeId, sha] of shas) {
    setSha.run(sha, nodeId);
    label.run(sha, nodeId, nodeId);
  }
}

/**
 * Deletes every stored staged text that is not the one its node serves (not at the node's staged
 * version and sha: stale, or the node is staged lazily). One statement.
 */
export function deleteUnservedStagedTexts(conn: Connection): void {
  const sqlite = sqliteOf(conn);
  sqlite
    .prepare(
      `DELETE FROM node_staged_texts WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.node_id = node_staged_texts.node_id
         AND n.staged_config_version = node_staged_texts.config_version AND n.staged_config_sha256 = node_staged_texts.config_sha256)`,
    )
    .run();
}

/**
 * Every node's served staged config text (`t`: the text of its staged version and sha, or null),
 * stored sha256 (`s`) and staged version (`v`).
 */
export function listStagedConfigs(conn: Connection): Array<{ node_id: string; t: string | null; s: string | null; v: number }> {
  const sqlite = sqliteOf(conn);
  return sqlite
    .prepare(
      `SELECT n.node_id, t.config_text AS t, n.staged_config_sha256 AS s, n.staged_config_version AS v FROM nodes n
       LEFT JOIN node_staged_texts t ON t.node_id = n.node_id AND t.config_version = n.staged_config_version AND t.config_sha256 = n.staged_config_sha256`,
    )
    .all() as Array<{ node_id: string; t: string | null; s: string | null; v: number }>;
}

/**
 * The restore's one transaction on the live connection (synchronous: nothing else runs on the
 * connection meanwhile; the caller holds Kysely's connection): the snapshot file is attached,
 * every data table's CREATE TABLE text must equal the live one, then in ONE immediate
 * transaction every bind token is dropped, node config download tokens are revoked and every
 * table of {@link DATA_TABLES} is replaced by the snapshot's rows (foreign keys checked at
 * commit). ATTACH and DETACH sit outside it, as SQLite requires for DETACH. A failure rolls
 * back and leaves the live database as it was.
 * @param schemaMismatch builds the error thrown when a table's definition differs (named)
 * @param inTransaction runs last inside the replacing transaction (what must commit with it)
 */
export function replaceDataFromSnapshot(conn: Connection, dbFile: string, schemaMismatch: (table: string) => Error, inTransaction?: () => void): void {
  const sqlite = sqliteOf(conn);
  sqlite.prepare("ATTACH DATABASE ? AS snap").run(dbFile);
  try {
    const live = tableDefinitions(sqlite, "main");
    const snap = tableDefinitions(sqlite, "snap");
    for (const table of DATA_TABLES) {
      if (live.get(table) !== snap.get(table)) throw schemaMismatch(table);
    }
    const columns = (table: string) =>
      (sqlite.prepare("SELECT name FROM pragma_table_info(?, 'main')").all(table) as Array<{ name: string }>)
        .map((c) => `"${c.name}"`)
        .join(", ");
    try {
      sqlite
        .transaction(() => {
          sqlite.pragma("defer_foreign_keys = ON");
          sqlite.prepare("DELETE FROM main.bind_tokens").run();
          sqlite.prepare("DELETE FROM main.download_tokens WHERE kind = 'node_config'").run();
          for (const table of [...DATA_TABLES].reverse()) sqlite.prepare(`DELETE FROM main."${table}"`).run();
          for (const table of DATA_TABLES) {
            const cols = columns(table);
            sqlite.prepare(`INSERT INTO main."${table}" (${cols}) SELECT ${cols} FROM snap."${table}"`).run();
          }
          inTransaction?.();
        })
        .immediate();
    } catch (err) {
      if (sqlite.inTransaction) sqlite.exec("ROLLBACK");
      throw err;
    }
  } finally {
    sqlite.exec("DETACH DATABASE snap");
  }
}

/** What a snapshot database holds, counted for its list entry and the restore's confirmation. */
export interface SnapshotContents {
  configs: number;
  nodes: number;
  /** Nodes of mode `dynamic`: each must bind again after a restore. */
  dynamic_nodes: number;
}

/** Counts the configs, nodes and dynamic nodes of a checked snapshot database file (read-only). */
export function countSnapshotContents(file: string): SnapshotContents {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    const row = db
      .prepare(
        `SELECT (SELECT COUNT(*) FROM configs) AS configs, (SELECT COUNT(*) FROM nodes) AS nodes,
                (SELECT COUNT(*) FROM nodes WHERE mode = 'dynamic') AS dynamic_nodes`,
      )
      .get() as SnapshotContents;
    return { configs: row.configs, nodes: row.nodes, dynamic_nodes: row.dynamic_nodes };
  } finally {
    db.close();
  }
}
