/**
 * The node views of a whole config (the mesh page's workspace
 * `GET /api/v1/configs/{id}`, overviews `config.overview.updated`, spec §6.5) are read from the
 * covering index `nodes_views` (migration 0012) without touching the table, whose rows carry the
 * ~100 KB staged config text before the columns a view needs, and with the client-state rows by
 * key: one statement (`mapConfigNodes`), plus one for the tags (`configTagsByNode`). The plan is
 * SQLite's own (EXPLAIN QUERY PLAN of the statements they prepare); real SQLite. What they read is
 * checked against the per-row reads of the same data (`listNodes`, `findClientState`,
 * `listTagsOfNode`).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { Store } from "../../src/store/db.js";
import { configTagsByNode, mapConfigNodes } from "../../src/store/node-list.repository.js";
import { findClientState, listNodes, listTagsOfNode } from "../../src/store/nodes.repository.js";
import { sqliteOf } from "../../src/store/connection.js";

test("mapConfigNodes reads the covering index nodes_views (no table row, no text overflow) and client states by key, in one statement, and answers every view column of listNodes with each node's client state; configTagsByNode each node's sorted tags", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-views-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const clock = new ManualClock();
  const mesh = new MeshService({ store, clock, mqttEnabled: true });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  const other = (await mesh.createConfig({ name: "d", tunnel_protocol: "wireguard", network_cidr: "10.8.0.0/24" })).config_id;
  const tags = [["b", "a"], [], ["z"], ["m", "c", "x"]];
  for (const [i, nodeTags] of tags.entries()) {
    clock.advance(1000);
    await mesh.createNode(configId, { name: `n${i}`, mode: i % 2 === 0 ? "static" : "dynamic", public_address: "192.0.2.1", listen_port: 51820 + i, tags: nodeTags });
  }
  await mesh.createNode(other, { name: "elsewhere", mode: "static", tags: ["a"] });
  const nodes = await listNodes(store.db, configId);
  // A reachable, versioned client for one node; none at all (no client-state row) for another.
  sqliteOf(store)
    .prepare("UPDATE node_client_state SET client_initialized = 1, client_presence_state = 'online', runtime_state = 'running', last_reachable_at = 5, client_version = '1.2.3' WHERE node_id = ?")
    .run(nodes[1]?.node_id);
  sqliteOf(store).prepare("DELETE FROM node_client_state WHERE node_id = ?").run(nodes[2]?.node_id);

  const prepared: string[] = [];
  const prepare = sqliteOf(store).prepare.bind(sqliteOf(store));
  sqliteOf(store).prepare = ((source: string) => {
    prepared.push(source);
    return prepare(source);
  }) as ReturnType<typeof sqliteOf>["prepare"];
  const rows = mapConfigNodes(sqliteOf(store), configId, (node, client) => ({ node, client }));
  const byNode = configTagsByNode(sqliteOf(store), configId);
  sqliteOf(store).prepare = prepare as ReturnType<typeof sqliteOf>["prepare"];

  const [rowsStatement, tagsStatement] = prepared;
  assert.ok(rowsStatement !== undefined && tagsStatement !== undefined && prepared.length === 2, "one statement each");
  const plan = (text: string) => (sqliteOf(store).prepare(`EXPLAIN QUERY PLAN ${text}`).all(configId) as Array<{ detail: string }>).map((p) => p.detail);
  assert.deepEqual(plan(rowsStatement), [
    "SEARCH n USING COVERING INDEX nodes_views (config_id=?)",
    "SEARCH cs USING INDEX sqlite_autoindex_node_client_state_1 (node_id=?) LEFT-JOIN",
  ]);
  assert.ok(plan(tagsStatement).every((d) => !d.startsWith("SCAN")), "the tags are found by key, no table is scanned");

  assert.deepEqual(
    rows.map((r) => r.node),
    // The full-mesh policy's columns are no view column.
    nodes.map(({ private_key: _k, mesh_seq: _s, auto_pair: _a, ...view }) => view),
  );
  for (const [i, r] of rows.entries()) {
    const stored = await findClientState(store.db, r.node.node_id);
    const expected = stored && {
      client_initialized: stored.client_initialized,
      client_presence_state: stored.client_presence_state,
      runtime_state: stored.runtime_state,
      last_reachable_at: stored.last_reachable_at,
      client_version: stored.client_version,
    };
    assert.deepEqual(r.client, expected, `node ${i}`);
  }
  assert.equal(rows[2]?.client, undefined, "no client-state row: no client state");
  assert.equal(rows[1]?.client?.client_version, "1.2.3");

  assert.deepEqual([...byNode.keys()].sort(), nodes.filter((_, i) => (tags[i] ?? []).length > 0).map((n) => n.node_id).sort(), "only this config's nodes, only those with tags");
  for (const n of nodes) assert.deepEqual(byNode.get(n.node_id) ?? [], await listTagsOfNode(store.db, n.node_id));
});
