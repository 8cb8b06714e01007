/**
 * The store worker (src/store/store-worker.ts, src/store/store-worker.thread.ts)
 * reads and renders a large write's nodes on a thread of its own while the main thread stores
 * the previous step, and checkpoints the WAL so that the main thread's commits rarely do. Its renderings must be the full re-render's byte for byte, writes racing it
 * must never leave a stale text stored (DESIGN §3 Config versions; spec §3.5, §3.8: the agent's
 * text hashes to the staged sha), and a worker that cannot answer must not lose a rendering or
 * hide the renderer's error. Real SQLite file, a real worker thread, a real MeshService.
 */
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { performance } from "node:perf_hooks";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { isAppError } from "../../src/errors.js";
import { createLogger } from "../../src/logger.js";
import type { Logger } from "../../src/logger.js";
import { Store, WAL_AUTOCHECKPOINT_PAGES, WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER, WAL_SIZE_LIMIT_BYTES, type Db } from "../../src/store/db.js";
import { listNodes } from "../../src/store/nodes.repository.js";
import { MAX_WORKER_STARTS, StoreWorker, type WalCheckpoint } from "../../src/store/store-worker.js";
import { renderConfigTexts, renderDeferred, type StagedChange } from "../../src/services/rendering.service.js";
import { lazyMesh, servedText } from "../helpers/lazy-mesh.js";
import { ManualClock } from "../../src/lib/clock.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { storeCountsOffThread, systemStatus } from "../../src/services/notifier.js";
import { sqliteOf } from "../../src/store/connection.js";

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

/** Every node's stored rendering is the full re-render's, or it is staged lazily (no sha yet). */
async function assertFullRender(store: Store, configId: string, reported: ReadonlyMap<string, StagedChange>) {
  for (const { node, text } of await renderConfigTexts(store.db, configId)) {
    if (node.staged_config_sha256 === null) continue;
    assert.equal(await servedText(store.db, node), text, `${node.node_id}: the stored text is the full re-render's`);
    assert.equal(node.staged_config_sha256, sha256(text), `${node.node_id}: sha of the text`);
    const last = reported.get(node.node_id);
    if (last) assert.ok(last.version <= node.staged_config_version, `${node.node_id}: reported at a version it had`);
  }
}

test("DESIGN §3 Config versions: the render worker renders a deferred write's nodes byte for byte as the full re-render, while writes race it (random nodes bumped between chunks), and reports every node", async (t) => {
  const { store, mesh, configId, ids } = await lazyMesh(t, 40);
  const worker = store.worker();
  assert.ok(worker instanceof StoreWorker);
  const reported = new Map<string, StagedChange>();
  let writes = 0;
  await renderDeferred(
    store.db,
    configId,
    ids,
    async (batch) => {
      for (const s of batch) reported.set(s.nodeId, s);
      // Every 7th report moves one node: chunks the worker read before it hold stale inputs.
      if (reported.size % 7 !== 0 || writes >= 5) return;
      writes++;
      const target = ids[(writes * 11) % ids.length] ?? "";
      await mesh.updateNode(configId, target, { public_address: `198.51.100.${writes}` });
    },
    { batch: 1, chunk: 8, source: worker },
  );
  await mesh.settled();
  assert.equal(writes, 5, "the writes raced the rendering");
  assert.ok(worker.answered >= 5, `the worker answered the chunks (${worker.answered})`);
  assert.equal(worker.starts, 1, "one worker thread");
  assert.deepEqual([...reported.keys()].sort(), [...ids].sort(), "every node reported");
  await assertFullRender(store, configId, reported);
  // The writes (endpoint changes) re-staged every peer lazily; a second pass, unraced, renders all.
  await renderDeferred(store.db, configId, ids, (batch) => void batch.forEach((s) => reported.set(s.nodeId, s)), { chunk: 8, source: worker });
  assert.ok((await listNodes(store.db, configId)).every((r) => r.staged_config_sha256 !== null), "every node rendered");
  await assertFullRender(store, configId, reported);
});

