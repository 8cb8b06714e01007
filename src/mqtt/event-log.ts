import { controlLogView, type ControlLogView } from "../actors/commands.js";
import type { Logger } from "../logger.js";
import { insertClientEventLog, insertClientEventLogs, type NewClientEventLog } from "../store/control-logs.repository.js";
import type { Store } from "../store/db.js";
import type { ControlLogRow } from "../store/schema.js";

/** Turns of the event loop {@link EventLog.close} waits for an open transaction to end. */
const CLOSE_TURNS = 100;

export interface EventLogDeps {
  store: Store;
  log: Logger;
  /**
   * Called once per stored row, after the batch holding it committed (spec §6.5 rule 6): SSE
   * `control.log.created` and the retention's bookkeeping. Must not throw (a throw is logged).
   */
  onStored(log: ControlLogView): void;
}

/**
 * Stores client events as control log rows (spec §2.8 "command output arriving as an MQTT event is
 * stored as a log", §6.4 rule 9 "the backend stores, displays and cleans up events"). Every `event`
 * message the router accepted is kept, the will's `offline` included (docs/history/decisions-2026.md "Every
 * client event is stored").
 *
 * Group commit, like the node actors' state: events handed over in one turn of the event loop are
 * written in one transaction on the next (`setImmediate`), never inside a request's open
 * transaction (the write waits for it), and {@link EventLogDeps.onStored} runs only after the
 * commit. When the batch fails (a node deleted meanwhile), its rows are written one by one and
 * each failure is logged as a lost event; nothing throws into the MQTT path.
 */
export class EventLog {
  readonly #deps: EventLogDeps;
  #queue: NewClientEventLog[] = [];
  #scheduled = false;
  /** Events written (for metrics and tests). */
  stored = 0;

  constructor(deps: EventLogDeps) {
    this.#deps = deps;
  }

  /** Queues one event for the next group commit. `row.created_at` is the time it was received (ms). */
  record(row: NewClientEventLog): void {
    this.#queue.push(row);
    this.#schedule();
  }

  /** Events waiting for their commit. */
  get pending(): number {
    return this.#queue.length;
  }

  /**
   * Writes what is queued (shutdown). Waits out a transaction that holds the connection,
   * {@link CLOSE_TURNS} turns of the event loop at most; whatever still cannot be written is
   * logged as lost.
   */
  async close(): Promise<void> {
    if (this.#queue.length === 0) return;
    try {
      await this.#deps.store.whenIdle(() => this.#flush(), { turns: CLOSE_TURNS });
    } catch {
      this.#deps.log.error({ events: this.#queue.length }, "client events not stored at shutdown: the database stayed busy");
      this.#queue = [];
    }
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // Written after a request's open transaction, never inside it.
    this.#deps.store.whenIdle(this.#flushTurn).catch((err: unknown) => this.#deps.log.error({ err }, "storing client events failed"));
  }

  readonly #flushTurn = (): void => {
    this.#scheduled = false;
    this.#flush();
  };

  #flush(): void {
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    const store = this.#deps.store;
    let rows: ControlLogRow[];
    try {
      rows = insertClientEventLogs(store, batch);
    } catch {
      // One bad row (its node deleted meanwhile, say) must not cost the others: one at a time.
      rows = [];
      for (const row of batch) {
        try {
          rows.push(insertClientEventLog(store, row));
        } catch (err) {
          this.#deps.log.error({ err, config_id: row.config_id, node_id: row.node_id, event: row.event }, "storing a client event failed; it is lost");
        }
      }
    }
    this.stored += rows.length;
    for (const row of rows) {
      try {
        this.#deps.onStored(controlLogView(row));
      } catch (err) {
        this.#deps.log.error({ err }, "after storing a client event");
      }
    }
  }
}
