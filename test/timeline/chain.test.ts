import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import { Store } from "../../src/store/db.js";
import { migrations } from "../../src/store/migrations.js";
import {
  deleteNodeTransitionsBelow,
  insertNodeTransitions,
  latestNodeTransitionsOfConfig,
  listNodeTransitions,
  timelineSlack,
  transitionCutoff,
  type NewNodeTransition,
} from "../../src/store/node-transitions.repository.js";
import { CONFIG, log, seedNodes, tempDbFile } from "../actors/harness.js";

/**
 * The flight recorder's storage (issue 13 item 3; docs/decisions.md "Issue 13: recorder cost",
 * migration 0006): rows appended with no per-node index, each linked to its node's previous row,
 * one head row per node. Real SQLite files; no service.
 */

const ALL = Number.MAX_SAFE_INTEGER;

function row(nodeId: string, n: number): NewNodeTransition {
  return {
    node_id: nodeId,
    at: 1_000 + n,
    event: "mqtt.signal",
    source: "heartbeat",
    request_id: null,
    route: null,
    value_before: JSON.stringify({ runtime: n % 2 ? "stopped" : "running" }),
    value_after: JSON.stringify({ runtime: n % 2 ? "running" : "stopped" }),
    changes: "{}",
  };
}

async function storeWith(t: TestContext, nodes: string[]): Promise<Store> {
  const store = await Store.open(tempDbFile(t), log);
  t.after(() => store.close());
  await seedNodes(store, nodes);
  return store;
}

/** Inserts `count` rows alternating between the nodes, one group commit per round; returns the ats per node. */
function insertRounds(store: Store, nodes: string[], count: number): void {
  for (let n = 0; n < count; n++) store.sqlite.transaction(() => insertNodeTransitions(store.sqlite, nodes.map((id) => row(id, n))))();
}

const ats = (rows: Array<{ at: number }>) => rows.map((r) => r.at - 1_000);
const stored = (store: Store, nodeId: string) =>
  (store.sqlite.prepare("SELECT count(*) AS n FROM node_transitions WHERE node_id = ?").get(nodeId) as { n: number }).n;

test("issue 13 item 3: pages read newest first through each node's chain, interleaved with other nodes' rows, `before` exclusive", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  insertRounds(store, ["n1", "n2"], 7);
  const first = listNodeTransitions(store.sqlite, "n1", ALL, 3);
  assert.deepEqual(ats(first), [6, 5, 4]);
  assert.ok(first.every((r) => r.node_id === "n1" && !("prev_id" in r)), "only the node's rows, in the public shape");
  const second = listNodeTransitions(store.sqlite, "n1", first[2]?.transition_id ?? 0, 3);
  assert.deepEqual(ats(second), [3, 2, 1]);
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", second[2]?.transition_id ?? 0, 3)), [0]);
  // A cursor that is not one of the node's rows (another node's id) still pages by id.
  const n2row = listNodeTransitions(store.sqlite, "n2", ALL, 3)[1];
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", n2row?.transition_id ?? 0, 2)), [5, 4]);
  assert.deepEqual(listNodeTransitions(store.sqlite, "n3", ALL, 3), [], "a node with no rows has none");
  assert.deepEqual(
    latestNodeTransitionsOfConfig(store.sqlite, CONFIG).map((r) => [r.node_id, r.at - 1_000]),
    [["n1", 6], ["n2", 6]],
  );
});

test("issue 13 item 3, the cap: retention finds the cut-off once a node holds more than cap + cap/8 rows and deletes below it in chunks, keeping the chain whole", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  const keep = 8;
  assert.equal(timelineSlack(keep), 1);
  insertRounds(store, ["n1", "n2"], keep + 1);
  assert.equal(transitionCutoff(store.sqlite, "n1", keep), undefined, "within the slack: no walk, nothing to prune");
  insertRounds(store, ["n1"], 12);
  assert.equal(stored(store, "n1"), 21);
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", ALL, 100, keep)), [11, 10, 9, 8, 7, 6, 5, 4], "reads answer the cap before it is pruned");
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", listNodeTransitions(store.sqlite, "n1", ALL, 6)[5]?.transition_id ?? 0, 100, keep)), [5, 4]);
  const cutoff = transitionCutoff(store.sqlite, "n1", keep);
  assert.equal(cutoff, listNodeTransitions(store.sqlite, "n1", ALL, keep)[keep - 1]?.transition_id, "the keep-th newest row");
  const chunks: number[] = [];
  for (let deleted = 3; deleted === 3; ) chunks.push((deleted = deleteNodeTransitionsBelow(store.sqlite, "n1", cutoff ?? 0, 3)));
  assert.deepEqual(chunks, [3, 3, 3, 3, 1]);
  assert.equal(stored(store, "n1"), keep);
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", ALL, 100)), [11, 10, 9, 8, 7, 6, 5, 4]);
  assert.equal(stored(store, "n2"), keep + 1, "other nodes' rows stay");
  assert.equal(transitionCutoff(store.sqlite, "n1", keep), undefined, "the head's count went down with the deletes");
  insertRounds(store, ["n1"], 1);
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", ALL, 2)), [0, 11], "new rows chain onto the kept ones");
  assert.equal(deleteNodeTransitionsBelow(store.sqlite, "n2", cutoff ?? 0, 3), 0, "a cut-off of another node deletes nothing");
});

