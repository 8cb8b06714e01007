import type { Db } from "./connection.js";

/**
 * Repository of `broker_credentials` (sealed broker passwords, spec §1.8) as the broker
 * reconciliation reads them, joined with the node accounts of `node_client_state`.
 */

/** A bound dynamic node's broker account as stored, with its sealed password (null when none). */
export interface StoredBrokerAccount {
  config_id: string;
  node_id: string;
  mqtt_username: string | null;
  mqtt_password_hash: string | null;
  password_sealed: string | null;
}

/**
 * Drops sealed passwords whose username no node client state holds any more (reset or deleted
 * nodes).
 */
export async function deleteOrphanBrokerCredentials(db: Db): Promise<void> {
  await db
    .deleteFrom("broker_credentials")
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom("node_client_state")
            .select("node_client_state.node_id")
            .whereRef("node_client_state.mqtt_username", "=", "broker_credentials.mqtt_username"),
        ),
      ),
    )
    .execute();
}

/**
 * Every initialized client of a dynamic node with a stored username and password hash, with
 * the sealed password stored under that username (null when none); only `nodeId`'s when given.
 */
export async function listBrokerAccounts(db: Db, nodeId?: string): Promise<StoredBrokerAccount[]> {
  let query = db
    .selectFrom("node_client_state as s")
    .innerJoin("nodes as n", "n.node_id", "s.node_id")
    .leftJoin("broker_credentials as b", "b.mqtt_username", "s.mqtt_username")
    .select(["n.config_id", "n.node_id", "s.mqtt_username", "s.mqtt_password_hash", "b.password_sealed"])
    .where("s.client_initialized", "=", 1)
    .where("n.mode", "=", "dynamic")
    .where("s.mqtt_username", "is not", null)
    .where("s.mqtt_password_hash", "is not", null);
  if (nodeId !== undefined) query = query.where("s.node_id", "=", nodeId);
  return query.execute();
}

/**
 * Stores (or replaces) the sealed password of a broker username (the bind, spec §4 rule 11;
 * docs/history/decisions-2026.md "Broker passwords"); `now` (ms) goes to `updated_at`.
 */
export async function putBrokerCredential(db: Db, username: string, passwordSealed: string, now: number): Promise<void> {
  await db
    .insertInto("broker_credentials")
    .values({ mqtt_username: username, password_sealed: passwordSealed, updated_at: now })
    .onConflict((oc) => oc.column("mqtt_username").doUpdateSet({ password_sealed: passwordSealed, updated_at: now }))
    .execute();
}

/** Drops the sealed password of a broker username (a bind whose password could not be sealed). */
export async function deleteBrokerCredential(db: Db, username: string): Promise<void> {
  await db.deleteFrom("broker_credentials").where("mqtt_username", "=", username).execute();
}

/**
 * Drops the sealed password of the username a node's client state holds now (reset and
 * dynamic → static, spec §4 rule 12, §3.1): run it before that username is cleared.
 */
export async function deleteBrokerCredentialsOfNode(db: Db, nodeId: string): Promise<void> {
  await db
    .deleteFrom("broker_credentials")
    .where("mqtt_username", "in", db.selectFrom("node_client_state").select("mqtt_username").where("node_id", "=", nodeId))
    .execute();
}
