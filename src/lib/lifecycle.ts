/** Where a failing shutdown step is reported (the service's pino logger fits). */
export interface ShutdownLog {
  error(fields: { err: unknown }, msg: string): void;
}

/**
 * The shutdown steps of the parts started so far, run in reverse start order. A failing step is
 * logged and the others still run (a half-closed service must still release its store).
 */
export class Lifecycle {
  readonly #steps: Array<() => Promise<void> | void> = [];
  readonly #log: ShutdownLog;

  constructor(log: ShutdownLog) {
    this.#log = log;
  }

  /** Registers the close of a part just started. */
  defer(step: () => Promise<void> | void): void {
    this.#steps.push(step);
  }

  /** Runs every registered step, newest first, once. */
  async close(): Promise<void> {
    for (const step of this.#steps.splice(0).reverse()) {
      try {
        await step();
      } catch (err) {
        this.#log.error({ err }, "shutdown step failed");
      }
    }
  }
}