test("issue 13 item 3: deleting a node deletes its rows (head by cascade, chain by trigger); rows of a node deleted before the commit are skipped", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  insertRounds(store, ["n2", "n1"], 5); // n1 holds the newest row of the table
  const newest = listNodeTransitions(store.sqlite, "n1", ALL, 1)[0]?.transition_id ?? Number.NaN;
  store.sqlite.prepare("DELETE FROM nodes WHERE node_id = ?").run("n1");
  assert.equal(stored(store, "n1"), 0);
  assert.equal(stored(store, "n2"), 5);
  insertRounds(store, ["n1", "n2"], 1);
  assert.equal(stored(store, "n1"), 0, "no row, no head for a node that is gone");
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n2", ALL, 2)), [0, 4]);
  assert.ok((listNodeTransitions(store.sqlite, "n2", ALL, 1)[0]?.transition_id ?? 0) > newest, "ids of deleted rows are never given again");
});

test("issue 13 item 3: migration 0006 links the rows stored by 0005 into per-node chains with their ids, heads and counts", async (t) => {
  const file = tempDbFile(t);
  const sqlite = new SQLite(file);
  sqlite.pragma("foreign_keys = ON");
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) });
  const { error } = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo("0005_node_transitions");
  assert.equal(error, undefined);
  sqlite.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES (?, 'm', 'wireguard', '10.9.0.0/24', 0, 0)").run(CONFIG);
  const node = sqlite.prepare(
    "INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at) VALUES (?, ?, ?, 'dynamic', 'svc0', ?, 'k', 'p', 0, 0)",
  );
  node.run("n1", CONFIG, "n1", "10.9.0.1");
  node.run("n2", CONFIG, "n2", "10.9.0.2");
  const old = sqlite.prepare(
    "INSERT INTO node_transitions (node_id, at, event, source, value_before, value_after, changes) VALUES (?, ?, 'mqtt.signal', 'heartbeat', NULL, '{}', '{}')",
  );
  for (let n = 0; n < 4; n++) for (const id of ["n1", "n2"]) old.run(id, 1_000 + n);
  await db.destroy();

  const store = await Store.open(file, log);
  t.after(() => store.close());
  const n1 = listNodeTransitions(store.sqlite, "n1", ALL, 10);
  assert.deepEqual(n1.map((r) => r.transition_id), [7, 5, 3, 1]);
  assert.deepEqual(ats(n1), [3, 2, 1, 0]);
  assert.equal(store.sqlite.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'node_transitions_node'").pluck().get(), 0, "no per-node index");
  assert.deepEqual(store.sqlite.prepare("SELECT node_id, head_id, rows FROM node_transition_heads ORDER BY node_id").all(), [
    { node_id: "n1", head_id: 7, rows: 4 },
    { node_id: "n2", head_id: 8, rows: 4 },
  ]);
  insertNodeTransitions(store.sqlite, [row("n1", 9)]);
  assert.deepEqual(listNodeTransitions(store.sqlite, "n1", ALL, 2).map((r) => r.transition_id), [9, 7], "ids go on after the migrated ones");
});

test("issue 13 item 3: several rows of one node in one group commit chain in order and move its head once, counted", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  insertRounds(store, ["n1"], 1);
  store.sqlite.transaction(() => insertNodeTransitions(store.sqlite, [row("n1", 1), row("n2", 1), row("n1", 2), row("gone", 1), row("n1", 3)]))();
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n1", ALL, 10)), [3, 2, 1, 0]);
  assert.deepEqual(ats(listNodeTransitions(store.sqlite, "n2", ALL, 10)), [1]);
  assert.deepEqual(store.sqlite.prepare("SELECT node_id, rows FROM node_transition_heads ORDER BY node_id").all(), [
    { node_id: "n1", rows: 4 },
    { node_id: "n2", rows: 1 },
  ]);
});
