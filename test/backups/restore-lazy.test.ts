import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { renderConfigTexts } from "../../src/services/rendering.service.js";
import { sqliteOf } from "../../src/store/connection.js";
import { createConfig, createNode } from "../http/harness.js";
import { importAndRestore, snapshotDb, startBackupsHarness } from "./harness.js";

/**
 * A full mesh's texts are O(n²) bytes: a snapshot import and restore leave static nodes staged
 * lazily, as a mesh write does, and still serve the renderer's text under the same version and
 * a sha that is its SHA-256 (spec §2.4, §3.5, §3.8).
 */

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");
const NODES = 60;

test(`spec §2.4/§3.8: a restored ${NODES}-node full mesh stores only the texts its snapshot held and the dynamic node's, yet each node answers the text, version and sha it had before the snapshot`, async (t) => {
  const h = await startBackupsHarness(t);
  const { config_id: configId } = await createConfig(h, { network_cidr: "10.60.0.0/23" });
  const ids: string[] = [];
  for (let i = 0; i < NODES - 1; i++) {
    ids.push((await createNode(h, configId, { name: `n${i}`, public_address: `192.0.2.${(i % 250) + 1}`, listen_port: 10000 + i })).node_id);
  }
  const dynamic = (await createNode(h, configId, { name: "d", mode: "dynamic" })).node_id;
  ids.push(dynamic);
  const url = (id: string) => `/api/v1/configs/${configId}/nodes/${id}/config`;
  // Some static nodes hold a stored rendering in the snapshot (fetched once), the rest none.
  for (const id of ids.slice(0, 3)) assert.equal((await h.req("GET", url(id))).status, 200);
  const sqlite = sqliteOf(h.server.store);
  const versions = new Map((sqlite.prepare("SELECT node_id, staged_config_version AS v FROM nodes").all() as Array<{ node_id: string; v: number }>).map((r) => [r.node_id, r.v]));
  const before = new Map((await renderConfigTexts(h.server.store.db, configId)).map(({ node, text }) => [node.node_id, text]));
  assert.equal(before.size, NODES);

  await importAndRestore(h, await snapshotDb(h));

  const stored = sqlite.prepare("SELECT t.node_id, n.mode, length(t.config_text) AS bytes FROM node_staged_texts t JOIN nodes n USING (node_id)").all() as Array<{ node_id: string; mode: string; bytes: number }>;
  // The dynamic node's (its actor learns the sha) and those the snapshot held at the node's version.
  assert.deepEqual(stored.map((r) => r.node_id).sort(), [...ids.slice(0, 3), dynamic].sort(), "no other text is stored");
  const lazy = sqlite.prepare("SELECT count(*) AS c FROM nodes WHERE mode = 'static' AND staged_config_sha256 IS NULL AND staged_config_version >= 1").get() as { c: number };
  assert.equal(lazy.c, NODES - 4, "every other static node staged lazily");
  for (const id of ids) {
    const res = await h.req("GET", url(id));
    assert.equal(res.status, 200, res.text);
    const text = before.get(id);
    assert.equal(res.json.config_text, text, `${id}: the same text`);
    assert.equal(res.json.config_sha256, sha256(res.json.config_text), `${id}: its sha is the text's SHA-256`);
    assert.equal(res.json.config_version, versions.get(id), `${id}: the same version`);
  }
});
