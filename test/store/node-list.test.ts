import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { createLogger } from "../../src/logger.js";
import { nodeView } from "../../src/services/views.js";
import { Store } from "../../src/store/db.js";
import { emptyNodeStateCounts, nodePage, nodeScanBoundary, nodeStateCounts, tagsOfNodes, type NodeListFilter, type NodeListPosition } from "../../src/store/node-list.repository.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The node list's filters and counts run in SQL (PRESENCE_SQL, SYNC_SQL of
 * src/store/node-list.repository.ts), while every answer derives presence and sync state with
 * `clientView` (src/services/views.ts; spec §3.1, §3.5, §6.5 rule 7). These properties hold the two
 * derivations to each other for random node states, with MQTT services on and off (spec §1.7),
 * and check that keyset pages concatenate to the whole filtered list in order.
 */

const SHA_A = "a".repeat(64);
const SHA_B = "b".repeat(64);

const nodeArb = fc.record({
  mode: fc.constantFrom("static" as const, "dynamic" as const),
  initialized: fc.boolean(),
  presence: fc.constantFrom("online" as const, "dropped" as const, "offline" as const),
  staged: fc.constantFrom(null, SHA_A),
  confirmed: fc.constantFrom(null, SHA_A, SHA_B),
  hasClientRow: fc.boolean(),
  name: fc.constantFrom("alpha", "beta", "Gamma", "edge_1", "50%"),
  tags: fc.subarray(["eu", "us", "db"]),
  createdAt: fc.integer({ min: 0, max: 5 }), // few distinct times: ties are broken by node_id
});

const filterArb: fc.Arbitrary<NodeListFilter> = fc.record(
  {
    presence: fc.constantFrom("online" as const, "dropped" as const, "offline" as const),
    mode: fc.constantFrom("static" as const, "dynamic" as const),
    sync: fc.constantFrom("latest" as const, "pending" as const, "static" as const),
    q: fc.constantFrom("a", "GAM", "_", "%", "eu", "10.0.0.1", "zz"),
  },
  { requiredKeys: [] },
);

