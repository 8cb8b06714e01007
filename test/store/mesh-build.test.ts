/**
 * A 5,000-node full mesh built over REST, its storage side of a node joining
 * a full mesh. Its n − 1 pairs are inserted by one `INSERT … SELECT` with ids made of one
 * per-write prefix and the row's number (src/store/mesh-pairs.repository.ts
 * `insertPairsWithAll`), and the store opens with the page cache and checkpoint interval the
 * build needs (src/store/db.ts). Real SQLite files; not timed (figures: `npm run bench`).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { pairIdSchema } from "../../src/protocol/ids.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { PAGE_CACHE_SIZE, Store, WAL_AUTOCHECKPOINT_PAGES } from "../../src/store/db.js";
import { insertPairsWithAll } from "../../src/store/mesh-pairs.repository.js";
import type { MeshPairRow } from "../../src/store/schema.js";
import { sqliteOf } from "../../src/store/connection.js";

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";
/** Row number `i` as the 5 base32 digits the ids end with. */
const digits = (i: number) => [20, 15, 10, 5, 0].map((s) => BASE32[(i >> s) & 31]).join("");

async function open(t: { after(fn: () => void | Promise<void>): void }): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), "svc-build-"));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

test("a node joining a full mesh gets one pair with each other node of its config, ids = one prefix per write + the row's number, distinct across writes of the same millisecond", async (t) => {
  const store = await open(t);
  // A clock that does not move: every write has the same millisecond, so only the per-write
  // random part of the prefix tells two writes' ids apart.
  const clock = new ManualClock();
  const mesh = new MeshService({ store, clock, mqttEnabled: false, eagerPeerBudget: 0 });
  const cidr = { tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as const;
  const a = (await mesh.createConfig({ name: "a", ...cidr } as never)).config_id;
  const b = (await mesh.createConfig({ name: "b", ...cidr } as never)).config_id;
  const inA: string[] = [];
  for (let i = 0; i < 40; i++) {
    inA.push((await mesh.createNode(a, { name: `a${i}`, mode: "static" } as never)).node_id);
    // Nodes of another config in between: never paired with a's.
    if (i % 10 === 0) await mesh.createNode(b, { name: `b${i}`, mode: "static" } as never);
  }
  const rows = sqliteOf(store).prepare("SELECT * FROM mesh_pairs WHERE config_id = ?").all(a) as MeshPairRow[];
  assert.equal(rows.length, (40 * 39) / 2, "n(n − 1)/2 pairs");
  const sides = new Set(rows.map((r) => `${r.node_a}|${r.node_b}`));
  for (const [i, x] of inA.entries()) {
    for (const y of inA.slice(0, i)) assert.ok(sides.has(x < y ? `${x}|${y}` : `${y}|${x}`), `pair ${x} ${y}, stored with node_a < node_b`);
  }
  for (const r of rows) {
    assert.ok(r.node_a < r.node_b);
    assert.equal(r.enabled, 1);
    assert.equal(r.created_at, clock.now());
    assert.equal(r.updated_at, clock.now());
    assert.ok(pairIdSchema.safeParse(r.pair_id).success, `${r.pair_id} is an id (spec: ^[a-z0-9][a-z0-9_-]{0,63}$)`);
  }
  assert.equal(new Set(rows.map((r) => r.pair_id)).size, rows.length, "ids are distinct");
  // Grouped by prefix (`pair-` + 8 time + 8 random characters): one group per write, whose ids
  // end with the row numbers 0 … k − 1.
  const byWrite = new Map<string, string[]>();
  for (const r of rows) byWrite.set(r.pair_id.slice(0, 21), [...(byWrite.get(r.pair_id.slice(0, 21)) ?? []), r.pair_id.slice(21)]);
  assert.deepEqual([...byWrite.values()].map((s) => s.length).sort((x, y) => x - y), Array.from({ length: 39 }, (_, i) => i + 1), "the k-th node's write: k − 1 ids, one prefix");
  for (const suffixes of byWrite.values()) assert.deepEqual(suffixes.sort(), Array.from({ length: suffixes.length }, (_, i) => digits(i)).sort());
  const bRows = sqliteOf(store).prepare("SELECT count(*) AS n FROM mesh_pairs WHERE config_id = ?").get(b) as { n: number };
  assert.equal(bRows.n, (4 * 3) / 2, "config b's nodes pair among themselves only");

  // The ids work at the pair API's service: read, toggle, delete.
  const some = rows[7]?.pair_id ?? "";
  assert.equal((await mesh.updatePair(a, some, { enabled: false })).enabled, false);
  const page = await mesh.listPairs(a, { limit: 10_000 });
  assert.equal(page.mesh_pairs.length, rows.length);
  assert.equal(page.mesh_pairs.find((p) => p.pair_id === some)?.enabled, false);
  await mesh.deletePair(a, some);
  assert.equal((await mesh.listPairs(a, { limit: 10_000 })).mesh_pairs.length, rows.length - 1);
});

test("auto_pair false inserts no pairs; pairing a node that has its pairs already fails on the unique pair and inserts nothing", async (t) => {
  const store = await open(t);
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: false });
  const c = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as never)).config_id;
  await mesh.createNode(c, { name: "x", mode: "static" } as never);
  const y = (await mesh.createNode(c, { name: "y", mode: "static", auto_pair: false } as never)).node_id;
  const count = () => (sqliteOf(store).prepare("SELECT count(*) AS n FROM mesh_pairs").get() as { n: number }).n;
  assert.equal(count(), 0);
  assert.equal(await insertPairsWithAll(store.db, c, y, "pair-test", 1), 1);
  await assert.rejects(insertPairsWithAll(store.db, c, y, "pair-again", 2), /UNIQUE constraint failed: mesh_pairs\.node_a, mesh_pairs\.node_b/);
  assert.equal(count(), 1);
});

