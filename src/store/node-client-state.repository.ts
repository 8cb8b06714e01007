import SQLite from "better-sqlite3";
import type { NodeMode } from "../protocol/enums.js";
import { sqliteOf, type Connection, type Db } from "./connection.js";

/**
 * Repository of `node_client_state`: the reads of the broker's hot path (CONNECT, authz) and the
 * node-state writes of the registry's group commit, both as statements prepared once.
 */

/** A bound node's broker account as stored: `hash` is null once its credentials are cleared. */
export interface NodeAccountRow {
  hash: string | null;
  config_id: string;
  node_id: string;
  mode: string;
}

/** The prepared statements of {@link createNodeAccountStatements}. */
export interface NodeAccountStatements {
  /** The initialized client whose MQTT username this is, with its node's mode; undefined when none. */
  byUsername(username: string): NodeAccountRow | undefined;
}

/**
 * Prepares the broker-account lookup once (it runs at every broker CONNECT and every
 * `/api/internal/emqx/authz` call, DESIGN §3 Broker identity), so rotated or deleted credentials
 * stop working at once without a query plan per call.
 */
export function createNodeAccountStatements(conn: Connection): NodeAccountStatements {
  const sqlite = sqliteOf(conn);
  const byUsername = sqlite.prepare<[string], NodeAccountRow>(
    `SELECT s.mqtt_password_hash AS hash, n.config_id, n.node_id, n.mode
       FROM node_client_state s JOIN nodes n ON n.node_id = s.node_id
      WHERE s.mqtt_username = ? AND s.client_initialized = 1`,
  );
  return { byUsername: (username) => byUsername.get(username) };
}

/**
 * A read-only connection of its own to the service's SQLite `file`, with the account lookup
 * prepared on it: the embedded broker thread's (src/mqtt/broker-thread.ts; DESIGN §3 Broker
 * identity). It reads committed rows only, so a rotated or deleted password is refused at the
 * next CONNECT. @throws SqliteError when the file does not exist or cannot be opened
 */
export function openNodeAccountReader(file: string): { accounts: NodeAccountStatements; close(): void } {
  const sqlite = new SQLite(file, { readonly: true, fileMustExist: true });
  sqlite.pragma("busy_timeout = 5000");
  return { accounts: createNodeAccountStatements(sqlite), close: () => sqlite.close() };
}

/**
 * A stored node with what its actor is built from (the registry's start): its `nodes` row and,
 * from `node_client_state`, the persisted machine snapshot and the narrowly persisted newest
 * signal.
 */
export interface NodeActorRow {
  node_id: string;
  config_id: string;
  mode: NodeMode;
  staged_config_version: number;
  staged_config_sha256: string | null;
  machine_snapshot: string | null;
  machine_version: number | null;
  /** The narrowly persisted newest signal (may be newer than the snapshot's), ms. */
  last_signal_at?: number | null;
  /** The node's newest flight-recorder row (`node_transitions`), null or absent when none. */
  transition_head?: number | null;
}

/** The node-state columns a full write sets (the registry's `NodeProjection` has this shape). */
export interface NodeStateColumns {
  clientInitialized: boolean;
  presence: string;
  runtime: string;
  /** ms */
  lastReachableAt: number | null;
  /** ms */
  lastSignalAt: number | null;
  clientVersion: string | null;
}

/** The prepared statements of {@link createNodeStateStatements}. */
export interface NodeStateStatements {
  /** Every stored node with its client state (LEFT JOIN: a node without a state row has nulls). */
  nodesForActors(): NodeActorRow[];
  /**
   * Full write of a node's client state: the projected columns, the machine snapshot JSON and
   * its machine version; `now` (ms) goes to `updated_at`. A non-null `transitionHead` moves the
   * node's newest flight-recorder row (`transition_head`) in the same statement; null
   * leaves it.
   */
  writeState(nodeId: string, columns: NodeStateColumns, snapshotJson: string, machineVersion: number, now: number, transitionHead: number | null): void;
  /** Moves the node's newest flight-recorder row alone (a commit that recorded rows but wrote no state for it). */
  writeHead(nodeId: string, transitionHead: number): void;
  /**
   * Narrow write of `last_signal_at` (ms) alone, when nothing else of the node moved; `now` (ms)
   * to `updated_at`; a non-null `transitionHead` as in {@link writeState}.
   */
  writeSignal(nodeId: string, lastSignalAt: number | null, now: number, transitionHead: number | null): void;
  /** The node's confirmed config (`nodes.confirmed_config_version`/`_sha256`); nulls clear it. */
  writeConfirmed(nodeId: string, version: number | null, sha256: string | null): void;
  /** Runs `fn` in one write transaction (the group commit); rethrows what `fn` throws after rolling back. */
  inTransaction(fn: () => void): void;
  /** True while a transaction holds the connection (a request's): the group commit must wait for it. */
  busy(): boolean;
}

/**
 * Prepares the node-state statements of the registry's hot path once (group commit, presence,
 * `last_signal_at` writes, DESIGN §2 "prepared statements for the hot path made by store
 * factories"): every heartbeat of every node goes through {@link NodeStateStatements.writeSignal}
 * or {@link NodeStateStatements.writeState}, so no statement is prepared per call.
 */