async function openStore(): Promise<{ store: Store; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "svc-list-"));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  return {
    store,
    close: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function seed(store: Store, nodes: Array<typeof nodeArb extends fc.Arbitrary<infer T> ? T : never>): void {
  const s = sqliteOf(store);
  s.exec("DELETE FROM nodes; DELETE FROM configs;");
  s.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES ('c1', 'one', 'wireguard', '10.0.0.0/16', 0, 0)").run();
  const insNode = s.prepare(`INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key,
    staged_config_version, staged_config_sha256, confirmed_config_sha256, created_at, updated_at)
    VALUES (?, 'c1', ?, ?, 'svc0', ?, 'k', 'K', 1, ?, ?, ?, ?)`);
  const insClient = s.prepare("INSERT INTO node_client_state (node_id, client_initialized, client_presence_state, updated_at) VALUES (?, ?, ?, 0)");
  const insTag = s.prepare("INSERT INTO node_tags (node_id, tag) VALUES (?, ?)");
  s.transaction(() => {
    nodes.forEach((n, i) => {
      const id = `n${String(i).padStart(3, "0")}`;
      insNode.run(id, `${n.name}-${i}`, n.mode, `10.0.0.${i + 1}`, n.staged, n.confirmed, n.createdAt, n.createdAt);
      if (n.hasClientRow) insClient.run(id, n.initialized ? 1 : 0, n.presence);
      for (const tag of n.tags) insTag.run(id, tag);
    });
  })();
}

/** Every node of c1 as the API shows it (clientView's derivation), in (created_at, node_id) order. */
function allViews(store: Store, mqtt: boolean) {
  const rows = nodePage(sqliteOf(store), "c1", {}, undefined, 10_000, mqtt);
  const tags = tagsOfNodes(sqliteOf(store), rows.map((r) => r.node.node_id));
  return rows.map((r) => ({ view: nodeView(r.node, tags.get(r.node.node_id) ?? [], r.client, mqtt), createdAt: r.node.created_at }));
}

function matches(v: ReturnType<typeof nodeView>, f: NodeListFilter): boolean {
  const q = f.q?.toLowerCase();
  return (
    (f.presence === undefined || v.client.client_presence_state === f.presence) &&
    (f.mode === undefined || v.mode === f.mode) &&
    (f.sync === undefined || (v.client.config_version_state ?? "static") === f.sync) &&
    (q === undefined ||
      [v.name, v.address, v.public_address ?? "", ...v.tags].some((s) => s.toLowerCase().includes(q)))
  );
}

test("spec §3.1/§3.5: SQL filters and counts agree with clientView, and keyset pages (bounded scans) concatenate to the filtered list in order; counts summed over ranges equal one count", async (t) => {
  const { store, close } = await openStore();
  t.after(close);
  await fc.assert(
    fc.asyncProperty(fc.array(nodeArb, { maxLength: 40 }), filterArb, fc.integer({ min: 1, max: 7 }), fc.boolean(), fc.integer({ min: 1, max: 9 }), async (nodes, filter, limit, mqtt, budget) => {
      seed(store, nodes);
      const all = allViews(store, mqtt);
      // Full order: (created_at, node_id).
      const keys = all.map((a) => `${a.createdAt}/${a.view.node_id}`);
      assert.deepEqual(keys, [...keys].sort((x, y) => {
        const [ax, ay] = [Number(x.split("/")[0]), Number(y.split("/")[0])];
        return ax - ay || (x < y ? -1 : x > y ? 1 : 0);
      }));
      const expected = all.filter((a) => matches(a.view, filter)).map((a) => a.view.node_id);

      // Pages as src/services/lists.ts asks for them: each scan bounded by `budget` index entries
      // (a short or empty page continues after the bound).
      const got: string[] = [];
      let after: NodeListPosition | undefined;
      for (let pages = 0; pages <= 2 * nodes.length + 2; pages++) {
        const until = nodeScanBoundary(sqliteOf(store), "c1", after, budget);
        const rows = nodePage(sqliteOf(store), "c1", filter, after, limit, mqtt, until);
        assert.ok(rows.length <= limit + 1);
        const page = rows.slice(0, limit);
        got.push(...page.map((r) => r.node.node_id));
        const last = page[page.length - 1];
        const next = rows.length > limit && last !== undefined ? last.node : until;
        if (next === undefined) break;
        after = next;
      }
      assert.deepEqual(got, expected);

      // Counts in one statement, and summed over ranges of `budget` nodes, are the same.
      const ranged = emptyNodeStateCounts();
      let from: NodeListPosition | undefined;
      for (;;) {
        const until = nodeScanBoundary(sqliteOf(store), "c1", from, budget);
        nodeStateCounts(sqliteOf(store), "c1", filter, mqtt, { after: from, until }, ranged);
        if (until === undefined) break;
        from = until;
      }
      assert.deepEqual(ranged, nodeStateCounts(sqliteOf(store), "c1", filter, mqtt));

      const counts = nodeStateCounts(sqliteOf(store), "c1", filter, mqtt);
      assert.equal(counts.total, all.length);
      assert.equal(counts.matching, expected.length);
      for (const p of ["online", "dropped", "offline"] as const) {
        assert.equal(counts.presence[p], all.filter((a) => a.view.client.client_presence_state === p).length, `presence ${p}`);
      }
      for (const s of ["latest", "pending", "static"] as const) {
        assert.equal(counts.sync[s], all.filter((a) => (a.view.client.config_version_state ?? "static") === s).length, `sync ${s}`);
      }
      assert.equal(counts.mode.dynamic, all.filter((a) => a.view.mode === "dynamic").length);
    }),
    { numRuns: 150, seed: 1405 },
  );
});

test("the node page reads the index on (config_id, created_at, node_id) of migration 0008, not a sort", async (t) => {
  const { store, close } = await openStore();
  t.after(close);
  const plan = sqliteOf(store)
    .prepare(
      `EXPLAIN QUERY PLAN SELECT n.node_id FROM nodes n INDEXED BY nodes_config_created
       WHERE n.config_id = 'c1' AND (n.created_at, n.node_id) > (1, 'x') ORDER BY n.created_at, n.node_id LIMIT 101`,
    )
    .all() as Array<{ detail: string }>;
  const text = plan.map((p) => p.detail).join("\n");
  assert.match(text, /USING (COVERING )?INDEX nodes_config_created/);
  assert.doesNotMatch(text, /TEMP B-TREE/, "no sort step: the index gives the order");
});
