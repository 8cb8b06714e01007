/**
 * `renderDeferred` (src/store/staging.ts) renders a large write's nodes in
 * chunks, reading each chunk's inputs once, and yields to the event loop between nodes once a
 * turn has used its step. A write that lands between a chunk's reads and a node's store must not
 * leave a stale rendering: that node is rendered again from fresh inputs, so every stored text is
 * the full re-render's (DESIGN §3 Config versions; spec §3.5, §3.8: the agent's text hashes to the
 * staged sha). Real SQLite, a real MeshService; not timed (turns are counted, not measured).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { listNodes } from "../../src/store/nodes.repository.js";
import { renderConfigTexts, renderDeferred, restageConfig, type StagedChange } from "../../src/services/rendering.service.js";
import { lazyMesh, servedText } from "../helpers/lazy-mesh.js";
import { turnsDuring } from "../helpers/turns.js";

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

test("DESIGN §3 Config versions: a write landing while a chunk renders (after its inputs were read) leaves no stale text: the nodes it bumped are rendered again from fresh inputs and reported with the new version", async (t) => {
  const { store, mesh, configId, ids } = await lazyMesh(t, 6);
  const reported = new Map<string, StagedChange>();
  let wrote = false;
  // The node the job stores first (the job's order is the store's): the write changes that one.
  let first = "";
  await renderDeferred(
    store.db,
    configId,
    ids,
    async (batch) => {
      for (const s of batch) reported.set(s.nodeId, s);
      if (wrote) return;
      wrote = true;
      first = batch[0]?.nodeId ?? "";
      // The first node is stored; the rest of the chunk was read before this write.
      await mesh.updateNode(configId, first, { public_address: "198.51.100.9" });
    },
    { batch: 1, chunk: 16, stepMs: 0 },
  );
  const rest = ids.filter((id) => id !== first);
  await mesh.settled();
  assert.ok(wrote);
  const full = new Map((await renderConfigTexts(store.db, configId)).map((r) => [r.node.node_id, r]));
  for (const id of rest) {
    const ref = full.get(id);
    assert.ok(ref);
    assert.equal(await servedText(store.db, ref.node), ref.text, `${id}: the stored text is the full re-render's`);
    assert.equal(ref.node.staged_config_sha256, sha256(ref.text));
    assert.deepEqual(reported.get(id), { nodeId: id, version: ref.node.staged_config_version, sha: ref.node.staged_config_sha256 }, `${id}: reported with the version it is stored at`);
    assert.ok(ref.text.includes("198.51.100.9"), `${id}: sees the write`);
  }
  const own = full.get(first);
  assert.ok(own);
  assert.ok(own.node.staged_config_sha256 === null || own.node.staged_config_sha256 === sha256(own.text), "the written node: re-staged lazily, or rendered from its new inputs");
});

test("rendering yields to the event loop within a chunk once a turn has used its step (step 0: a turn per node), and only per chunk with an unbounded step", async (t) => {
  const { store, configId, ids } = await lazyMesh(t, 20);
  const bounded = await turnsDuring(() => renderDeferred(store.db, configId, ids, () => {}, { chunk: 16, stepMs: 0 }));
  assert.ok(bounded >= ids.length, `a turn per node: ${bounded} turns for ${ids.length} nodes`);
  const rows = await listNodes(store.db, configId);
  for (const r of rows) assert.equal(r.staged_config_sha256, sha256((await servedText(store.db, r)) ?? ""), `${r.node_id}: rendered`);

  await store.db.updateTable("nodes").set({ staged_config_sha256: null }).execute();
  const unbounded = await turnsDuring(() => renderDeferred(store.db, configId, ids, () => {}, { chunk: 16, stepMs: Infinity }));
  assert.ok(unbounded < ids.length, `per chunk only: ${unbounded} turns`);
});

test("DESIGN §3 Config versions: restageConfig (snapshot restore) renders in chunks, yielding per node at step 0, and stores the full re-render's texts: a lazily staged node keeps its version, a rendered node whose text changed moves on by one, an unchanged one stays", async (t) => {
  const { store, mesh, configId, ids } = await lazyMesh(t, 20);
  const [a, b] = ids as [string, string];
  await mesh.getStagedConfig(configId, a); // rendered on demand: a has a stored rendering
  await mesh.getStagedConfig(configId, b);
  // A text that is not the renderer's (a snapshot's hostile or stale text): rewritten, version + 1.
  const evil = "[Interface]\nPostUp = evil\n";
  await store.db.updateTable("node_staged_texts").set({ config_text: evil, config_sha256: sha256(evil) }).where("node_id", "=", b).execute();
  await store.db.updateTable("nodes").set({ staged_config_sha256: sha256(evil) }).where("node_id", "=", b).execute();
  const before = new Map((await listNodes(store.db, configId)).map((r) => [r.node_id, r]));
  let changed: StagedChange[] = [];
  const turns = await turnsDuring(async () => {
    changed = await restageConfig(store.db, configId, 123, { chunk: 16, stepMs: 0 });
  });
  assert.ok(turns >= ids.length, `a turn per node: ${turns} turns for ${ids.length} nodes`);
  const full = await renderConfigTexts(store.db, configId);
  for (const { node, text } of full) {
    assert.equal(await servedText(store.db, node), text, `${node.node_id}: the renderer's text`);
    assert.equal(node.staged_config_sha256, sha256(text));
    const prev = before.get(node.node_id);
    const expected = node.node_id === b ? (prev?.staged_config_version ?? 0) + 1 : prev?.staged_config_version;
    assert.equal(node.staged_config_version, expected, `${node.node_id}: version`);
  }
  assert.deepEqual(changed.map((s) => s.nodeId), [b], "only a rendered node whose text changed is reported");
});
