import PQueue from "p-queue";
import { randomInt } from "node:crypto";
import type { NodeActorRegistry } from "../actors/registry.js";
import type { Clock } from "../lib/clock.js";
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
  /** How long {@link DetectScheduler.stop} waits for detects in flight, ms (default 5,000). */
  stopGraceMs?: number;
}

/** Default bound of the shutdown wait for detects in flight, ms. */
export const DETECT_STOP_GRACE_MS = 5000;

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
  #stopped = false;
  rounds = 0;

  constructor(deps: DetectSchedulerDeps) {
    this.#d = deps;
    this.#queue = new PQueue({ concurrency: deps.concurrency ?? 64 });
  }

  /** Starts (first round at once) or stops probing. Idempotent; ignored after {@link stop}. */
  setActive(active: boolean): void {
    if (active === this.#active || (active && this.#stopped)) return;
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

  /**
   * The backend's broker link came back after an outage: while the console has viewers (spec
   * §6.4 rule 8), the next round starts now instead of at its timer, so nodes left awaiting a
   * signal after the outage (`NodeActorRegistry.outageEnded`) are probed rather than only waited
   * for. Probes still queued from the previous round are dropped first. Without viewers, nothing.
   */
  linkReturned(): void {
    if (!this.#active) return;
    this.#d.clock.clearTimeout(this.#timer);
    this.#timer = null;
    this.#queue.clear();
    this.#round();
  }

  /**
   * Resolves once no detect is queued or in flight: every probe a round started has been handed
   * to the broker link (or has failed). Tests use it as the first half of a delivery barrier
   * before checking that no probe arrived.
   */
  whenIdle(): Promise<void> {
    return this.#queue.onIdle();
  }

  /**
   * Shutdown: stops probing for good (a later `setActive(true)` is ignored), drops detects not yet
   * started and waits for those in flight, at most `stopGraceMs` on the injected clock (a broker
   * that never answers must not hold the shutdown); past it, logs how many are still running.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.setActive(false);
    if (this.#queue.pending === 0) return;
    let timer: unknown = null;
    const grace = new Promise<"grace">((resolve) => {
      timer = this.#d.clock.setTimeout(() => resolve("grace"), this.#d.stopGraceMs ?? DETECT_STOP_GRACE_MS);
    });
    const outcome = await Promise.race([this.#queue.onIdle().then(() => "idle" as const), grace]);
    this.#d.clock.clearTimeout(timer);
    if (outcome === "grace") this.#d.log.warn({ in_flight: this.#queue.pending }, "shutdown did not wait longer for detects in flight");
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
