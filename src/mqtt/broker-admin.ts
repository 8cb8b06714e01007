/**
 * One broker-admin interface, three adapters (DESIGN §1 "broker adapters"):
 * `embedded` (aedes in this process; it reads accounts from the store at every CONNECT),
 * `emqx` (management REST API: built-in-database users, kick, authorization cache) and
 * `mosquitto` (dynamic security plugin over `$CONTROL/dynamic-security/v1`).
 *
 * The database is the source of truth (spec §1 item 3): adapters only mirror it. Every method
 * is idempotent, so a reconciliation can always be re-run; a method that cannot reach the
 * broker rejects with {@link BrokerUnavailableError} and the caller retries later
 * (spec §1.7 last bullet, §1.8).
 */

/** A node's broker account as the broker must hold it (DESIGN §3 "Broker identity"). */
export interface NodeBrokerAccount {
  configId: string;
  nodeId: string;
  /** `n:{config_id}:{node_id}` */
  username: string;
  /** `svc-{config_id}-{node_id}`: the only client id the account may connect with. */
  clientId: string;
  /** Plain password (32 random bytes, base64url). Never logged. */
  password: string;
}

/** The backend's own high-privilege broker user. */
export interface BackendBrokerAccount {
  username: string;
  /** Never logged. */
  password: string;
}

/** What a reconciliation changed at the broker; counts only, for logs and metrics. */
export interface ReconcileReport {
  /** Node accounts created or whose password/roles were rewritten. */
  upserted: number;
  /** Node-shaped accounts (`n:…`) removed because the store no longer has them. */
  removed: number;
}

export interface BrokerAdmin {
  readonly kind: "embedded" | "emqx" | "mosquitto";
  /**
   * Creates the node's account or rewrites its password (bind rotates it: spec §4 rule 11).
   * A live client still connected with old credentials is disconnected.
   * @throws BrokerUnavailableError when the broker cannot be reached or refuses the change
   */
  putNode(account: NodeBrokerAccount): Promise<void>;
  /**
   * Deletes the node's account (absent is fine) and disconnects its live client, so old
   * credentials stop working at once (spec §4 rule 12, §3.1 dynamic → static, node delete).
   * @throws BrokerUnavailableError
   */
  removeNode(username: string, clientId: string): Promise<void>;
  /** Disconnects a live client; absent is fine. @throws BrokerUnavailableError */
  kick(clientId: string): Promise<void>;
  /**
   * Makes the broker hold exactly: the backend user (where the adapter manages it) and one
   * account per entry of `nodes`; every other node-shaped account (`n:…`) is removed and its
   * client kicked; authorization caches are cleared. Run after every (re)connection to the
   * broker (spec §1.8).
   * @throws BrokerUnavailableError
   */
  reconcile(desired: {
    backend: BackendBrokerAccount;
    nodes: NodeBrokerAccount[];
    /**
     * Usernames of node accounts to leave exactly as the broker holds them: bound nodes whose
     * sealed password cannot be opened (key lost). Neither written nor removed; they need a
     * rebind. Optional: absent means none.
     */
    keep?: string[];
  }): Promise<ReconcileReport>;
  /** Releases connections the adapter holds. */
  close(): Promise<void>;
}

/** The broker (or its management API) could not be reached, or it refused an admin command. */
export class BrokerUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BrokerUnavailableError";
  }
}