export function createNodeStateStatements(conn: Connection): NodeStateStatements {
  const sqlite = sqliteOf(conn);
  const state = sqlite.prepare(
    `UPDATE node_client_state SET client_initialized = ?, client_presence_state = ?, runtime_state = ?,
       last_reachable_at = ?, last_signal_at = ?, client_version = ?, machine_snapshot = ?, machine_version = ?,
       updated_at = ?, transition_head = coalesce(?, transition_head) WHERE node_id = ?`,
  );
  const head = sqlite.prepare("UPDATE node_client_state SET transition_head = ? WHERE node_id = ?");
  const signal = sqlite.prepare(
    "UPDATE node_client_state SET last_signal_at = ?, updated_at = ?, transition_head = coalesce(?, transition_head) WHERE node_id = ?",
  );
  const confirmed = sqlite.prepare("UPDATE nodes SET confirmed_config_version = ?, confirmed_config_sha256 = ? WHERE node_id = ?");
  const forActors = sqlite.prepare<[], NodeActorRow>(
    `SELECT n.node_id, n.config_id, n.mode, n.staged_config_version, n.staged_config_sha256,
            s.machine_snapshot, s.machine_version, s.last_signal_at, s.transition_head
       FROM nodes n LEFT JOIN node_client_state s ON s.node_id = n.node_id`,
  );
  const transaction = sqlite.transaction((fn: () => void) => fn());
  return {
    nodesForActors: () => forActors.all(),
    writeState(nodeId, c, snapshotJson, machineVersion, now, transitionHead) {
      state.run(
        c.clientInitialized ? 1 : 0,
        c.presence,
        c.runtime,
        c.lastReachableAt,
        c.lastSignalAt,
        c.clientVersion,
        snapshotJson,
        machineVersion,
        now,
        transitionHead,
        nodeId,
      );
    },
    writeHead(nodeId, transitionHead) {
      head.run(transitionHead, nodeId);
    },
    writeSignal(nodeId, lastSignalAt, now, transitionHead) {
      signal.run(lastSignalAt, now, transitionHead, nodeId);
    },
    writeConfirmed(nodeId, version, sha256) {
      confirmed.run(version, sha256, nodeId);
    },
    inTransaction: (fn) => transaction(fn),
    busy: () => sqlite.inTransaction,
  };
}

/**
 * Resets every node's client state to "never bound" (a restored snapshot's private copy):
 * broker credentials, machine snapshot and version, session ids, presence, runtime and reported
 * times cleared, `client_initialized` = 0; `now` (ms) goes to `updated_at`.
 */
export function resetAllClientStates(conn: Connection, now: number): void {
  const sqlite = sqliteOf(conn);
  sqlite
    .prepare(
      `UPDATE node_client_state SET client_initialized = 0, client_presence_state = 'offline', runtime_state = 'unknown',
         last_reachable_at = NULL, last_signal_at = NULL, client_version = NULL, platform = NULL, hostname = NULL,
         mqtt_username = NULL, mqtt_password_hash = NULL, boot_id = NULL, session_id = NULL,
         machine_snapshot = NULL, machine_version = NULL, transition_head = NULL, updated_at = ?`,
    )
    .run(now);
}

/**
 * Creates a new node's client state row: never bound (the column defaults: offline, runtime
 * unknown, no broker account, no machine snapshot); `now` (ms) goes to `updated_at`.
 */
export async function insertClientState(db: Db, nodeId: string, now: number): Promise<void> {
  await db.insertInto("node_client_state").values({ node_id: nodeId, updated_at: now }).execute();
}

/**
 * Records a bind (spec §4 rule 11): the node's client is initialized with its new broker
 * account (username and the SHA-256 of its password, what the embedded broker checks at
 * CONNECT) and what the agent reported; `now` (ms) goes to `updated_at`. Presence, runtime and
 * the machine snapshot are left to the node's actor.
 */
export async function recordClientBound(
  db: Db,
  nodeId: string,
  bound: { mqttUsername: string; mqttPasswordHash: string; clientVersion: string; platform: string; hostname: string },
  now: number,
): Promise<void> {
  await db
    .updateTable("node_client_state")
    .set({
      client_initialized: 1,
      mqtt_username: bound.mqttUsername,
      mqtt_password_hash: bound.mqttPasswordHash,
      client_version: bound.clientVersion,
      platform: bound.platform,
      hostname: bound.hostname,
      updated_at: now,
    })
    .where("node_id", "=", nodeId)
    .execute();
}

/**
 * Clears a node's client (reset and dynamic → static, spec §4 rule 12, §3.1):
 * `client_initialized` 0, presence offline, runtime unknown, broker username and password hash
 * removed; `now` (ms) goes to `updated_at`.
 */
export async function clearClientState(db: Db, nodeId: string, now: number): Promise<void> {
  await db
    .updateTable("node_client_state")
    .set({
      client_initialized: 0,
      client_presence_state: "offline",
      runtime_state: "unknown",
      mqtt_username: null,
      mqtt_password_hash: null,
      updated_at: now,
    })
    .where("node_id", "=", nodeId)
    .execute();
}
