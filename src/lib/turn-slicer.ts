/**
 * Work that arrives in bursts, run in arrival order in slices of at most about `sliceMs` of
 * one event-loop turn each (docs/history/decisions-2026.md "upstream
 * messages in slices of a turn").
 *
 * A burst handed over in one go (a batch of thousands of MQTT messages from the broker thread)
 * would otherwise run in one turn: timers (the registry's group commit), socket writes (SSE
 * frames, PUBACKs) and everything else wait for all of it. The slicer runs jobs step by step
 * until the slice is used up, then continues on a later turn (`defer`, `setImmediate` by
 * default), so the event loop's timers and I/O run between slices.
 *
 * - Order: steps run in the order their jobs were pushed, each job's steps in its own order; a
 *   job pushed while others wait runs after them, never before.
 * - A slice ends after the step during which `now()` reached its end: a step is never split, so a
 *   slice is longer than `sliceMs` by at most one step.
 * - The first slice of a turn starts when work arrives; the continuation runs on the turn
 *   `defer` gives. With `setImmediate` the first continuation may follow in the same loop
 *   iteration's check phase; later ones each have a timers phase and an I/O poll before them.
 */
export interface SliceJob {
  /**
   * Does one unit of the job's work.
   * @returns true when the job has no more steps
   * @throws anything: the job is dropped and the error goes to the slicer's `onError`
   */
  step(): boolean;
}

export interface TurnSlicerOptions {
  /** Longest run of steps in one slice, ms (default 5). */
  sliceMs?: number;
  /** Monotonic time, ms (default `performance.now`). */
  now?: () => number;
  /** Runs `fn` on a later turn (default `setImmediate`). */
  defer?: (fn: () => void) => void;
  /** A job whose step threw (the job is dropped; the next one runs). */
  onError: (err: unknown) => void;
}

export class TurnSlicer {
  readonly #jobs: SliceJob[] = [];
  /** Index of the job that runs next in {@link #jobs}. */
  #head = 0;
  /** End of the current slice (ms on `now`'s clock), or undefined when no slice is open. */
  #sliceEnd: number | undefined;
  #running = false;
  readonly #sliceMs: number;
  readonly #now: () => number;
  readonly #defer: (fn: () => void) => void;
  readonly #onError: (err: unknown) => void;

  constructor(opts: TurnSlicerOptions) {
    this.#sliceMs = opts.sliceMs ?? 5;
    this.#now = opts.now ?? (() => performance.now());
    this.#defer = opts.defer ?? ((fn) => setImmediate(fn));
    this.#onError = opts.onError;
  }

  /** Jobs waiting (the one in progress included). */
  get pending(): number {
    return this.#jobs.length - this.#head;
  }

  /** Queues `job` after every job already queued and runs what the current slice allows. */
  push(job: SliceJob): void {
    this.#jobs.push(job);
    this.#run();
  }

  #run(): void {
    // A step that pushes a job: the running loop picks it up in order.
    if (this.#running) return;
    if (this.#sliceEnd === undefined) {
      this.#sliceEnd = this.#now() + this.#sliceMs;
      this.#defer(() => {
        this.#sliceEnd = undefined;
        if (this.pending > 0) this.#run();
      });
    } else if (this.#now() >= this.#sliceEnd) {
      return;
    }
    const end = this.#sliceEnd;
    this.#running = true;
    try {
      while (this.#head < this.#jobs.length) {
        const job = this.#jobs[this.#head] as SliceJob;
        let done: boolean;
        try {
          done = job.step();
        } catch (err) {
          done = true;
          this.#onError(err);
        }
        if (done) this.#head++;
        if (this.#now() >= end) break;
      }
    } finally {
      this.#running = false;
      if (this.#head === this.#jobs.length) {
        this.#jobs.length = 0;
        this.#head = 0;
      } else if (this.#head >= 1024) {
        this.#jobs.splice(0, this.#head);
        this.#head = 0;
      }
    }
  }
}
