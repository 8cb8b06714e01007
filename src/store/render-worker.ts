/**
 * The render worker's thread (started by src/store/render-pool.ts; docs/decisions.md "Issue 14:
 * rendering on a worker thread"). It opens its own connection to the store's SQLite file (WAL:
 * its reads never block the main thread's writer) and runs render jobs ({@link openRenderJob}):
 * a job reads the nodes' staged versions and the config's render inputs once, and each step
 * renders and hashes the next texts. It writes nothing: the main thread stores the renderings (conditionally
 * on the version read) and reports them to the node actors.
 */
import { parentPort, workerData } from "node:worker_threads";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { StatementCache, type Db } from "./db.js";
import type { RenderRequest, RenderResponse } from "./render-pool.js";
import type { Database } from "./schema.js";
import { openRenderJob, type RenderJob } from "./staging.js";

const port = parentPort;
const { file } = workerData as { file: string };
if (port === null) throw new Error("render-worker.ts runs in a worker thread only");

const sqlite = new SQLite(file, { fileMustExist: true });
sqlite.pragma("busy_timeout = 5000");
const db: Db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new StatementCache(sqlite) }) });

const jobs = new Map<number, RenderJob>();
/** Requests are handled one at a time, in order (a step's reads and renderings are one stretch of this thread). */
let queue: Promise<void> = Promise.resolve();

port.on("message", (req: RenderRequest) => {
  queue = queue.then(() => handle(req));
});

async function handle(req: RenderRequest): Promise<void> {
  if (req.op === "open") {
    jobs.set(req.job, openRenderJob(db, req.configId, req.ids, { start: 0, stepMs: Infinity }));
    return;
  }
  if (req.op === "close") {
    jobs.get(req.job)?.close();
    jobs.delete(req.job);
    return;
  }
  let res: RenderResponse;
  try {
    const job = jobs.get(req.job);
    res = { id: req.id, ok: true, step: job === undefined ? null : await job.next(req.n) };
  } catch (err) {
    res = { id: req.id, ok: false, message: err instanceof Error ? err.message : String(err) };
  }
  port?.postMessage(res);
}
