import { sql, type Kysely, type Migration } from "kysely";
import { meshPairPolicy } from "./migration-0016.js";
import { auditLog } from "./migration-0019.js";
import { oidcLinks } from "./migration-0020.js";
import { alertChannels } from "./migration-0021.js";
import { alertRules } from "./migration-0022.js";
import { nodePeerReports } from "./migration-0023.js";
import { configApplyMode } from "./migration-0024.js";

/**
 * In-code migrations, applied in name order at start. A released migration is frozen: change
 * the schema only by adding a new one. A failing migration throws; `main.ts` then exits
 * non-zero.
 */
export const migrations: Record<string, Migration> = {
  "0001_init": {
    // Kysely<any> is the documented type for migrations: they must not depend on today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
      await t`CREATE TABLE settings_kv (
        key TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT`;
      await t`CREATE TABLE admin_sessions (
        token_hash TEXT PRIMARY KEY NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT`;
      await t`CREATE TABLE configs (
        config_id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL UNIQUE COLLATE NOCASE,
        tunnel_protocol TEXT NOT NULL CHECK (tunnel_protocol IN ('wireguard', 'awg_2')),
        network_cidr TEXT NOT NULL,
        awg_params TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT`;
      await t`CREATE TABLE nodes (
        node_id TEXT PRIMARY KEY NOT NULL,
        config_id TEXT NOT NULL REFERENCES configs(config_id) ON DELETE CASCADE,
        name TEXT NOT NULL COLLATE NOCASE,
        mode TEXT NOT NULL CHECK (mode IN ('static', 'dynamic')),
        interface_name TEXT NOT NULL,
        address TEXT NOT NULL,
        public_address TEXT,
        listen_port INTEGER CHECK (listen_port BETWEEN 1 AND 65535),
        private_key TEXT NOT NULL,
        public_key TEXT NOT NULL,
        staged_config_version INTEGER NOT NULL DEFAULT 0,
        staged_config_sha256 TEXT,
        staged_config_text TEXT,
        confirmed_config_version INTEGER,
        confirmed_config_sha256 TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (config_id, name),
        UNIQUE (config_id, address)
      ) STRICT`;
      await t`CREATE INDEX nodes_config ON nodes (config_id)`;
      await t`CREATE TABLE node_tags (
        node_id TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY (node_id, tag)
      ) STRICT`;
      await t`CREATE TABLE node_client_state (
        node_id TEXT PRIMARY KEY NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        client_initialized INTEGER NOT NULL DEFAULT 0 CHECK (client_initialized IN (0, 1)),
        client_presence_state TEXT NOT NULL DEFAULT 'offline'
          CHECK (client_presence_state IN ('online', 'dropped', 'offline')),
        runtime_state TEXT NOT NULL DEFAULT 'unknown' CHECK (runtime_state IN ('unknown', 'running', 'stopped')),
        last_reachable_at INTEGER,
        last_signal_at INTEGER,
        client_version TEXT,
        platform TEXT,
        hostname TEXT,
        mqtt_username TEXT UNIQUE,
        mqtt_password_hash TEXT,
        boot_id TEXT,
        session_id TEXT,
        machine_snapshot TEXT,
        machine_version INTEGER,
        updated_at INTEGER NOT NULL
      ) STRICT`;
      await t`CREATE TABLE mesh_pairs (
        pair_id TEXT PRIMARY KEY NOT NULL,
        config_id TEXT NOT NULL REFERENCES configs(config_id) ON DELETE CASCADE,
        node_a TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        node_b TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        CHECK (node_a < node_b),
        UNIQUE (node_a, node_b)
      ) STRICT`;
      await t`CREATE INDEX mesh_pairs_config ON mesh_pairs (config_id)`;
      await t`CREATE INDEX mesh_pairs_node_b ON mesh_pairs (node_b)`;
      await t`CREATE TABLE port_forwards (
        forward_id TEXT PRIMARY KEY NOT NULL,
        node_id TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        protocol TEXT NOT NULL CHECK (protocol IN ('tcp', 'udp')),
        listen_port INTEGER NOT NULL CHECK (listen_port BETWEEN 1 AND 65535),
        target_address TEXT NOT NULL,
        target_port INTEGER NOT NULL CHECK (target_port BETWEEN 1 AND 65535),
        enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (node_id, protocol, listen_port)
      ) STRICT`;
      await t`CREATE TABLE download_tokens (
        token_hash TEXT PRIMARY KEY NOT NULL,
        kind TEXT NOT NULL
          CHECK (kind IN ('node_config', 'client_artifact', 'config_bulk_package', 'snapshot_export')),
        resource_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT`;
      await t`CREATE INDEX download_tokens_resource ON download_tokens (kind, resource_id)`;
      await t`CREATE INDEX download_tokens_expiry ON download_tokens (expires_at)`;
      await t`CREATE TABLE bind_tokens (
        token_hash TEXT PRIMARY KEY NOT NULL,
        node_id TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        state TEXT NOT NULL CHECK (state IN ('valid', 'used', 'invalidated')),
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        used_at INTEGER
      ) STRICT`;
      await t`CREATE INDEX bind_tokens_node ON bind_tokens (node_id)`;
      await t`CREATE TABLE control_logs (
        log_id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        config_id TEXT NOT NULL,
        request_id TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('command', 'output', 'event')),
        action TEXT,
        status TEXT CHECK (status IN ('pending', 'accepted', 'applied', 'failed', 'timed_out')),
        message TEXT,
        stream TEXT,
        output TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT`;
      await t`CREATE INDEX control_logs_node ON control_logs (node_id, created_at)`;
      await t`CREATE INDEX control_logs_request ON control_logs (request_id)`;
    },
  },
  // Broker passwords sealed for EMQX and Mosquitto (docs/history/decisions-2026.md "Broker passwords"). No
  // foreign key: rows are matched by username and password hash, and outlive a snapshot restore.
  "0002_broker_credentials": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE TABLE broker_credentials (
        mqtt_username TEXT PRIMARY KEY NOT NULL,
        password_sealed TEXT NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT`.execute(db);
    },
  },
  // What a config push asked the agent to apply, kept on its control log row so a push
  // still open across a restart confirms the pushed pair when its ACK arrives (spec §3.5, §9 rule
  // 4). NULL on every other row.
  "0003_control_log_push_target": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`ALTER TABLE control_logs ADD COLUMN pushed_config_version INTEGER CHECK (pushed_config_version >= 0)`.execute(db);
      await sql`ALTER TABLE control_logs ADD COLUMN pushed_config_sha256 TEXT CHECK (length(pushed_config_sha256) = 64)`.execute(db);
      await sql`ALTER TABLE control_logs ADD COLUMN pushed_tunnel_protocol TEXT CHECK (pushed_tunnel_protocol IN ('wireguard', 'awg_2'))`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "Every client event is stored": every client event is stored with
  // its spec §6.3 `level` and `event`; retention keeps the newest rows of each node by `log_id`,
  // which the index below serves (find the cut-off, delete below it in chunks).
  "0004_control_log_retention": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`ALTER TABLE control_logs ADD COLUMN level TEXT`.execute(db);
      await sql`ALTER TABLE control_logs ADD COLUMN event TEXT`.execute(db);
      await sql`CREATE INDEX control_logs_node_log ON control_logs (node_id, log_id)`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "flight recorder": one row per node transition that changed the
  // state value or a field the console shows, written in the registry's group commit. Newest N
  // per node by `transition_id` (the index serves the page reads and the retention cut-off).
  // Rows go with their node (cascade), so a snapshot restore, which replaces every node, clears them.
  "0005_node_transitions": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE TABLE node_transitions (
        transition_id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        at INTEGER NOT NULL,
        event TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('heartbeat', 'event', 'will', 'ack', 'detect', 'timer', 'rest', 'restore')),
        request_id TEXT,
        route TEXT,
        value_before TEXT,
        value_after TEXT NOT NULL,
        changes TEXT NOT NULL
      ) STRICT`.execute(db);
      await sql`CREATE INDEX node_transitions_node ON node_transitions (node_id, transition_id)`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "recorder cost": the per-node index made every group commit dirty
  // one index page per node (+25–35 % CPU per state change). Rows are now appended in id order
  // with no secondary index; each row names its node's previous row (`prev_id`), and
  // `node_transition_heads` (one small row per node, rewritten in the same commit) names the
  // newest one and counts the node's rows. Reads walk the chain from the head; retention cuts it.
  // A node's rows go with its head (trigger), and the head with its node (cascade), so deleting a
  // node or a snapshot restore still clears them.
  "0006_node_transition_chain": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE TABLE node_transitions_chain (
        transition_id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id TEXT NOT NULL,
        prev_id INTEGER,
        at INTEGER NOT NULL,
        event TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('heartbeat', 'event', 'will', 'ack', 'detect', 'timer', 'rest', 'restore')),
        request_id TEXT,
        route TEXT,
        value_before TEXT,
        value_after TEXT NOT NULL,
        changes TEXT NOT NULL
      ) STRICT`.execute(db);
      await sql`INSERT INTO node_transitions_chain
        SELECT transition_id, node_id, LAG(transition_id) OVER (PARTITION BY node_id ORDER BY transition_id),
               at, event, source, request_id, route, value_before, value_after, changes
        FROM node_transitions ORDER BY transition_id`.execute(db);
      await sql`CREATE TABLE node_transition_heads (
        node_id TEXT PRIMARY KEY REFERENCES nodes(node_id) ON DELETE CASCADE,
        head_id INTEGER NOT NULL,
        rows INTEGER NOT NULL
      ) STRICT`.execute(db);
      await sql`INSERT INTO node_transition_heads
        SELECT node_id, MAX(transition_id), COUNT(*) FROM node_transitions GROUP BY node_id`.execute(db);
      await sql`DROP TABLE node_transitions`.execute(db);
      await sql`ALTER TABLE node_transitions_chain RENAME TO node_transitions`.execute(db);
      await sql`CREATE TRIGGER node_transition_heads_delete AFTER DELETE ON node_transition_heads BEGIN
        DELETE FROM node_transitions WHERE transition_id IN (
          WITH RECURSIVE chain(id) AS (
            SELECT OLD.head_id
            UNION ALL
            SELECT t.prev_id FROM node_transitions t JOIN chain ON t.transition_id = chain.id WHERE t.prev_id IS NOT NULL
          )
          SELECT id FROM chain
        );
      END`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "lists for big fleets": keyset pagination of the node, config
  // and control-log lists. Each list's sort key is an index, so a page reads the rows it
  // returns (plus the filtered-out ones between them), never an OFFSET walk: nodes of a config
  // by (created_at, node_id); configs by (created_at, config_id); a node's control logs newest
  // first by log_id (insertion order, index control_logs_node_log of 0004). The two indexes
  // dropped are each served by a successor (nodes_config is a prefix of nodes_config_created;
  // control_logs_node's node_id lookups are served by control_logs_node_log).
  "0008_list_pages": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE INDEX nodes_config_created ON nodes (config_id, created_at, node_id)`.execute(db);
      await sql`CREATE INDEX configs_created ON configs (created_at, config_id)`.execute(db);
      await sql`DROP INDEX nodes_config`.execute(db);
      await sql`DROP INDEX control_logs_node`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "pairs and workspace events at scale": the mesh-pair list is
  // keyset-paginated on (created_at, pair_id) within a config; a 1,000-node full mesh read its
  // 499,500 rows and sorted them for every answer. mesh_pairs_config is a prefix of the new index.
  "0009_mesh_pair_pages": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE INDEX mesh_pairs_config_created ON mesh_pairs (config_id, created_at, pair_id)`.execute(db);
      await sql`DROP INDEX mesh_pairs_config`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "recorder cost, compact rows": a flight-recorder row cost +25–37 %
  // CPU per state change (its ten columns, two state-value JSON texts, and a second row per node
  // per commit in node_transition_heads). A row now holds every transition one node made in one
  // group commit (`count` of them, compact JSON entries; the k-th has id transition_id + k); the
  // state values are interned in node_state_values (a machine has few distinct values) and named
  // by id; the node's newest row id moves into its node_client_state row, which the same group
  // commit already rewrites. Ids, chains and the AUTOINCREMENT counter carry over (one transition
  // per migrated row). A node's rows go when its client-state row goes (trigger; the row goes
  // with its node by cascade), so deleting a node or a snapshot restore still clears them.
  "0010_node_transition_compact": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE TABLE node_state_values (
        value_id INTEGER PRIMARY KEY,
        value TEXT NOT NULL UNIQUE
      ) STRICT`.execute(db);
      await sql`INSERT INTO node_state_values (value)
        SELECT value_after FROM node_transitions
        UNION SELECT value_before FROM node_transitions WHERE value_before IS NOT NULL`.execute(db);
      await sql`CREATE TABLE node_transitions_compact (
        transition_id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id TEXT NOT NULL,
        prev_id INTEGER,
        count INTEGER NOT NULL CHECK (count >= 1),
        entries TEXT NOT NULL
      ) STRICT`.execute(db);
      await sql`INSERT INTO node_transitions_compact (transition_id, node_id, prev_id, count, entries)
        SELECT t.transition_id, t.node_id, t.prev_id, 1,
               json_array(json_array(t.at, t.event, t.source, t.request_id, t.route, b.value_id, a.value_id, json(t.changes)))
          FROM node_transitions t
          JOIN node_state_values a ON a.value = t.value_after
          LEFT JOIN node_state_values b ON b.value = t.value_before
         ORDER BY t.transition_id`.execute(db);
      await sql`DELETE FROM sqlite_sequence WHERE name = 'node_transitions_compact'`.execute(db);
      await sql`INSERT INTO sqlite_sequence (name, seq)
        SELECT 'node_transitions_compact', seq FROM sqlite_sequence WHERE name = 'node_transitions'`.execute(db);
      await sql`ALTER TABLE node_client_state ADD COLUMN transition_head INTEGER`.execute(db);
      await sql`UPDATE node_client_state SET transition_head =
        (SELECT h.head_id FROM node_transition_heads h WHERE h.node_id = node_client_state.node_id)`.execute(db);
      await sql`DROP TRIGGER node_transition_heads_delete`.execute(db);
      await sql`DROP TABLE node_transition_heads`.execute(db);
      await sql`DROP TABLE node_transitions`.execute(db);
      await sql`ALTER TABLE node_transitions_compact RENAME TO node_transitions`.execute(db);
      // Rows whose node has no client-state row could never be reached or deleted: none are kept.
      await sql`DELETE FROM node_transitions WHERE node_id NOT IN (SELECT node_id FROM node_client_state)`.execute(db);
      await sql`CREATE TRIGGER node_client_state_transitions_delete AFTER DELETE ON node_client_state
        WHEN OLD.transition_head IS NOT NULL BEGIN
        DELETE FROM node_transitions WHERE transition_id IN (
          WITH RECURSIVE chain(id) AS (
            SELECT OLD.transition_head
            UNION ALL
            SELECT t.prev_id FROM node_transitions t JOIN chain ON t.transition_id = chain.id WHERE t.prev_id IS NOT NULL
          )
          SELECT id FROM chain
        );
      END`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "the 5,000-node build": a node joining an n-node
  // full mesh inserts n − 1 pairs, whose entries in each index keyed by a side land on ~n/2
  // different pages (one per other node). The index on node_b (the foreign key's child index)
  // is dropped; with it goes the foreign key on node_b, which without an index would scan the
  // whole table on every node delete. Triggers keep what the key did: a pair's node_b names a
  // node (insert, update) and deleting a node deletes the pairs it is node_b of. Those are found
  // from the node's config (a pair's two nodes are in its config: the mesh service and the
  // snapshot import check it) through UNIQUE (node_a, node_b): O(nodes of the config).
  // SQLite cannot drop a foreign key in place: the table is rebuilt, rows (and rowids) copied.
  "0011_mesh_pair_sides": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
      await t`CREATE TABLE mesh_pairs_0011 (
        pair_id TEXT PRIMARY KEY NOT NULL,
        config_id TEXT NOT NULL REFERENCES configs(config_id) ON DELETE CASCADE,
        node_a TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        node_b TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        CHECK (node_a < node_b),
        UNIQUE (node_a, node_b)
      ) STRICT`;
      await t`INSERT INTO mesh_pairs_0011 (rowid, pair_id, config_id, node_a, node_b, enabled, created_at, updated_at)
        SELECT rowid, pair_id, config_id, node_a, node_b, enabled, created_at, updated_at FROM mesh_pairs ORDER BY rowid`;
      await t`DROP TABLE mesh_pairs`;
      await t`ALTER TABLE mesh_pairs_0011 RENAME TO mesh_pairs`;
      await t`CREATE INDEX mesh_pairs_config_created ON mesh_pairs (config_id, created_at, pair_id)`;
      await t`CREATE TRIGGER mesh_pairs_node_b_insert BEFORE INSERT ON mesh_pairs
        WHEN NOT EXISTS (SELECT 1 FROM nodes WHERE node_id = NEW.node_b)
        BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: mesh_pairs.node_b names no node'); END`;
      await t`CREATE TRIGGER mesh_pairs_node_b_update BEFORE UPDATE OF node_b ON mesh_pairs
        WHEN NOT EXISTS (SELECT 1 FROM nodes WHERE node_id = NEW.node_b)
        BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: mesh_pairs.node_b names no node'); END`;
      // The WHEN skips the probes when the config has no pairs left (a config delete or a
      // restore empties mesh_pairs before the nodes go).
      await t`CREATE TRIGGER nodes_delete_mesh_pairs_b AFTER DELETE ON nodes
        WHEN EXISTS (SELECT 1 FROM mesh_pairs WHERE config_id = OLD.config_id)
        BEGIN
          DELETE FROM mesh_pairs WHERE node_b = OLD.node_id
            AND node_a IN (SELECT node_id FROM nodes WHERE config_id = OLD.config_id AND node_id < OLD.node_id);
        END`;
    },
  },
  // docs/history/decisions-2026.md "switch rendering and notifier coalescing": the node views of a
  // config (overviews, node lists of the mesh service) need columns that sit after
  // staged_config_text in each row (confirmed_config_*, created_at, updated_at), so reading them
  // walked each row's ~100 KB of overflow pages: 50–220 ms per overview of a 1,000-node full mesh,
  // in one statement. This index holds every column of a view, in the views' order, so the read
  // touches the index only (listNodesWithoutTexts).
  "0012_node_views": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE INDEX nodes_views ON nodes (config_id, created_at, node_id, name, mode, interface_name, address, public_address, listen_port, public_key, staged_config_version, staged_config_sha256, confirmed_config_version, confirmed_config_sha256, updated_at)`.execute(db);
    },
  },
  // docs/history/decisions-2026.md "staged texts in their own table": with each ~100 KB staged text
  // in its node's row, marking 1,000 nodes changed (a protocol switch) set 1,000 texts NULL in
  // the request's transaction, walking and freeing ~100 MB of overflow pages (90–110 ms of the
  // event loop), and every read of a whole node row dragged its text along. The text moves to a
  // table of its own, labelled with the version and sha it was rendered for.
  "0013_node_staged_texts": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
      await t`CREATE TABLE node_staged_texts (
        node_id TEXT PRIMARY KEY NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        config_version INTEGER NOT NULL CHECK (config_version >= 1),
        config_sha256 TEXT NOT NULL,
        config_text TEXT NOT NULL
      ) STRICT`;
      await t`INSERT INTO node_staged_texts (node_id, config_version, config_sha256, config_text)
        SELECT node_id, staged_config_version, staged_config_sha256, staged_config_text FROM nodes
        WHERE staged_config_text IS NOT NULL AND staged_config_sha256 IS NOT NULL AND staged_config_version >= 1
        ORDER BY rowid`;
      await t`ALTER TABLE nodes DROP COLUMN staged_config_text`;
    },
  },
  // Static nodes have no agent to confirm what they run: the console says a static node's staged
  // config changed since it was last downloaded, so the service keeps, per node, the staged
  // version and sha its config download last served.
  "0014_node_config_downloads": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE TABLE node_config_downloads (
        node_id TEXT PRIMARY KEY NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
        config_version INTEGER NOT NULL CHECK (config_version >= 1),
        config_sha256 TEXT NOT NULL,
        downloaded_at INTEGER NOT NULL
      ) STRICT`.execute(db);
    },
  },
  // Hub nodes: a node with a public endpoint that forwards between nodes that cannot reach each
  // other directly (README "Hubs: meshes behind NAT"). The flag is one of the view's columns, so the covering
  // index of the workspace read gains it; a partial index finds a config's few hubs without
  // reading its other nodes (every mesh write asks).
  "0015_node_hub": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
      await t`ALTER TABLE nodes ADD COLUMN hub INTEGER NOT NULL DEFAULT 0 CHECK (hub IN (0, 1))`;
      await t`CREATE INDEX nodes_hubs ON nodes (config_id, node_id) WHERE hub = 1`;
      await t`DROP INDEX nodes_views`;
      await t`CREATE INDEX nodes_views ON nodes (config_id, created_at, node_id, name, mode, interface_name, address, public_address, listen_port, public_key, staged_config_version, staged_config_sha256, confirmed_config_version, confirmed_config_sha256, updated_at, hub)`;
    },
  },
  // The full mesh as a policy with explicit exceptions: src/store/migration-0016.ts.
  "0016_mesh_pair_policy": meshPairPolicy,
  // People with roles (README "Users, roles and tokens"): the one admin password becomes the
  // user `admin` with role `owner` (id `usr-admin`), and every admin session belongs to a user;
  // the sessions open at the upgrade stay open as `admin`'s.
  "0017_users": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
      await t`CREATE TABLE users (
        user_id TEXT PRIMARY KEY NOT NULL,
        username TEXT NOT NULL UNIQUE COLLATE NOCASE,
        password_hash TEXT,
        role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'owner')),
        disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT`;
      await t`INSERT INTO users (user_id, username, password_hash, role, disabled, created_at, updated_at)
        SELECT 'usr-admin', 'admin', value, 'owner', 0, updated_at, updated_at FROM settings_kv WHERE key = 'admin_password_hash'`;
      await t`DELETE FROM settings_kv WHERE key = 'admin_password_hash'`;
      await t`CREATE TABLE admin_sessions_0017 (
        token_hash TEXT PRIMARY KEY NOT NULL,
        user_id TEXT NOT NULL REFERENCES users(user_id) ON DELETE CASCADE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT`;
      await t`INSERT INTO admin_sessions_0017 (token_hash, user_id, created_at, expires_at)
        SELECT token_hash, 'usr-admin', created_at, expires_at FROM admin_sessions WHERE EXISTS (SELECT 1 FROM users WHERE user_id = 'usr-admin')`;
      await t`DROP TABLE admin_sessions`;
      await t`ALTER TABLE admin_sessions_0017 RENAME TO admin_sessions`;
      await t`CREATE INDEX admin_sessions_user ON admin_sessions (user_id)`;
    },
  },
  // Personal access tokens (README "Users, roles and tokens"): a user's named, expiring bearer
  // tokens for scripts and CI, stored as SHA-256, each with a role no higher than its user's.
  "0018_access_tokens": {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
      await t`CREATE TABLE access_tokens (
        token_id TEXT PRIMARY KEY NOT NULL,
        user_id TEXT NOT NULL REFERENCES users(user_id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'owner')),
        token_hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        last_used_at INTEGER
      ) STRICT`;
      await t`CREATE INDEX access_tokens_user ON access_tokens (user_id)`;
    },
  },
  // The hash-chained audit log and its retention boundary: src/store/migration-0019.ts.
  "0019_audit_log": auditLog,
  // Single sign-on: src/store/migration-0020.ts.
  "0020_oidc_links": oidcLinks,
  // Alert channels and the outbox of their deliveries: src/store/migration-0021.ts.
  "0021_alerts": alertChannels,
  // Alert rules, open alerts and the notices waiting for a group window: src/store/migration-0022.ts.
  "0022_alert_rules": alertRules,
  // The latest peer report of each node's host: src/store/migration-0023.ts.
  "0023_node_peer_reports": nodePeerReports,
  // How a config's pushes are applied on a running host: src/store/migration-0024.ts.
  "0024_config_apply_mode": configApplyMode,
};
