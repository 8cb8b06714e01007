import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import { Store } from "../../src/store/db.js";
import { migrations } from "../../src/store/migrations.js";
import {
  appendNodeTransitions,
  deleteNodeTransitionsBelow,
  latestNodeTransitionsOfConfig,
  listNodeTransitions,
  timelineSlack,
  transitionCutoff,
  type NewNodeTransition,
} from "../../src/store/node-transitions.repository.js";
import { CONFIG, log, seedNodes, tempDbFile } from "../actors/harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The flight recorder's storage (docs/history/decisions-2026.md "recorder cost",
 * "recorder cost, compact rows", migrations 0006 and 0010): rows appended with no
 * per-node index, each linked to its node's previous row; the node's newest row in its
 * `node_client_state.transition_head`; state values interned. Real SQLite files; no service.
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

/** A node's stored newest row, as the registry's group commit reads and writes it. */
const headOf = (store: Store, nodeId: string) =>
  (sqliteOf(store).prepare("SELECT transition_head FROM node_client_state WHERE node_id = ?").pluck().get(nodeId) as number | null | undefined) ?? null;

/** One group commit as the registry makes it: the rows appended, then each node's head stored with its state row. */
function commit(store: Store, rows: NewNodeTransition[]): void {
  sqliteOf(store).transaction(() => {
    const { heads } = appendNodeTransitions(sqliteOf(store), rows, (first) => headOf(store, first.node_id));
    for (const [first, head] of heads) sqliteOf(store).prepare("UPDATE node_client_state SET transition_head = ? WHERE node_id = ?").run(head, first.node_id);
  })();
}

/** Appends `count` rows alternating between the nodes, one group commit per round. */
function insertRounds(store: Store, nodes: string[], count: number): void {
  for (let n = 0; n < count; n++) commit(store, nodes.map((id) => row(id, n)));
}

const ats = (rows: Array<{ at: number }>) => rows.map((r) => r.at - 1_000);
const stored = (store: Store, nodeId: string) =>
  (sqliteOf(store).prepare("SELECT count(*) AS n FROM node_transitions WHERE node_id = ?").get(nodeId) as { n: number }).n;

test("pages read newest first through each node's chain, interleaved with other nodes' rows, `before` exclusive", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  insertRounds(store, ["n1", "n2"], 7);
  const first = listNodeTransitions(sqliteOf(store), "n1", ALL, 3);
  assert.deepEqual(ats(first), [6, 5, 4]);
  assert.ok(first.every((r) => r.node_id === "n1" && !("prev_id" in r)), "only the node's rows, in the public shape");
  const second = listNodeTransitions(sqliteOf(store), "n1", first[2]?.transition_id ?? 0, 3);
  assert.deepEqual(ats(second), [3, 2, 1]);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", second[2]?.transition_id ?? 0, 3)), [0]);
  // A cursor that is not one of the node's rows (another node's id) still pages by id.
  const n2row = listNodeTransitions(sqliteOf(store), "n2", ALL, 3)[1];
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", n2row?.transition_id ?? 0, 2)), [5, 4]);
  assert.deepEqual(listNodeTransitions(sqliteOf(store), "n3", ALL, 3), [], "a node with no rows has none");
  assert.deepEqual(
    latestNodeTransitionsOfConfig(sqliteOf(store), CONFIG).map((r) => [r.node_id, r.at - 1_000]),
    [["n1", 6], ["n2", 6]],
  );
});

test("the cap: the cut-off is the keep-th newest row once a node holds more than keep; retention deletes below it in chunks, keeping the chain whole", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  const keep = 8;
  assert.equal(timelineSlack(keep), 2, "the registry asks for a check once per keep/4 new rows of a node");
  assert.equal(timelineSlack(3), 1, "at least every row");
  insertRounds(store, ["n1", "n2"], keep);
  assert.equal(transitionCutoff(sqliteOf(store), "n1", keep), undefined, "exactly keep rows: nothing to prune");
  insertRounds(store, ["n1", "n2"], 1);
  assert.equal(transitionCutoff(sqliteOf(store), "n2", keep), listNodeTransitions(sqliteOf(store), "n2", ALL, keep)[keep - 1]?.transition_id, "one past keep: the keep-th row is the cut-off");
  insertRounds(store, ["n1"], 12);
  assert.equal(stored(store, "n1"), 21);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", ALL, 100, keep)), [11, 10, 9, 8, 7, 6, 5, 4], "reads answer the cap before it is pruned");
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", listNodeTransitions(sqliteOf(store), "n1", ALL, 6)[5]?.transition_id ?? 0, 100, keep)), [5, 4]);
  const cutoff = transitionCutoff(sqliteOf(store), "n1", keep);
  assert.equal(cutoff, listNodeTransitions(sqliteOf(store), "n1", ALL, keep)[keep - 1]?.transition_id, "the keep-th newest row");
  const chunks: number[] = [];
  for (let deleted = 3; deleted === 3; ) chunks.push((deleted = deleteNodeTransitionsBelow(sqliteOf(store), "n1", cutoff ?? 0, 3)));
  assert.deepEqual(chunks, [3, 3, 3, 3, 1]);
  assert.equal(stored(store, "n1"), keep);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", ALL, 100)), [11, 10, 9, 8, 7, 6, 5, 4]);
  assert.equal(stored(store, "n2"), keep + 1, "other nodes' rows stay");
  assert.equal(transitionCutoff(sqliteOf(store), "n1", keep), undefined, "back at the cap");
  insertRounds(store, ["n1"], 1);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", ALL, 2)), [0, 11], "new rows chain onto the kept ones");
  assert.equal(deleteNodeTransitionsBelow(sqliteOf(store), "n2", cutoff ?? 0, 3), 0, "a cut-off of another node deletes nothing");
  assert.equal(stored(store, "n1"), keep + 1);
});

