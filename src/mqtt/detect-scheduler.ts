import PQueue from "p-queue";
import { randomInt } from "node:crypto";
import type { NodeActorRegistry } from "../actors/registry.js";
import type { Clock } from "../clock.js";
import type { Logger } from "../logger.js";

export interface DetectSchedulerDeps {
  registry: NodeActorRegistry;
  clock: Clock;
  log: Logger;
  /** Detect interval, ms (spec §6.4 rule 8: about 2 minutes). */
  intervalMs: number;
  /** Publishes one detect to a node (through the command tracker); rejects on failure. */
  sendDetect(configId: string, nodeId: string): Promise<void>;
  /** Detects in flight at once; the rest wait, so a round is spread instead of a burst. */
  concurrency?: number;
}

/**
 * Periodic detect (spec §6.4 rule 8): runs only while the console has SSE subscribers
 * (`setActive(true)` from the hub's subscriber count), every `intervalMs` plus up to 10 % jitter,
 * to every bound dynamic node that is not offline; spread through a p-queue. With no viewers,
 * no probe is sent.
 */
export class DetectScheduler {
  readonly #d: DetectSchedulerDeps;
  readonly #queue: PQueue;
  #timer: unknown = null;
  #active = false;
  rounds = 0;

  constructor(deps: DetectSchedulerDeps) {
    this.#d = deps;
    this.#queue = new PQueue({ concurrency: deps.concurrency ?? 64 });
  }

  /** Starts (first round at once) or stops probing. Idempotent. */
  setActive(active: boolean): void {
    if (active === this.#active) return;
    this.#active = active;
    if (active) {
      this.#round();
    } else {
      this.#d.clock.clearTimeout(this.#timer);
      this.#timer = null;
      this.#queue.clear();
    }
  }

  get active(): boolean {
    return this.#active;
  }

  /** Stops probing and waits for detects in flight. */
  async stop(): Promise<void> {
    this.setActive(false);
    await this.#queue.onIdle();
  }

  #round(): void {
    if (!this.#active) return;
    this.rounds++;
    for (const { configId, nodeId, projection } of this.#d.registry.projections()) {
      if (projection.mode !== "dynamic" || !projection.clientInitialized || projection.presence === "offline") continue;
      void this.#queue.add(() =>
        this.#d.sendDetect(configId, nodeId).catch((err: unknown) => {
          this.#d.log.warn({ err, config_id: configId, node_id: nodeId }, "detect failed to send");
        }),
      );
    }
    const jitter = randomInt(0, Math.max(1, Math.floor(this.#d.intervalMs / 10)));
    this.#timer = this.#d.clock.setTimeout(() => this.#round(), this.#d.intervalMs + jitter);
  }
}
