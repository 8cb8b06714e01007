/**
 * The store worker's thread (started by src/store/store-worker.ts; docs/history/decisions-2026.md
 * "the store worker"). It opens its own connection to the store's SQLite file (WAL:
 * its reads never block the main thread's writer) and runs render jobs ({@link openRenderJob}):
 * a job reads the nodes' staged versions and the config's render inputs once, and each step
 * renders and hashes the next texts. It writes no rows: the main thread stores the renderings
 * (conditionally on the version read) and reports them to the node actors. It also checkpoints
 * the WAL every `checkpointIntervalMs` (PASSIVE), so that the main thread's commits rarely have
 * to (`CHECKPOINT_INTERVAL_MS` in src/store/store-worker.ts), reports a large WAL it copied
 * entirely (the writer is idle: `walTruncateBytes`) for the main thread to truncate, and counts the store's configs,
 * nodes and pairs for the system status when asked.
 */
import { statSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import SQLite from "better-sqlite3";
import type { Db } from "./connection.js";
import type { RenderRequest, RenderResponse, WalCheckpoint } from "./store-worker.js";
import type { Database } from "./schema.js";
import type { RenderJob, openRenderJob } from "./render-job.js";
import { countStore } from "./summary.repository.js";

const port = parentPort;
const { file, checkpointIntervalMs, walTruncateBytes } = workerData as { file: string; checkpointIntervalMs: number; walTruncateBytes: number };
if (port === null) throw new Error("store-worker.thread.ts runs in a worker thread only");

const sqlite = new SQLite(file, { fileMustExist: true });
sqlite.pragma("busy_timeout = 5000");

/**
 * The renderer and a Kysely handle on this thread's connection, loaded after the thread has
 * started (below): its periodic checkpoints begin at once, and the first job (a protocol switch)
 * does not wait ~0.7 s for the modules under tsx.
 */
let rendering: Promise<{ db: Db; open: typeof openRenderJob }> | null = null;
function loadRendering(): Promise<{ db: Db; open: typeof openRenderJob }> {
  rendering ??= Promise.all([import("kysely"), import("./connection.js"), import("./render-job.js")]).then(([{ Kysely, SqliteDialect }, { StatementCache }, { openRenderJob }]) => ({
    db: new Kysely<Database>({ dialect: new SqliteDialect({ database: new StatementCache(sqlite) }) }),
    open: openRenderJob,
  }));
  return rendering;
}

/** One PASSIVE checkpoint of the WAL (copies what no reader still needs; blocks no writer). */
function checkpoint(): WalCheckpoint {
  const [row] = sqlite.pragma("wal_checkpoint(PASSIVE)") as WalCheckpoint[];
  return row ?? { busy: 0, log: 0, checkpointed: 0 };
}

/** The WAL file's size in bytes (0 when there is none). */
function walBytes(): number {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/**
 * True when a PASSIVE checkpoint (`done`) copied every frame of a WAL file larger than
 * `walTruncateBytes`: the writer wrote nothing since, so it is idle, and a large write (a build, a
 * protocol switch) would otherwise leave hundreds of MB of WAL behind until the next write starts
 * the log over (sustained writes never let it, and only then does `journal_size_limit` cut it).
 * The main thread then truncates it on its own connection, between two transactions (src/store/db.ts):
 * a checkpoint that restarts the WAL from this connection would fail the main connection's open
 * transaction when it next writes (SQLITE_BUSY_SNAPSHOT, the snapshot it read is gone).
 */
function truncatable(done: WalCheckpoint): boolean {
  return done.log > 0 && done.checkpointed === done.log && walBytes() > walTruncateBytes;
}

// Periodic checkpoints (CHECKPOINT_INTERVAL_MS): between two requests' statements, never inside one.
setInterval(() => {
  try {
    const done = checkpoint();
    if (done.checkpointed > 0) port?.postMessage({ id: null, checkpoint: truncatable(done) ? { ...done, truncatable: true } : done } satisfies RenderResponse);
  } catch {
    // SQLITE_BUSY and the like: the next interval tries again; the main thread's automatic checkpoint is the backstop
  }
}, checkpointIntervalMs).unref();

setImmediate(() => void loadRendering().catch(() => undefined)); // a failure is answered to the first job's steps

/** Open jobs; a job whose loading failed answers its steps with the failure. */
const jobs = new Map<number, Promise<RenderJob>>();
/**
 * Requests are handled one at a time, in order (a step's reads and renderings are one stretch of
 * this thread), each in a turn of its own: between two, messages that arrived are taken in.
 */
let queue: Promise<void> = Promise.resolve();

port.on("message", (req: RenderRequest) => {
  // The system status waits for its counts: they are read at once, between two steps, not after
  // the steps asked ahead (up to RENDER_STEPS_AHEAD renderings of 16 nodes each).
  if (req.op === "counts") {
    void handle(req);
    return;
  }
  queue = queue.then(() => new Promise<void>((resolve) => setImmediate(resolve))).then(() => handle(req));
});

async function handle(req: RenderRequest): Promise<void> {
  if (req.op === "open") {
    const job = loadRendering().then(({ db, open }) => open(db, req.configId, req.ids, { start: 0, stepMs: Infinity }));
    job.catch(() => undefined); // answered to its steps
    jobs.set(req.job, job);
    return;
  }
  if (req.op === "close") {
    jobs.get(req.job)?.then((job) => job.close(), () => undefined);
    jobs.delete(req.job);
    return;
  }
  let res: RenderResponse;
  try {
    if (req.op === "checkpoint") res = { id: req.id, ok: true, checkpoint: checkpoint() };
    else if (req.op === "counts") res = { id: req.id, ok: true, counts: countStore(sqlite) };
    else {
      const job = jobs.get(req.job);
      if (job === undefined) throw new Error(`no render job ${req.job} on the store worker`);
      res = { id: req.id, ok: true, step: await (await job).next(req.n) };
    }
  } catch (err) {
    res = { id: req.id, ok: false, message: err instanceof Error ? err.message : String(err) };
  }
  port?.postMessage(res);
}
