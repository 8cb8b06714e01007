/**
 * The lazy / incremental staging path (src/store/staging.ts) gives byte-for-byte
 * the config text, sha and version of a full re-render after every mesh write (DESIGN §3 Config
 * versions: the version increments only when the text changes; spec §3.5, §3.8: the text the
 * agent receives hashes to the staged sha). Property-based over random sequences of 200 writes
 * (fast-check, fixed seed), hubs and pairs routed through them included; not timed. The pairs
 * the store holds as the full-mesh policy with exceptions (src/store/mesh-policy.ts) are also
 * proven against a model of explicit rows: the pairs listed, counted and rendered are the model's.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { ManualClock } from "../../src/lib/clock.js";
import { isAppError } from "../../src/errors.js";
import { createLogger } from "../../src/logger.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { Store } from "../../src/store/db.js";
import { listNodes } from "../../src/store/nodes.repository.js";
import { renderConfigTexts, renderConfigTextsOf } from "../../src/services/rendering.service.js";
import { findConfig } from "../../src/store/configs.repository.js";
import { listPortForwardsOfConfig } from "../../src/store/port-forwards.repository.js";
import { countStore } from "../../src/store/summary.repository.js";
import { servedText } from "../helpers/lazy-mesh.js";
import { sqliteOf } from "../../src/store/connection.js";

const PUBLIC = [null, "192.0.2.7", "2001:db8::7", "gw.example.net"] as const;
const PORTS = [null, 51820, 51999] as const;

type Op =
  | { k: "add"; pub: number; port: number; dynamic: boolean; autoPair: boolean; hub: boolean }
  | { k: "hub"; i: number; on: boolean }
  | { k: "rename"; i: number }
  | { k: "address"; i: number; host: number }
  | { k: "remove"; i: number }
  | { k: "endpoint"; i: number; pub: number; port: number }
  | { k: "pair"; i: number; j: number; action: "toggle" | "delete" }
  | { k: "forward"; i: number; port: number; enabled: boolean; action: "add" | "toggle" | "delete" }
  | { k: "protocol" }
  | { k: "mode"; i: number; dynamic: boolean };

const op: fc.Arbitrary<Op> = fc.oneof(
  // Half the nodes have no public address: their pairs go through hubs, or nowhere.
  {
    weight: 4,
    arbitrary: fc.record({ k: fc.constant("add" as const), pub: fc.oneof(fc.constant(0), fc.nat(3)), port: fc.nat(2), dynamic: fc.boolean(), autoPair: fc.boolean(), hub: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("hub" as const), i: fc.nat(), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("rename" as const), i: fc.nat() }) },
  // Hosts 1-12 collide with allocated addresses now and then (CONFLICT), 200-205 are free.
  { weight: 2, arbitrary: fc.record({ k: fc.constant("address" as const), i: fc.nat(), host: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 200, max: 205 })) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("remove" as const), i: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("endpoint" as const), i: fc.nat(), pub: fc.nat(3), port: fc.nat(2) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("pair" as const), i: fc.nat(), j: fc.nat(), action: fc.constantFrom("toggle" as const, "delete" as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("forward" as const), i: fc.nat(), port: fc.integer({ min: 8000, max: 8002 }), enabled: fc.boolean(), action: fc.constantFrom("add" as const, "toggle" as const, "delete" as const) }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("protocol" as const) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("mode" as const), i: fc.nat(), dynamic: fc.boolean() }) },
);

async function apply(mesh: MeshService, configId: string, o: Op, ids: string[], n: number): Promise<void> {
  const pick = (i: number) => ids[i % ids.length] ?? "";
  if (o.k === "add") {
    await mesh.createNode(configId, { name: `n${n}`, mode: o.dynamic ? "dynamic" : "static", public_address: PUBLIC[o.pub] ?? null, listen_port: PORTS[o.port] ?? null, auto_pair: o.autoPair, hub: o.hub } as never);
    return;
  }
  if (ids.length === 0) return;
  if (o.k === "remove") await mesh.deleteNode(configId, pick(o.i));
  else if (o.k === "hub") await mesh.updateNode(configId, pick(o.i), { hub: o.on } as never);
  else if (o.k === "rename") await mesh.updateNode(configId, pick(o.i), { name: `r${n}` } as never);
  else if (o.k === "address") await mesh.updateNode(configId, pick(o.i), { address: `10.9.0.${o.host}` } as never);
  else if (o.k === "endpoint") await mesh.updateNode(configId, pick(o.i), { public_address: PUBLIC[o.pub] ?? null, listen_port: PORTS[o.port] ?? null } as never);
  else if (o.k === "mode") await mesh.updateNode(configId, pick(o.i), { mode: o.dynamic ? "dynamic" : "static" } as never);
  else if (o.k === "protocol") {
    const current = (await mesh.getConfig(configId)).tunnel_protocol;
    await mesh.updateConfig(configId, { tunnel_protocol: current === "wireguard" ? "awg_2" : "wireguard" } as never);
  } else if (o.k === "pair") {
    const [a, b] = [pick(o.i), pick(o.j)];
    if (a === b) return;
    const pair = (await mesh.listPairs(configId, { limit: 10_000, node_id: a })).mesh_pairs.find((p) => (p.node_a === a && p.node_b === b) || (p.node_a === b && p.node_b === a));
    if (!pair) await mesh.createPair(configId, { node_a: a, node_b: b, enabled: o.action === "toggle" });
    else if (o.action === "delete") await mesh.deletePair(configId, pair.pair_id);
    else await mesh.updatePair(configId, pair.pair_id, { enabled: !pair.enabled });
  } else {
    const node = pick(o.i);
    const existing = (await mesh.listPortForwards(configId, node)).find((f) => f.listen_port === o.port);
    if (o.action === "add" || !existing) {
      await mesh.createPortForward(configId, node, { protocol: "tcp", listen_port: o.port, target_address: "10.9.0.2", target_port: 443, enabled: o.enabled } as never);
    } else if (o.action === "delete") await mesh.deletePortForward(configId, node, existing.forward_id);
    else await mesh.updatePortForward(configId, node, existing.forward_id, { enabled: !existing.enabled });
  }
}

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

test("DESIGN §3 Config versions, spec §3.5 §3.8: after each of 200 random mesh writes the lazily staged versions, texts and shas equal a full re-render's, byte for byte", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-incr-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let run = 0;
  // Renderings seen with addresses routed through a hub (`AllowedIPs = a/32, b/32`): the hub paths ran.
  let routedSeen = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 200, maxLength: 200 }), fc.array(fc.boolean(), { minLength: 200, maxLength: 200 }), async (ops, downloads) => {
      const store = await Store.open(join(dir, `svc-${run++}.db`), createLogger("silent"));
      try {
        // Budget 0: every static node is staged lazily, the path under test.
        const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true, eagerPeerBudget: 0 });
        const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as never)).config_id;
        const reference = new Map<string, { version: number; sha: string; text: string }>();
        for (const [step, o] of ops.entries()) {
          const ids = (await listNodes(store.db, configId)).map((n) => n.node_id);
          try {
            await apply(mesh, configId, o, ids, step);
          } catch (err) {
            if (!isAppError(err, "CONFLICT") && !isAppError(err, "VALIDATION_FAILED") && !isAppError(err, "HUB_NEEDS_PUBLIC_ENDPOINT")) throw err;
          }
          // Dynamic nodes of a write above the budget are rendered after its commit.
          await mesh.settled();
          // Reference: a full re-render, versions moved on exactly when the text changed.
          const full = await renderConfigTexts(store.db, configId);
          const next = new Map<string, { version: number; sha: string; text: string }>();
          for (const { node, text } of full) {
            if (/^AllowedIPs = [^\n]*, /m.test(text)) routedSeen++;
            const prev = reference.get(node.node_id);
            const sha = sha256(text);
            next.set(node.node_id, { version: prev === undefined ? 1 : prev.sha === sha ? prev.version : prev.version + 1, sha, text });
            const ref = next.get(node.node_id);
            assert.equal(node.staged_config_version, ref?.version, `step ${step} (${o.k}): version of ${node.node_id}`);
            // A stored (cached) rendering is never stale: it is this version's text or absent.
            if (node.staged_config_sha256 !== null) {
              assert.equal(node.staged_config_sha256, ref?.sha, `step ${step} (${o.k}): cached sha of ${node.node_id}`);
              assert.equal(await servedText(store.db, node), ref?.text);
            }
            if (node.mode === "dynamic") assert.equal(node.staged_config_sha256, ref?.sha, `step ${step}: a dynamic node is rendered once the write settled`);
          }
          reference.clear();
          for (const [k, v] of next) reference.set(k, v);
          // Downloads render on demand: the agent's text hashes to the staged sha (spec §3.8).
          if (downloads[step] === true && full.length > 0) {
            const node = (full[step % full.length] ?? full[0])?.node;
            if (!node) continue;
            const got = await mesh.getStagedConfig(configId, node.node_id);
            const ref = reference.get(node.node_id);
            assert.equal(got.config_text, ref?.text);
            assert.equal(got.config_sha256, sha256(got.config_text));
            assert.equal(got.config_version, ref?.version);
          }
        }
      } finally {
        await store.close();
      }
    }),
    { numRuns: 4, seed: 1308, endOnFailure: true },
  );
  assert.ok(routedSeen > 100, `pairs routed through hubs were rendered (${routedSeen} renderings)`);
});

test("DESIGN §3 Config versions: a write above the eager budget hands its dynamic nodes to the node actors after the commit with the rendered (version, sha); a restart renders those a stopped run left unrendered", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-incr-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const reported: Array<{ nodeId: string; version: number; sha: string }> = [];
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true, eagerPeerBudget: 0, hooks: { afterCommit: (c) => void reported.push(...c.staged) } });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as never)).config_id;
  for (let i = 0; i < 3; i++) await mesh.createNode(configId, { name: `d${i}`, mode: "dynamic", public_address: "192.0.2.1", listen_port: 51820 + i } as never);
  await mesh.createNode(configId, { name: "s", mode: "static" } as never);
  await mesh.settled();
  reported.length = 0;

  await mesh.updateConfig(configId, { tunnel_protocol: "awg_2" } as never);
  const afterWrite = await listNodes(store.db, configId);
  assert.ok(afterWrite.every((n) => n.staged_config_sha256 === null), "the write itself rendered nothing");
  await mesh.settled();
  const rows = await listNodes(store.db, configId);
  const dynamic = rows.filter((n) => n.mode === "dynamic");
  assert.deepEqual(
    [...reported].sort((a, b) => a.nodeId.localeCompare(b.nodeId)),
    dynamic.map((n) => ({ nodeId: n.node_id, version: n.staged_config_version, sha: n.staged_config_sha256 })).sort((a, b) => a.nodeId.localeCompare(b.nodeId)),
  );
  for (const n of dynamic) {
    const text = await servedText(store.db, n);
    assert.ok(text !== null && n.staged_config_sha256 === sha256(text) && text.includes("Jc = "), `${n.node_id}: rendered as awg_2`);
  }
  assert.equal(rows.find((n) => n.mode === "static")?.staged_config_sha256, null, "the static node stays lazy");

  // A run that stopped between commit and rendering: the next start renders and reports them.
  await store.db.updateTable("nodes").set({ staged_config_sha256: null }).where("mode", "=", "dynamic").execute();
  reported.length = 0;
  mesh.resumeRendering();
  await mesh.settled();
  assert.deepEqual(reported.map((r) => r.nodeId).sort(), dynamic.map((n) => n.node_id).sort());
  assert.deepEqual(reported.map((r) => r.sha).sort(), dynamic.map((n) => n.staged_config_sha256).sort(), "the same text, so the same sha");
});

/** The pairs an explicit-rows store would hold: `a|b` (a < b) → enabled. */
type PairModel = Map<string, boolean>;
const pairKey = (x: string, y: string) => (x < y ? `${x}|${y}` : `${y}|${x}`);