test("deleting a node deletes its rows (client state by cascade, chain by trigger); ids are never given again", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  insertRounds(store, ["n2", "n1"], 5); // n1 holds the newest row of the table
  const newest = listNodeTransitions(sqliteOf(store), "n1", ALL, 1)[0]?.transition_id ?? Number.NaN;
  sqliteOf(store).prepare("DELETE FROM nodes WHERE node_id = ?").run("n1");
  assert.equal(stored(store, "n1"), 0);
  assert.equal(stored(store, "n2"), 5);
  insertRounds(store, ["n2"], 1);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n2", ALL, 2)), [0, 4]);
  assert.ok((listNodeTransitions(sqliteOf(store), "n2", ALL, 1)[0]?.transition_id ?? 0) > newest, "ids of deleted rows are never given again");
});

test("migrations 0006 and 0010 carry the rows stored by 0005 (ids, chains, values, heads, the id counter)", async (t) => {
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
  const state = sqlite.prepare("INSERT INTO node_client_state (node_id, updated_at) VALUES (?, 0)");
  for (const [i, id] of ["n1", "n2"].entries()) {
    node.run(id, CONFIG, id, `10.9.0.${i + 1}`);
    state.run(id);
  }
  const old = sqlite.prepare(
    "INSERT INTO node_transitions (node_id, at, event, source, request_id, route, value_before, value_after, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  for (let n = 0; n < 4; n++) {
    old.run("n1", 1_000 + n, "config.applied", "ack", `req-${n}`, null, n === 0 ? null : `{"runtime":"r${n - 1}"}`, `{"runtime":"r${n}"}`, `{"confirmed_version":[${n},${n + 1}]}`);
    old.run("n2", 1_000 + n, "node.mode_changed", "rest", null, "PATCH /api/v1/x", null, '{"presence":"offline"}', "{}");
  }
  const { error: later } = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo("0009_mesh_pair_pages");
  assert.equal(later, undefined);
  // The table's newest row goes (0006's layout): its id stays used.
  sqlite.prepare("DELETE FROM node_transitions WHERE transition_id = 8").run();
  sqlite.prepare("UPDATE node_transition_heads SET head_id = 6, rows = 3 WHERE node_id = 'n2'").run();
  await db.destroy();

  const store = await Store.open(file, log);
  t.after(() => store.close());
  const n1 = listNodeTransitions(sqliteOf(store), "n1", ALL, 10);
  assert.deepEqual(n1.map((r) => r.transition_id), [7, 5, 3, 1]);
  assert.deepEqual(ats(n1), [3, 2, 1, 0]);
  assert.deepEqual(n1[0], {
    transition_id: 7,
    node_id: "n1",
    at: 1_003,
    event: "config.applied",
    source: "ack",
    request_id: "req-3",
    route: null,
    value_before: '{"runtime":"r2"}',
    value_after: '{"runtime":"r3"}',
    changes: '{"confirmed_version":[3,4]}',
  });
  assert.equal(n1[3]?.value_before, null, "a first row keeps no before");
  const n2 = listNodeTransitions(sqliteOf(store), "n2", ALL, 10);
  assert.deepEqual(n2.map((r) => [r.transition_id, r.route, r.value_after]), [[6, "PATCH /api/v1/x", '{"presence":"offline"}'], [4, "PATCH /api/v1/x", '{"presence":"offline"}'], [2, "PATCH /api/v1/x", '{"presence":"offline"}']]);
  assert.equal(sqliteOf(store).prepare("SELECT count(*) FROM node_state_values").pluck().get(), 5, "each distinct state value stored once");
  assert.equal(sqliteOf(store).prepare("SELECT count(*) FROM sqlite_master WHERE name IN ('node_transitions_node', 'node_transition_heads')").pluck().get(), 0, "no per-node index, no heads table");
  assert.deepEqual(sqliteOf(store).prepare("SELECT node_id, transition_head FROM node_client_state ORDER BY node_id").all(), [
    { node_id: "n1", transition_head: 7 },
    { node_id: "n2", transition_head: 6 },
  ]);
  commit(store, [row("n1", 9)]);
  assert.deepEqual(listNodeTransitions(sqliteOf(store), "n1", ALL, 2).map((r) => r.transition_id), [9, 7], "ids go on after the migrated ones, past the deleted 8");
});

