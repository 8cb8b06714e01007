import type { BrokerAdmin, NodeBrokerAccount, ReconcileReport } from "./broker-admin.js";
import type { EmbeddedBrokerHandle } from "./embedded-broker.js";

/**
 * The broker-admin adapter of the embedded aedes broker (DESIGN §1 "broker adapters"). aedes reads every
 * account from the store at CONNECT (`brokerUsers` of broker-users.ts, given by broker-connection.ts), so there is nothing to write:
 * creating, rotating and deleting an account is the database transaction the caller already
 * committed. What is left is cutting live connections that hold old credentials.
 */
export class EmbeddedAdmin implements BrokerAdmin {
  readonly kind = "embedded" as const;

  constructor(private readonly broker: EmbeddedBrokerHandle) {}

  /** A rotated password takes effect at the next CONNECT: the client still connected with the old one is kicked. */
  async putNode(account: NodeBrokerAccount): Promise<void> {
    this.broker.kick(account.clientId);
  }

  /** The account went with the database row; the live client is kicked (its will is published). */
  async removeNode(_username: string, clientId: string): Promise<void> {
    this.broker.kick(clientId);
  }

  async kick(clientId: string): Promise<void> {
    this.broker.kick(clientId);
  }

  /** Nothing to mirror: the broker reads the store itself. */
  async reconcile(): Promise<ReconcileReport> {
    return { upserted: 0, removed: 0 };
  }

  /** The broker itself is closed by the server. */
  async close(): Promise<void> {}
}
