import PQueue from "p-queue";
import pRetry, { AbortError } from "p-retry";
import type { Logger } from "../logger.js";
import { deleteOrphanBrokerCredentials, listBrokerAccounts } from "../store/broker-credentials.repository.js";
import type { Store } from "../store/db.js";
import { nodeClientId, nodeUsername } from "./authz.policy.js";
import type { BackendBrokerAccount, BrokerAdmin, NodeBrokerAccount, ReconcileReport } from "./broker-admin.js";
import { brokerPasswordHash } from "./broker-users.js";
import type { BrokerPasswordVault } from "./broker-passwords.js";

/**
 * Keeps the broker's accounts in line with the store (docs/history/decisions-2026.md "Broker sync and reconciliation"; spec §1.8, §4 rules
 * 11-12, §6.4 rule 10). It owns the broker-admin adapter:
 *
 * - Bind → {@link putNode}; reset, dynamic → static and node delete → {@link removeNode} (the
 *   live client is disconnected too); every other kick → {@link kick}. The database is written
 *   first by the caller: these never reject. When the broker cannot be reached they log and
 *   schedule a reconciliation, so bind and reset succeed with the broker down.
 * - {@link requestReconcile}: after every (re)connection to the broker, after a refused
 *   connection and after a failed change. A reconciliation makes the broker hold the backend
 *   user, one account per initialized dynamic node whose sealed password opens, and no other
 *   node account; failed runs are retried with exponential backoff (p-retry) until one succeeds.
 * - Every adapter call runs through one queue (concurrency 1), and every put, removal and
 *   reconciliation reads the store inside its turn: a bind committed before the read is in it,
 *   one committed after it puts its account after it. The queue's order is not the commits'
 *   (a bind enqueues its put after its actor's group commit, a reset or dynamic → static its
 *   removal after its own), so a put the store no longer wants is skipped and a removal of a
 *   node bound again since is left to that bind's put: the broker ends as the store says.
 * - The embedded broker reads accounts from the store at CONNECT: nothing to reconcile.
 */

export interface BrokerSyncOptions {
  admin: BrokerAdmin;
  store: Store;
  vault: BrokerPasswordVault;
  backend: BackendBrokerAccount;
  log: Logger;
  /** Backoff between failed reconciliations, ms: from min, doubling (randomized), up to max. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** After each successful reconciliation (the server lets the backend client retry at once). Must not throw. */
  onReconciled?(report: ReconcileReport): void;
}

/** What the sync is doing, for the system status and tests. */
export interface BrokerSyncState {
  /** A reconciliation is running or waiting to retry. */
  reconciling: boolean;
  /** Successful reconciliations since start. */
  reconciled: number;
  /** Epoch ms of the last successful reconciliation, null before the first. */
  lastReconciledAt: number | null;
  /** What the last successful reconciliation changed. */
  lastReport: ReconcileReport | null;
  /** Sums of every successful reconciliation's report since start. */
  totals: ReconcileReport;
  /** Message of the last failure (never a secret), null after a success. */
  lastError: string | null;
  /** Initialized dynamic nodes left out of the last reconciliation because their sealed password did not open (they need a rebind). */
  unprovisionable: number;
}

export class BrokerSync {
  readonly #o: BrokerSyncOptions;
  readonly #queue = new PQueue({ concurrency: 1 });
  readonly #closing = new AbortController();
  #loop: Promise<void> | undefined;
  #again = false;
  /** Aborts the current backoff wait when a new request arrives (the broker is likely back). */
  #wait: AbortController | undefined;
  #attempting = false;
  #state: BrokerSyncState = { reconciling: false, reconciled: 0, lastReconciledAt: null, lastReport: null, totals: { upserted: 0, removed: 0 }, lastError: null, unprovisionable: 0 };

  constructor(opts: BrokerSyncOptions) {
    this.#o = opts;
  }

  get admin(): BrokerAdmin {
    return this.#o.admin;
  }

  state(): BrokerSyncState {
    return { ...this.#state, totals: { ...this.#state.totals } };
  }

  /**
   * Asks for a reconciliation; coalesced with one already running (which then runs once more).
   * A request during a backoff wait retries at once. No-op for the embedded broker and after close.
   */
  requestReconcile(reason: string): void {
    if (this.#closing.signal.aborted || this.#o.admin.kind === "embedded") return;
    if (this.#loop !== undefined) {
      this.#again = true;
      if (!this.#attempting) this.#wait?.abort();
      return;
    }
    this.#state.reconciling = true;
    this.#loop = this.#run(reason).finally(() => {
      this.#loop = undefined;
      this.#state.reconciling = false;
    });
  }

  /** Resolves when no reconciliation is running or waiting (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#loop !== undefined) await this.#loop;
    await this.#queue.onIdle();
  }

  /**
   * Creates or rotates the node's broker account (spec §4 rule 11) and disconnects a client
   * still using the old password. Never rejects: a failure is logged and reconciled later.
   */
  async putNode(account: NodeBrokerAccount): Promise<void> {
    await this.#change("put", account.clientId, async () => {
      if ((await this.#boundPasswordHash(account.nodeId, account.username)) !== brokerPasswordHash(account.password)) {
        this.#o.log.debug({ client_id: account.clientId }, "broker account put skipped: the store no longer holds this binding");
        return;
      }
      await this.#o.admin.putNode(account);
    });
  }