/** What `o`, which succeeded, did to the explicit rows (nodes before and after it given). */
function applyToModel(model: PairModel, o: Op, before: readonly string[], after: readonly string[], pairWas: boolean | undefined, pick: (i: number) => string): void {
  if (o.k === "add") {
    const added = after.find((id) => !before.includes(id));
    if (added !== undefined && o.autoPair) for (const x of before) model.set(pairKey(x, added), true);
  } else if (o.k === "remove") {
    const gone = before.find((id) => !after.includes(id));
    for (const k of [...model.keys()]) if (gone !== undefined && k.split("|").includes(gone)) model.delete(k);
  } else if (o.k === "pair") {
    const [a, b] = [pick(o.i), pick(o.j)];
    if (a === b) return;
    const key = pairKey(a, b);
    if (pairWas === undefined) model.set(key, o.action === "toggle");
    else if (o.action === "delete") model.delete(key);
    else model.set(key, !pairWas);
  }
}

test("the full mesh as a policy with exceptions, spec §3.5 §3.8 §6.5: after each of 200 random writes (nodes created with and without auto_pair, pairs created, disabled, enabled and deleted, nodes deleted, hubs, endpoints) the pairs listed and counted and every node's rendered text equal those of a store of explicit rows", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-policy-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let run = 0;
  let exceptionsSeen = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 200, maxLength: 200 }), async (ops) => {
      const store = await Store.open(join(dir, `svc-${run++}.db`), createLogger("silent"));
      try {
        const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true, eagerPeerBudget: 0 });
        const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" } as never)).config_id;
        const model: PairModel = new Map();
        for (const [step, o] of ops.entries()) {
          const before = (await listNodes(store.db, configId)).map((n) => n.node_id);
          const pick = (i: number) => before[i % before.length] ?? "";
          const pairWas = o.k === "pair" && before.length > 0 ? model.get(pairKey(pick(o.i), pick(o.j))) : undefined;
          let ok = true;
          try {
            await apply(mesh, configId, o, before, step);
          } catch (err) {
            if (!isAppError(err, "CONFLICT") && !isAppError(err, "VALIDATION_FAILED") && !isAppError(err, "HUB_NEEDS_PUBLIC_ENDPOINT")) throw err;
            ok = false;
          }
          await mesh.settled();
          const nodes = await listNodes(store.db, configId);
          if (ok) applyToModel(model, o, before, nodes.map((n) => n.node_id), pairWas, pick);
          // Listed: every page, as the API answers them.
          const listed = new Map<string, boolean>();
          let cursor: string | undefined;
          do {
            const page = await mesh.listPairs(configId, { limit: 7, ...(cursor === undefined ? {} : { cursor }) });
            for (const p of page.mesh_pairs) {
              assert.ok(!listed.has(pairKey(p.node_a, p.node_b)), `step ${step}: a pair listed twice`);
              listed.set(pairKey(p.node_a, p.node_b), p.enabled);
            }
            cursor = page.next_cursor ?? undefined;
          } while (cursor !== undefined);
          assert.deepEqual([...listed.entries()].sort(), [...model.entries()].sort(), `step ${step} (${o.k}): the pairs listed`);
          assert.equal(countStore(store).mesh_pairs, model.size, `step ${step}: the pairs counted`);
          // Rendered: the store's full re-render and lazily staged texts equal the model's rendering.
          const config = await findConfig(store.db, configId);
          assert.ok(config);
          const rows = [...model.entries()].map(([k, enabled]) => {
            const [a = "", b = ""] = k.split("|");
            return { node_a: a, node_b: b, enabled: enabled ? 1 : 0 };
          });
          const expected = renderConfigTextsOf(config, nodes, rows, await listPortForwardsOfConfig(store.db, configId));
          const full = await renderConfigTexts(store.db, configId);
          for (const [i, { node, text }] of expected.entries()) {
            assert.equal(full[i]?.text, text, `step ${step} (${o.k}): text of ${node.node_id}`);
            // What an agent or a download receives: its SHA-256 is the staged sha (spec §3.8).
            const served = await mesh.getStagedConfig(configId, node.node_id);
            assert.equal(served.config_text, text, `step ${step}: served text of ${node.node_id}`);
            assert.equal(served.config_sha256, sha256(text));
          }
        }
        exceptionsSeen += (sqliteOf(store).prepare("SELECT (SELECT count(*) FROM mesh_pairs) + (SELECT count(*) FROM mesh_pair_removals) AS n").get() as { n: number }).n;
      } finally {
        await store.close();
      }
    }),
    { numRuns: 2, seed: 3101, endOnFailure: true },
  );
  assert.ok(exceptionsSeen > 10, `exceptions were stored and rendered (${exceptionsSeen})`);
});
