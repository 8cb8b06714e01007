/**
 * The render worker's thread (started by src/store/render-pool.ts; docs/decisions.md "Issue 14:
 * rendering on a worker thread"). It opens its own connection to the store's SQLite file (WAL:
 * its reads never block the main thread's writer) and answers each request with
 * {@link readAndRenderChunk}: it reads a chunk's staged versions and render inputs and renders
 * and hashes the texts. It writes nothing: the main thread stores the renderings (conditionally
 * on the version read) and reports them to the node actors.
 */
import { parentPort, workerData } from "node:worker_threads";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { StatementCache, type Db } from "./db.js";
import type { RenderRequest, RenderResponse } from "./render-pool.js";
import type { Database } from "./schema.js";
import { readAndRenderChunk } from "./staging.js";

const port = parentPort;
const { file } = workerData as { file: string };
if (port === null) throw new Error("render-worker.ts runs in a worker thread only");

const sqlite = new SQLite(file, { fileMustExist: true });
sqlite.pragma("busy_timeout = 5000");
const db: Db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new StatementCache(sqlite) }) });

/** Requests are answered one at a time, in order (a chunk's reads are one stretch of this thread). */
let queue: Promise<void> = Promise.resolve();

port.on("message", (req: RenderRequest) => {
  queue = queue.then(() => answer(req));
});

async function answer(req: RenderRequest): Promise<void> {
  let res: RenderResponse;
  try {
    res = { id: req.id, ok: true, chunk: await readAndRenderChunk(db, req.configId, req.ids, { start: 0, stepMs: Infinity }) };
  } catch (err) {
    res = { id: req.id, ok: false, message: err instanceof Error ? err.message : String(err) };
  }
  port?.postMessage(res);
}
