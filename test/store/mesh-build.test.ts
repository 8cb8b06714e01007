/**
 * A full mesh built node by node, its storage side: a node joining with `auto_pair` stores no
 * pair rows (its n − 1 pairs are the full-mesh policy's, src/store/mesh-policy.ts); what the
 * operator changes of them is stored as exceptions; the store opens with the page cache and
 * checkpoint interval large writes need (src/store/db.ts). Real SQLite files; not timed
 * (figures: `npm run bench`).
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
import { countStore } from "../../src/store/summary.repository.js";
import type { MeshPairRow } from "../../src/store/schema.js";
import { sqliteOf } from "../../src/store/connection.js";

async function open(t: { after(fn: () => void | Promise<void>): void }): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), "svc-build-"));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

const storedRows = (store: Store) =>
  (sqliteOf(store).prepare("SELECT (SELECT count(*) FROM mesh_pairs) + (SELECT count(*) FROM mesh_pair_removals) AS n").get() as { n: number }).n;

test("a node joining a full mesh stores no pair: its pairs with every node of its config are the policy's, listed with ids pair-{seq}-{seq}, never paired across configs; a toggle stores one row, a delete one removal", async (t) => {
  const store = await open(t);
  // A clock that does not move: every write has the same millisecond; creation order decides.
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
  assert.equal(storedRows(store), 0, "no row stored for the policy's pairs");
  const rows = (await mesh.listPairs(a, { limit: 10_000 })).mesh_pairs;
  assert.equal(rows.length, (40 * 39) / 2, "n(n − 1)/2 pairs");
  const sides = new Set(rows.map((r) => `${r.node_a}|${r.node_b}`));
  for (const [i, x] of inA.entries()) {
    for (const y of inA.slice(0, i)) assert.ok(sides.has(x < y ? `${x}|${y}` : `${y}|${x}`), `pair ${x} ${y}, answered with node_a < node_b`);
  }
  for (const r of rows) {
    assert.ok(r.node_a < r.node_b);
    assert.equal(r.enabled, true);
    assert.equal(r.created_at, new Date(clock.now()).toISOString());
    assert.ok(pairIdSchema.safeParse(r.pair_id).success, `${r.pair_id} is an id (spec: ^[a-z0-9][a-z0-9_-]{0,63}$)`);
    assert.match(r.pair_id, /^pair-\d{10}-\d{10}$/);
  }
  assert.equal(new Set(rows.map((r) => r.pair_id)).size, rows.length, "ids are distinct");
  assert.deepEqual(rows.map((r) => r.pair_id), [...rows.map((r) => r.pair_id)].sort(), "listed in id order within one millisecond");
  assert.equal((await mesh.listPairs(b, { limit: 10_000 })).mesh_pairs.length, (4 * 3) / 2, "config b's nodes pair among themselves only");
  assert.equal(countStore(store).mesh_pairs, 780 + 6, "the system status counts the policy's pairs");

  // The ids work at the pair API's service: read, toggle, delete; each change is one stored exception.
  const some = rows[7]?.pair_id ?? "";
  assert.equal((await mesh.updatePair(a, some, { enabled: false })).enabled, false);
  assert.equal(storedRows(store), 1, "the disabled pair is a row");
  const page = await mesh.listPairs(a, { limit: 10_000 });
  assert.equal(page.mesh_pairs.length, rows.length);
  assert.equal(page.mesh_pairs.find((p) => p.pair_id === some)?.enabled, false, "same id, now disabled");
  await mesh.deletePair(a, some);
  const other = rows[9]?.pair_id ?? "";
  await mesh.deletePair(a, other);
  assert.equal((await mesh.listPairs(a, { limit: 10_000 })).mesh_pairs.length, rows.length - 2);
  assert.equal(storedRows(store), 2, "two removals, no row");
  assert.equal(countStore(store).mesh_pairs, 778 + 6);
});

test("auto_pair false: the node joins nobody, and the nodes created after it with auto_pair join it; a pair made by hand between two nodes is one row", async (t) => {
  const store = await open(t);
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: false });
  const c = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as never)).config_id;
  const x = (await mesh.createNode(c, { name: "x", mode: "static" } as never)).node_id;
  const y = (await mesh.createNode(c, { name: "y", mode: "static", auto_pair: false } as never)).node_id;
  const pairsOf = async () => (await mesh.listPairs(c, { limit: 100 })).mesh_pairs.map((p) => [p.node_a, p.node_b].sort().join("|")).sort();
  assert.deepEqual(await pairsOf(), []);
  const z = (await mesh.createNode(c, { name: "z", mode: "static" } as never)).node_id;
  assert.deepEqual(await pairsOf(), [[x, z].sort().join("|"), [y, z].sort().join("|")].sort());
  await mesh.createPair(c, { node_a: x, node_b: y });
  assert.equal((await pairsOf()).length, 3);
  assert.equal(storedRows(store), 1);
  await assert.rejects(mesh.createPair(c, { node_a: z, node_b: x }), /already paired/);
});

test("the store opens with a 64 MiB page cache and checkpoints every 50,000 WAL pages", async (t) => {
  const store = await open(t);
  assert.equal(PAGE_CACHE_SIZE, -65536);
  assert.equal(WAL_AUTOCHECKPOINT_PAGES, 50_000);
  assert.equal(sqliteOf(store).pragma("cache_size", { simple: true }), -65536);
  assert.equal(sqliteOf(store).pragma("wal_autocheckpoint", { simple: true }), 50_000);
});

test("a node created later sorts before the nodes created before it (node ids descend in creation order; ids of the same millisecond differ in their random part)", async (t) => {
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
  const same = [(await mesh.createNode(c, { name: "s1", mode: "static" } as never)).node_id, (await mesh.createNode(c, { name: "s2", mode: "static" } as never)).node_id];
  assert.notEqual(same[0], same[1]);
  assert.equal(same[0]?.slice(0, 13), same[1]?.slice(0, 13));
});
