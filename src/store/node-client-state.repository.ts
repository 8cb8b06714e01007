import type SQLite from "better-sqlite3";

/** Repository of `node_client_state` reads on the broker's hot path (CONNECT, authz). */

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
export function createNodeAccountStatements(sqlite: SQLite.Database): NodeAccountStatements {
  const byUsername = sqlite.prepare<[string], NodeAccountRow>(
    `SELECT s.mqtt_password_hash AS hash, n.config_id, n.node_id, n.mode
       FROM node_client_state s JOIN nodes n ON n.node_id = s.node_id
      WHERE s.mqtt_username = ? AND s.client_initialized = 1`,
  );
  return { byUsername: (username) => byUsername.get(username) };
}
