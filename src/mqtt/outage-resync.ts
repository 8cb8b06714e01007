import type { NodeActorRegistry } from "../actors/registry.js";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { DetectScheduler } from "./detect-scheduler.js";

export interface OutageResyncDeps {
  /** Whether the backend's link is up now: connected and subscribed (`BrokerConnection.connected`). */
  connected(): boolean;
  clock: Clock;
  log: Logger;
  registry: Pick<NodeActorRegistry, "outageEnded">;
  detect: Pick<DetectScheduler, "linkReturned">;
}

/**
 * Presence after an outage of the backend's broker link (spec §3.1, §6.4 rules 8 and 10). While
 * the link was down nothing a node sent was heard, and a node whose agent died meanwhile left no
 * will the backend saw. When the link comes back (connected and subscribed), every node online
 * with no signal since the link went down is left awaiting one for the detect timeout
 * (`NodeActorRegistry.outageEnded`): an agent that reconnects announces itself (`mqtt_connected`)
 * and stays online, a silent node is dropped at the window's end. While the console has viewers
 * the detect round also starts at once (`DetectScheduler.linkReturned`); without viewers no
 * probe is sent, and the window alone decides. The first connection of a run is not a return.
 */
export class OutageResync {
  readonly #d: OutageResyncDeps;
  /**
   * When the link was first seen down in the current outage (ms); null while it is up. Only a
   * link that was up is reported down, so the first connection of a run is not a return.
   */
  #downSince: number | null = null;

  constructor(deps: OutageResyncDeps) {
    this.#d = deps;
  }

  /** Call at every change of the link (`broker.connection_changed`). */
  linkChanged(): void {
    const now = this.#d.clock.now();
    if (!this.#d.connected()) {
      this.#downSince ??= now;
      return;
    }
    const since = this.#downSince;
    this.#downSince = null;
    if (since === null) return;
    this.#d.detect.linkReturned();
    this.#d.registry.outageEnded(since, now).then(
      (nodes) => this.#d.log.info({ nodes, since }, "broker link back after an outage: nodes silent since await a signal"),
      (err: unknown) => this.#d.log.error({ err }, "marking nodes after a broker outage failed"),
    );
  }
}