test("a worker that cannot start (its database cannot be opened) loses no rendering: each job's nodes are rendered in the main thread, and the store stops starting worker threads after MAX_WORKER_STARTS jobs", async (t) => {
  const { store, configId, ids, dir } = await lazyMesh(t, 20);
  const worker = new StoreWorker(join(dir, "missing.db"), store.db, createLogger("silent"));
  t.after(() => worker.close());
  for (let job = 1; job <= MAX_WORKER_STARTS + 1; job++) {
    await store.db.updateTable("nodes").set({ staged_config_sha256: null }).execute();
    const reported = new Map<string, StagedChange>();
    await renderDeferred(store.db, configId, ids, (batch) => void batch.forEach((s) => reported.set(s.nodeId, s)), { chunk: 4, source: worker });
    assert.equal(reported.size, ids.length, `job ${job}: every node reported`);
    assert.ok((await listNodes(store.db, configId)).every((r) => r.staged_config_sha256 !== null), `job ${job}: every node rendered`);
    await assertFullRender(store, configId, reported);
    assert.equal(worker.starts, Math.min(job, MAX_WORKER_STARTS), `job ${job}: a worker started per job, up to the limit`);
  }
  assert.equal(worker.answered, 0, "the worker answered nothing");
});

test("a worker that goes away in the middle of a job (here: it is closed after the first batch) loses no rendering and repeats none: the nodes it had not given are rendered in the main thread, each reported once", async (t) => {
  const { store, configId, ids } = await lazyMesh(t, 30);
  const worker = store.worker();
  assert.ok(worker);
  const reports = new Map<string, number>();
  let closed = false;
  await renderDeferred(
    store.db,
    configId,
    ids,
    async (batch) => {
      for (const s of batch) reports.set(s.nodeId, (reports.get(s.nodeId) ?? 0) + 1);
      if (closed) return;
      closed = true;
      await worker.close();
    },
    { batch: 4, chunk: 4, source: worker },
  );
  assert.ok(closed);
  assert.ok(worker.answered >= 1 && worker.answered < Math.ceil(ids.length / 4), `the worker gave some steps, not all (${worker.answered})`);
  assert.deepEqual([...reports.keys()].sort(), [...ids].sort(), "every node reported");
  assert.ok([...reports.values()].every((n) => n === 1), "none twice");
  assert.ok((await listNodes(store.db, configId)).every((r) => r.staged_config_sha256 !== null), "every node rendered");
  await assertFullRender(store, configId, new Map());
});

test("a node whose stored input the renderer refuses fails the deferred rendering with the renderer's own VALIDATION_FAILED, as in the main thread", async (t) => {
  const { store, configId, ids } = await lazyMesh(t, 6);
  const worker = store.worker();
  assert.ok(worker);
  await store.db.updateTable("nodes").set({ public_key: "not-a-key" }).where("node_id", "=", ids[2] ?? "").execute();
  await assert.rejects(
    renderDeferred(store.db, configId, ids, () => {}, { source: worker }),
    (err: unknown) => isAppError(err, "VALIDATION_FAILED"),
  );
});

/** A store with `rows` settings_kv rows of ~4 KB written through the main connection (WAL frames to checkpoint). */
async function writtenStore(t: { after: (fn: () => unknown) => void }, rows: number) {
  const dir = mkdtempSync(join(tmpdir(), "svc-checkpoint-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const write = () => {
    for (let i = 0; i < rows; i++) sqliteOf(store).prepare("INSERT OR REPLACE INTO settings_kv (key, value, updated_at) VALUES (?, ?, 0)").run(`k${i}`, "x".repeat(4000) + Math.random());
  };
  return { store, dir, write };
}

test("the store worker checkpoints the WAL on its own connection: every frame the main connection wrote is copied into the database (PASSIVE, no reader or writer waited for)", async (t) => {
  const { store, write } = await writtenStore(t, 50);
  const worker = store.worker();
  assert.ok(worker);
  write();
  const done = await worker.checkpoint();
  assert.equal(done.busy, 0);
  assert.ok(done.log >= 50, `the WAL held the writes (${done.log} frames)`);
  assert.equal(done.checkpointed, done.log, "every frame copied");
  // The next commit on the main connection starts the WAL over: it holds only that commit's frames.
  write();
  const again = await worker.checkpoint();
  assert.ok(again.log < done.log * 2, `the WAL was restarted (${again.log} frames after ${done.log})`);
});

test("the store worker starts by itself once the WAL file reaches walStartBytes, and then checkpoints unasked every checkpointIntervalMs", { timeout: 30_000 }, async (t) => {
  const { store, dir, write } = await writtenStore(t, 30);
  const file = join(dir, "svc.db");
  let reported!: (c: WalCheckpoint) => void;
  const first = new Promise<WalCheckpoint>((resolve) => (reported = resolve));
  const walStartBytes = statSync(`${file}-wal`).size + 30 * 4096;
  const worker = new StoreWorker(file, store.db, createLogger("silent"), { checkpointIntervalMs: 20, walStartBytes, onCheckpoint: (c) => reported(c) });
  t.after(() => worker.close());
  // The watch's timer does not hold the process (unref): this test holds it while it waits.
  const hold = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(hold));
  worker.startWhenWalGrows();
  assert.equal(worker.starts, 0, "not before the WAL grows");
  write(); // 30 rows of ~4 KB: past the threshold
  const done = await first;
  assert.equal(worker.starts, 1);
  assert.ok(done.checkpointed >= 30, `frames copied without being asked (${done.checkpointed})`);
});

