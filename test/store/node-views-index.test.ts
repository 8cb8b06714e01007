/**
 * Issue 14 item 2: the node views of a config (overviews: `config.overview.updated`, spec §6.5)
 * are read from the covering index `nodes_views` (migration 0012) without touching the table,
 * whose rows carry the ~100 KB staged config text before the columns a view needs. The plan is
 * SQLite's own (EXPLAIN QUERY PLAN of the statement `listNodesWithoutTexts` prepares); real SQLite.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ManualClock } from "../../src/clock.js";
import { createLogger } from "../../src/logger.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { Store } from "../../src/store/db.js";
import { listNodes, listNodesWithoutTexts } from "../../src/store/nodes.repository.js";

test("issue 14 item 2: listNodesWithoutTexts reads the covering index nodes_views only (no table row, no text overflow), and answers every view column of listNodes", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-views-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  for (let i = 0; i < 3; i++) await mesh.createNode(configId, { name: `n${i}`, mode: "static", public_address: "192.0.2.1", listen_port: 51820 + i });

  const prepared: string[] = [];
  const prepare = store.sqlite.prepare.bind(store.sqlite);
  store.sqlite.prepare = ((source: string) => {
    prepared.push(source);
    return prepare(source);
  }) as typeof store.sqlite.prepare;
  const rows = await listNodesWithoutTexts(store.db, configId);
  store.sqlite.prepare = prepare as typeof store.sqlite.prepare;

  const [statement] = prepared;
  assert.ok(statement !== undefined && prepared.length === 1, "one statement");
  const plan = store.sqlite.prepare(`EXPLAIN QUERY PLAN ${statement}`).all(configId) as Array<{ detail: string }>;
  assert.deepEqual(plan.map((p) => p.detail), ["SEARCH nodes USING COVERING INDEX nodes_views (config_id=?)"]);

  const full = await listNodes(store.db, configId);
  assert.deepEqual(rows, full.map(({ private_key: _k, staged_config_text: _t, ...view }) => view));
});
