import type { Logger } from "../logger.js";
import type { NodeActorRow } from "../store/node-client-state.repository.js";
import { nodeKey } from "./node-entries.js";

/** A node left out at start or reload, and why (the first problem found, at most 300 characters). */
export interface QuarantinedNode {
  configId: string;
  nodeId: string;
  reason: string;
}

/**
 * The nodes whose stored row or machine snapshot could not be restored at the last start or
 * reload (docs/history/decisions-2026.md "Quarantine at start and reload"): one bad row never stops start-up.
 * A quarantined node has no actor: events for it are dropped, REST reads answer from its
 * columns; repairing the row (or deleting the node, or resetting its client) and restarting
 * brings it back. Each one is logged as an error naming the node and the reason.
 */
export class Quarantine {
  readonly #log: Logger;
  readonly #nodes = new Map<string, QuarantinedNode>();

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Forgets the previous start's list (a start or reload checks every row again). */
  clear(): void {
    this.#nodes.clear();
  }

  /** Leaves a node out: `err` (an Error's message, or the value as text) is its reason. */
  add(row: Pick<NodeActorRow, "config_id" | "node_id">, err: unknown): void {
    const reason = (err instanceof Error ? err.message : String(err)).slice(0, 300);
    this.#nodes.set(nodeKey(row.config_id, row.node_id), { configId: row.config_id, nodeId: row.node_id, reason });
    this.#log.error(
      { config_id: row.config_id, node_id: row.node_id, reason },
      "node quarantined: its stored state cannot be restored; it has no actor until the row is repaired",
    );
  }

  /** The quarantined nodes, in the order they were found. */
  list(): QuarantinedNode[] {
    return [...this.#nodes.values()];
  }

  get size(): number {
    return this.#nodes.size;
  }
}
