import { createHash } from "node:crypto";
import { digestsEqual } from "../domain/tokens.js";
import type { NodeAccountStatements } from "../store/node-client-state.repository.js";
import { nodeClientId, parseNodeUsername, type BrokerIdentity } from "./authz.policy.js";

/**
 * Broker users of the embedded broker: one per bound node (`n:{config_id}:{node_id}`) and the
 * backend's high-privilege user (DESIGN §3 "Broker identity").
 */

/** One broker user as stored: who it is and the SHA-256 hex of its password. */
export interface BrokerUser {
  identity: BrokerIdentity;
  /**
   * SHA-256 hex of the password's bytes (the same digest as `hashToken(password)` for a text
   * password). Passwords are 32 random bytes, so a fast hash is right here.
   */
  passwordHash: string;
}

/**
 * Finds a broker user by username. Synchronous: the real one reads SQLite through a prepared
 * statement, so the broker's authenticate hook never waits on I/O. Returns undefined for an
 * unknown (or deleted, or disabled) user.
 */
export interface BrokerUserLookup {
  find(username: string): BrokerUser | undefined;
}

/** SHA-256 hex of a broker password, as {@link BrokerUser.passwordHash} stores it. */
export function brokerPasswordHash(password: string | Buffer): string {
  return createHash("sha256").update(password).digest("hex");
}

// Compared against when the user is unknown, so an unknown username costs the same as a wrong
// password.
const NO_USER_HASH = brokerPasswordHash("no such broker user");

/**
 * True when `password` is the user's password. Constant time in the digest comparison; false
 * for an unknown user or a missing password.
 */
export function verifyBrokerPassword(user: BrokerUser | undefined, password: Buffer | string | undefined): boolean {
  const presented = brokerPasswordHash(password ?? "");
  const ok = digestsEqual(presented, user?.passwordHash ?? NO_USER_HASH);
  return ok && user !== undefined && password !== undefined && password.length > 0;
}

/**
 * The broker's users (DESIGN §3 Broker identity): the backend user, and one per bound dynamic
 * node read from the store at every CONNECT, so rotated or deleted credentials stop working at
 * once. `backendPasswordHash`: SHA-256 hex of the backend's password ({@link brokerPasswordHash}).
 */
export function brokerUsers(accounts: NodeAccountStatements, backendUsername: string, backendPasswordHash: string): BrokerUserLookup {
  const backend: BrokerUser = { identity: { kind: "backend" }, passwordHash: backendPasswordHash };
  return {
    find(username) {
      if (username === backendUsername) return backend;
      if (parseNodeUsername(username) === null) return undefined;
      const row = accounts.byUsername(username);
      if (!row || row.hash === null || row.mode !== "dynamic") return undefined;
      return {
        identity: { kind: "node", configId: row.config_id, nodeId: row.node_id, clientId: nodeClientId(row.config_id, row.node_id) },
        passwordHash: row.hash,
      };
    },
  };
}