test("several rows of one node in one group commit chain in order and move its head once", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  insertRounds(store, ["n1"], 1);
  commit(store, [row("n1", 1), row("n2", 1), row("n1", 2), row("n1", 3)]);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", ALL, 10)), [3, 2, 1, 0]);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n2", ALL, 10)), [1]);
  assert.deepEqual(
    listNodeTransitions(sqliteOf(store), "n1", ALL, 10).map((r) => [r.value_before, r.value_after]),
    [3, 2, 1, 0].map((n) => [row("n1", n).value_before, row("n1", n).value_after]),
    "values read back as written",
  );
  assert.equal(sqliteOf(store).prepare("SELECT count(*) FROM node_state_values").pluck().get(), 2, "two distinct values, stored once each");
  // One row per node per commit, its transitions at consecutive ids after the node's previous row.
  assert.deepEqual(sqliteOf(store).prepare("SELECT node_id, count FROM node_transitions ORDER BY transition_id").all(), [
    { node_id: "n1", count: 1 },
    { node_id: "n1", count: 3 },
    { node_id: "n2", count: 1 },
  ]);
  const ids = listNodeTransitions(sqliteOf(store), "n1", ALL, 10).map((r) => r.transition_id);
  assert.deepEqual(ids, [4, 3, 2, 1]);
  assert.equal(listNodeTransitions(sqliteOf(store), "n2", ALL, 1)[0]?.transition_id, 5, "the next row starts after the packed ones");
  // A cursor inside a packed row pages from the middle of it; the cap counts transitions, not rows.
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", 3, 10)), [1, 0]);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", ALL, 10, 2)), [3, 2]);
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", 4, 1)), [2]);
  commit(store, [row("n2", 2)]);
  assert.equal(listNodeTransitions(sqliteOf(store), "n2", ALL, 1)[0]?.transition_id, 6, "the id counter moved past the packed row (not only to its first id)");
});

test("a node with more transitions in one group commit than a row packs (64) gets several rows, chained in order, ids consecutive; another node's rows in between keep theirs", async (t) => {
  const store = await storeWith(t, ["n1", "n2"]);
  const rows: NewNodeTransition[] = [];
  for (let n = 0; n < 150; n++) rows.push(row("n1", n), ...(n % 50 === 0 ? [row("n2", n)] : []));
  commit(store, rows);
  assert.deepEqual(
    sqliteOf(store).prepare("SELECT node_id, count FROM node_transitions ORDER BY transition_id").all(),
    [{ node_id: "n1", count: 64 }, { node_id: "n1", count: 64 }, { node_id: "n1", count: 22 }, { node_id: "n2", count: 3 }],
  );
  const n1 = listNodeTransitions(sqliteOf(store), "n1", ALL, 500);
  assert.deepEqual(ats(n1), Array.from({ length: 150 }, (_, n) => 149 - n), "all 150, newest first");
  assert.deepEqual(n1.map((r) => r.transition_id), Array.from({ length: 150 }, (_, n) => 150 - n));
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n2", ALL, 10)), [100, 50, 0]);
  assert.equal(headOf(store, "n1"), 129, "n1's head is its third row (ids 129..150)");
});

test("the cap over packed rows: the cut-off is the row where the chain reaches keep transitions; nothing is cut while within the cap", async (t) => {
  const store = await storeWith(t, ["n1"]);
  commit(store, [0, 1, 2].map((n) => row("n1", n))); // one row of 3
  commit(store, [3, 4].map((n) => row("n1", n))); // one row of 2
  assert.equal(transitionCutoff(sqliteOf(store), "n1", 5), undefined, "5 transitions, keep 5");
  assert.equal(transitionCutoff(sqliteOf(store), "n1", 3), undefined, "keep 3 is reached in the oldest row: rows are kept whole, nothing lies below it");
  const cut = transitionCutoff(sqliteOf(store), "n1", 2) ?? 0;
  assert.equal(cut, 4, "keep 2: the newest row (ids 4..5) holds them; the row below goes");
  assert.equal(deleteNodeTransitionsBelow(sqliteOf(store), "n1", cut, 10), 1, "one row (of 3 transitions) deleted");
  assert.deepEqual(ats(listNodeTransitions(sqliteOf(store), "n1", ALL, 10)), [4, 3]);
});