/**
 * A worker on `file` that checkpoints every 20 ms and reports WALs above 256 KiB it copied
 * entirely, not started yet; `report()` answers its next periodic checkpoint report, and each
 * report of an idle WAL has the store truncate it (as `Store.worker()` wires it), in `truncations`.
 */
function reportingWorker(t: { after: (fn: () => unknown) => void }, store: Store, file: string) {
  const reports: WalCheckpoint[] = [];
  const truncations: Array<Promise<boolean>> = [];
  let waiting: ((c: WalCheckpoint) => void) | null = null;
  const worker = new StoreWorker(file, store.db, createLogger("silent"), {
    checkpointIntervalMs: 20,
    walTruncateBytes: 256 * 1024,
    onIdleWal: () => truncations.push(store.truncateIdleWal()),
    onCheckpoint: (c) => {
      if (waiting !== null) {
        waiting(c);
        waiting = null;
      } else reports.push(c);
    },
  });
  t.after(() => worker.close());
  const hold = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(hold));
  const report = () => {
    const queued = reports.shift();
    return queued !== undefined ? Promise.resolve(queued) : new Promise<WalCheckpoint>((resolve) => (waiting = resolve));
  };
  return { worker, report, truncations };
}

test("a large write leaves no large WAL behind: once the worker's periodic checkpoint copied every frame of a WAL file past the limit (the writer is idle), the store truncates the file to zero bytes on its own connection, and the rows are all there", { timeout: 30_000 }, async (t) => {
  const { store, dir, write } = await writtenStore(t, 400);
  const file = join(dir, "svc.db");
  write(); // ~1.6 MB of WAL
  const walBefore = statSync(`${file}-wal`).size;
  assert.ok(walBefore > 1_000_000, `the write grew the WAL (${walBefore} bytes)`);
  const { worker, report, truncations } = reportingWorker(t, store, file);
  worker.start();
  const done = await report();
  assert.equal(done.checkpointed, done.log, "every frame copied first");
  assert.equal(done.truncatable, true, "the worker reports the idle WAL");
  assert.equal(truncations.length, 1);
  assert.equal(await truncations[0], true, "the store truncated it");
  assert.equal(statSync(`${file}-wal`).size, 0, "the WAL file is empty");
  assert.deepEqual(sqliteOf(store).prepare("SELECT count(*) AS n FROM settings_kv WHERE key LIKE 'k%'").get(), { n: 400 }, "nothing lost");
  sqliteOf(store).prepare("INSERT INTO settings_kv (key, value, updated_at) VALUES ('after', 'x', 0)").run();
  assert.ok(statSync(`${file}-wal`).size < 64 * 1024, "the next write starts the log over in the emptied file");
});