  /**
   * Deletes the node's broker account and disconnects its client (spec §4 rule 12, §3.1
   * dynamic → static, node delete). Never rejects: a failure is logged and reconciled later
   * (the reconciliation removes every node account the store does not have).
   */
  async removeNode(configId: string, nodeId: string): Promise<void> {
    const clientId = nodeClientId(configId, nodeId);
    const username = nodeUsername(configId, nodeId);
    await this.#change("remove", clientId, async () => {
      if ((await this.#boundPasswordHash(nodeId, username)) !== undefined) {
        this.#o.log.debug({ client_id: clientId }, "broker account removal skipped: the node was bound again, whose put rotates the account");
        return;
      }
      await this.#o.admin.removeNode(username, clientId);
    });
  }

  /** The password hash of the node's binding as the store holds it now (initialized, dynamic, this username); undefined when none. */
  async #boundPasswordHash(nodeId: string, username: string): Promise<string | undefined> {
    const [row] = await listBrokerAccounts(this.#o.store.db, nodeId);
    return row !== undefined && row.mqtt_username === username && row.mqtt_password_hash !== null ? row.mqtt_password_hash : undefined;
  }

  /** Disconnects a live client. Never rejects. */
  async kick(clientId: string): Promise<void> {
    try {
      await this.#queue.add(() => this.#o.admin.kick(clientId));
    } catch (err) {
      this.#o.log.warn({ clientId, err: messageOf(err) }, "broker kick failed");
    }
  }

  /** Stops retrying, waits for the adapter call in progress, closes the adapter. */
  async close(): Promise<void> {
    this.#closing.abort();
    this.#wait?.abort();
    await this.#loop?.catch(() => undefined);
    await this.#queue.onIdle();
    await this.#o.admin.close();
  }

  async #change(what: "put" | "remove", clientId: string, fn: () => Promise<void>): Promise<void> {
    try {
      await this.#queue.add(fn);
    } catch (err) {
      this.#o.log.warn({ clientId, err: messageOf(err) }, `broker account ${what} failed; the next reconciliation applies it`);
      this.requestReconcile(`${what} failed`);
    }
  }

  async #run(reason: string): Promise<void> {
    const { log } = this.#o;
    log.debug({ reason }, "broker reconciliation requested");
    do {
      this.#again = false;
      this.#wait = new AbortController();
      const signal = AbortSignal.any([this.#closing.signal, this.#wait.signal]);
      try {
        const report = await pRetry(
          async () => {
            if (this.#closing.signal.aborted) throw new AbortError("closing");
            this.#attempting = true;
            try {
              return await this.#queue.add(() => this.#reconcileOnce());
            } finally {
              this.#attempting = false;
            }
          },
          {
            retries: Number.POSITIVE_INFINITY,
            factor: 2,
            minTimeout: this.#o.retryMinMs ?? 500,
            maxTimeout: this.#o.retryMaxMs ?? 30_000,
            randomize: true,
            signal,
            onFailedAttempt: ({ error, attemptNumber }) => {
              this.#state.lastError = messageOf(error);
              const entry = { attempt: attemptNumber, err: messageOf(error) };
              if (attemptNumber === 1) log.warn(entry, "broker reconciliation failed; retrying with backoff");
              else log.debug(entry, "broker reconciliation failed again");
            },
          },
        );
        this.#state = {
          ...this.#state,
          reconciled: this.#state.reconciled + 1,
          lastReconciledAt: Date.now(),
          lastReport: report,
          totals: { upserted: this.#state.totals.upserted + report.upserted, removed: this.#state.totals.removed + report.removed },
          lastError: null,
        };
        log.info({ ...report, unprovisionable: this.#state.unprovisionable }, "broker reconciled");
        try {
          this.#o.onReconciled?.(report);
        } catch (err) {
          log.error({ err }, "onReconciled failed");
        }
      } catch (err) {
        if (this.#closing.signal.aborted) return;
        // A new request cut the backoff wait short: loop again at once.
        if (this.#wait.signal.aborted) {
          this.#again = true;
          continue;
        }
        // Not retryable (a programming error): logged, and the next request tries again.
        this.#state.lastError = messageOf(err);
        log.error({ err }, "broker reconciliation stopped");
        return;
      }
    } while (this.#again && !this.#closing.signal.aborted);
  }

  async #reconcileOnce(): Promise<ReconcileReport> {
    const { nodes, keep } = await this.#desiredNodes();
    return this.#o.admin.reconcile({ backend: this.#o.backend, nodes, keep });
  }

  /**
   * Every initialized dynamic node with a username, a password hash and a sealed password that
   * opens to that hash (spec §1.8). The others are logged and kept as the broker holds them
   * (`keep`): they need a rebind. Orphaned sealed passwords (reset, deleted nodes) are dropped.
   */
  async #desiredNodes(): Promise<{ nodes: NodeBrokerAccount[]; keep: string[] }> {
    const { store, vault, log } = this.#o;
    await deleteOrphanBrokerCredentials(store.db);
    const rows = await listBrokerAccounts(store.db);
    const out: NodeBrokerAccount[] = [];
    const keep: string[] = [];
    let unprovisionable = 0;
    for (const r of rows) {
      const username = nodeUsername(r.config_id, r.node_id);
      const password = r.password_sealed === null || r.mqtt_username !== username ? undefined : vault.open(username, r.password_sealed);
      if (password === undefined || brokerPasswordHash(password) !== r.mqtt_password_hash) {
        unprovisionable += 1;
        keep.push(username);
        log.warn(
          { config_id: r.config_id, node_id: r.node_id, reason: r.password_sealed === null ? "no sealed password" : "sealed password does not match" },
          "bound node not provisioned at the broker: rebind it",
        );
        continue;
      }
      out.push({ configId: r.config_id, nodeId: r.node_id, username, clientId: nodeClientId(r.config_id, r.node_id), password });
    }
    this.#state.unprovisionable = unprovisionable;
    return { nodes: out, keep };
  }
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