test("the store opens with a 64 MiB page cache and checkpoints every 50,000 WAL pages", async (t) => {
  const store = await open(t);
  assert.equal(PAGE_CACHE_SIZE, -65536);
  assert.equal(WAL_AUTOCHECKPOINT_PAGES, 50_000);
  assert.equal(sqliteOf(store).pragma("cache_size", { simple: true }), -65536);
  assert.equal(sqliteOf(store).pragma("wal_autocheckpoint", { simple: true }), 50_000);
});

test("a node created later sorts before the nodes created before it, so it is node_a of every pair it gets when it joins (its index entries lie together)", async (t) => {
  const store = await open(t);
  const clock = new ManualClock();
  const mesh = new MeshService({ store, clock, mqttEnabled: false, eagerPeerBudget: 0 });
  const c = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as never)).config_id;
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    clock.advance(1);
    const id = (await mesh.createNode(c, { name: `n${i}`, mode: "static" } as never)).node_id;
    assert.match(id, /^node-[a-z2-7]{16}$/, "the syntax of newId");
    ids.push(id);
  }
  assert.deepEqual(ids, [...ids].sort().reverse(), "ids descend in creation order");
  for (const [i, id] of ids.entries()) {
    const asA = sqliteOf(store).prepare("SELECT count(*) AS n FROM mesh_pairs WHERE node_a = ? AND created_at = ?").get(id, Date.parse("2026-01-01T00:00:00.000Z") + i + 1) as { n: number };
    assert.equal(asA.n, i, `the ${i + 1}th node is node_a of the ${i} pairs its create made`);
  }
  // A millisecond apart is enough; ids of the same millisecond differ in their random part.
  const same = [(await mesh.createNode(c, { name: "s1", mode: "static" } as never)).node_id, (await mesh.createNode(c, { name: "s2", mode: "static" } as never)).node_id];
  assert.notEqual(same[0], same[1]);
  assert.equal(same[0]?.slice(0, 13), same[1]?.slice(0, 13));
});