test("a worker's report that arrives as the store closes truncates nothing and fails nothing: truncateIdleWal answers false on a closed connection", async () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-checkpoint-"));
  try {
    const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
    const asked = store.truncateIdleWal(); // queued for the next idle turn
    await store.close();
    assert.equal(await asked, false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the idle WAL is truncated between two transactions of the store, never inside one: a transaction open across an await (read, then write) is not failed by it, and the file is cut once it committed", { timeout: 30_000 }, async (t) => {
  const { store, dir, write } = await writtenStore(t, 400);
  const file = join(dir, "svc.db");
  write();
  const { worker, report, truncations } = reportingWorker(t, store, file);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const tx = store.transaction(async (trx) => {
    await trx.selectFrom("settings_kv").select("key").where("key", "=", "k1").execute(); // reads the snapshot
    await released;
    await trx.insertInto("settings_kv").values({ key: "held", value: "y", updated_at: 0 }).execute(); // then writes
  });
  worker.start();
  const done = await report();
  assert.equal(done.truncatable, true);
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(statSync(`${file}-wal`).size > 256 * 1024, "not truncated while the transaction is open");
  release();
  await tx; // not SQLITE_BUSY_SNAPSHOT
  assert.equal(await truncations[0], true);
  assert.equal(statSync(`${file}-wal`).size, 0);
  assert.deepEqual(sqliteOf(store).prepare("SELECT count(*) AS n FROM settings_kv WHERE key = 'held'").get(), { n: 1 });
});

test("the idle-WAL truncation never waits for a reader: while another connection reads from the WAL it answers false at once (no busy wait in the event loop), and truncates once the reader is done", { timeout: 30_000 }, async (t) => {
  const { store, dir, write } = await writtenStore(t, 400);
  const file = join(dir, "svc.db");
  write();
  const reader = new Database(file, { readonly: true });
  t.after(() => reader.close());
  reader.exec("BEGIN");
  reader.prepare("SELECT count(*) FROM settings_kv").get(); // holds its snapshot, in the WAL
  const t0 = performance.now();
  assert.equal(await store.truncateIdleWal(), false, "a reader still needs the WAL");
  assert.ok(performance.now() - t0 < 1000, "answered without the 5 s busy timeout");
  assert.ok(statSync(`${file}-wal`).size > 256 * 1024);
  reader.exec("COMMIT");
  assert.equal(await store.truncateIdleWal(), true);
  assert.equal(statSync(`${file}-wal`).size, 0);
});

test("Store.worker() wires it: with the store's limit lowered, a write past it is followed, within a few checkpoint intervals and without any further write, by an empty WAL file", { timeout: 30_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-checkpoint-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "svc.db");
  const store = await Store.open(file, createLogger("silent"), { walTruncateBytes: 256 * 1024 });
  t.after(() => store.close());
  for (let i = 0; i < 400; i++) sqliteOf(store).prepare("INSERT INTO settings_kv (key, value, updated_at) VALUES (?, ?, 0)").run(`k${i}`, "x".repeat(4000));
  assert.ok(statSync(`${file}-wal`).size > 1_000_000);
  store.worker()?.start();
  // A real thread checkpointing every second: waited for, with a bound.
  for (let waited = 0; statSync(`${file}-wal`).size > 0 && waited < 10_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(statSync(`${file}-wal`).size, 0);
});

test("a worker started by the WAL watch that exits is started again while the WAL stays large, up to MAX_WORKER_STARTS in all (here every start fails: the database file is missing beside a large WAL)", { timeout: 30_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-rewatch-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "gone.db");
  writeFileSync(`${file}-wal`, Buffer.alloc(8192));
  let exits = 0;
  let allExited!: () => void;
  const exited = new Promise<void>((resolve) => (allExited = resolve));
  const log = {
    warn: (_: unknown, msg: string) => {
      if (msg === "the store worker exited" && ++exits === MAX_WORKER_STARTS) allExited();
    },
    error: () => undefined,
    info: () => undefined,
    debug: () => undefined,
  } as unknown as Logger;
  const hold = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(hold));
  const running: boolean[] = [];
  const worker = new StoreWorker(file, {} as Db, log, { checkpointIntervalMs: 10, walStartBytes: 4096, onRunning: (r) => running.push(r) });
  t.after(() => worker.close());
  worker.startWhenWalGrows();
  await exited;
  assert.equal(worker.starts, MAX_WORKER_STARTS, "started again after each exit, then no more");
  assert.deepEqual(running, Array.from({ length: MAX_WORKER_STARTS }, () => [true, false]).flat(), "each start and each exit reported");
});

test("while the store worker runs, the main connection's own checkpoint is only a far backstop (WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER), so no commit in the event loop copies and syncs the WAL; before it, WAL_AUTOCHECKPOINT_PAGES", async (t) => {
  const { store } = await writtenStore(t, 1);
  const pages = () => sqliteOf(store).pragma("wal_autocheckpoint", { simple: true });
  assert.equal(pages(), WAL_AUTOCHECKPOINT_PAGES, "no worker yet");
  assert.equal(sqliteOf(store).pragma("journal_size_limit", { simple: true }), WAL_SIZE_LIMIT_BYTES);
  const worker = store.worker();
  assert.ok(worker);
  await worker.checkpoint(); // starts the thread
  assert.equal(pages(), WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER, "the worker checkpoints");
  assert.ok(WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER * 4096 > 200 * 1024 * 1024, "more than a 1,000-node switch writes without a pause (~200 MiB)");
});

test("DESIGN §5 system status: while the store worker's thread runs, the notifier's statuses count configs, nodes and pairs on its connection, which sees only what is committed; with no thread, or once it is closed, on the main connection", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-store-worker-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  for (let i = 0; i < 4; i++) await mesh.createNode(configId, { name: `n${i}`, mode: "static", public_address: `192.0.2.${i + 1}`, listen_port: 51820 });
  const deps = { store, registry: undefined as never, mqttEnabled: false, brokerConnected: () => false, releaseDownloadUrl: "" };
  // As the composition root wires the notifier's status.
  const counted = async () => {
    const s = await systemStatus(deps, (await storeCountsOffThread(store)) ?? undefined);
    return [s.summary.configs, s.summary.nodes, s.topology.mesh_pairs];
  };
  // The main connection's own view includes its uncommitted write; the worker's does not.
  const uncommitted = async <T>(f: () => Promise<T>): Promise<T> => {
    sqliteOf(store).exec("BEGIN");
    try {
      // Every pair gone: the full-mesh policy's (no node joined it) and the stored ones.
      sqliteOf(store).exec("UPDATE nodes SET auto_pair = 0; DELETE FROM mesh_pairs");
      return await f();
    } finally {
      sqliteOf(store).exec("ROLLBACK");
    }
  };
  const worker = store.worker();
  assert.ok(worker);
  assert.equal(await worker.counts(), null, "no thread yet: the caller counts");
  assert.deepEqual(await uncommitted(counted), [1, 4, 0], "counted on the main connection");
  worker.start();
  assert.deepEqual(await worker.counts(), { configs: 1, nodes: 4, mesh_pairs: 6 });
  assert.deepEqual(await uncommitted(counted), [1, 4, 6], "counted on the worker's connection");
  await mesh.createNode(configId, { name: "n4", mode: "static", public_address: "192.0.2.9", listen_port: 51820 });
  assert.deepEqual(await counted(), [1, 5, 10], "a commit before the call is in the worker's counts");
  await worker.close();
  assert.deepEqual(await uncommitted(counted), [1, 5, 0], "closed: counted on the main connection again");
});

test("DESIGN §5 system status: counted on the main connection, the status waits for a write whose transaction is open across an await, and counts only what it committed", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-store-worker-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const deps = { store, registry: { projections: () => [] } as never, mqttEnabled: false, brokerConnected: () => false, releaseDownloadUrl: "" };
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  let inserted = () => {};
  const insertedOnce = new Promise<void>((resolve) => (inserted = resolve));
  const write = store.transaction(async (trx) => {
    await trx
      .insertInto("configs")
      .values({ config_id: "cfg-a", name: "a", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24", awg_params: "{}", created_at: 1, updated_at: 1 })
      .execute();
    inserted();
    await held; // a write that awaits inside its transaction (as the mesh service's do)
    throw new Error("rolled back");
  });
  await insertedOnce;
  const status = systemStatus(deps);
  release();
  await assert.rejects(write, /rolled back/);
  assert.equal((await status).summary.configs, 0, "the rolled-back config was never counted");
});

test("the store's counts are answered between two render steps, not after every step asked before them (the system status of a switch is not held back by its rendering)", async (t) => {
  const { store, configId, ids } = await lazyMesh(t, 24);
  const worker = store.worker();
  assert.ok(worker);
  const job = worker.open(configId, ids);
  t.after(() => job.close());
  // A first step loads the worker's renderer; the steps after it run with nothing to wait for.
  await job.next(1);
  const order: string[] = [];
  const steps = ids.slice(1).map((_, i) => job.next(1).then(() => void order.push(`step ${i}`)));
  const counted = worker.counts().then((c) => {
    order.push("counts");
    assert.equal(c?.nodes, ids.length);
  });
  await Promise.all([...steps, counted]);
  assert.ok(order.indexOf("counts") < ids.length - 2, `the counts came before the last step (${order.indexOf("counts")} of ${order.length})`);
});
