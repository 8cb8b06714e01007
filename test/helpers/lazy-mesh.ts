/**
 * A full mesh of static nodes staged lazily (every node at a new version, none rendered) by a
 * protocol switch, on a real SQLite file: the input of the deferred-rendering tests.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { Store } from "../../src/store/db.js";
import type { Db } from "../../src/store/db.js";
import { findStagedText, listNodes } from "../../src/store/nodes.repository.js";
import type { NodeRow } from "../../src/store/schema.js";

/** The staged text a node's row serves (`node_staged_texts` at its version and sha), or null when it has none. */
export async function servedText(db: Db, node: Pick<NodeRow, "node_id" | "staged_config_version" | "staged_config_sha256">): Promise<string | null> {
  if (node.staged_config_sha256 === null) return null;
  return (await findStagedText(db, node.node_id, node.staged_config_version, node.staged_config_sha256)) ?? null;
}

/**
 * `n` static nodes (n ≤ 250) in config "c" (wireguard, then switched to awg_2), with an eager
 * rendering budget of 0 so that nothing is rendered in a write. Cleaned up after the test.
 * @returns the store, the mesh service, the config id, the node ids in creation order, and the data directory
 */
export async function lazyMesh(t: { after: (fn: () => unknown) => void }, n: number) {
  const dir = mkdtempSync(join(tmpdir(), "svc-lazy-mesh-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true, eagerPeerBudget: 0 });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  for (let i = 0; i < n; i++) await mesh.createNode(configId, { name: `n${i}`, mode: "static", public_address: `192.0.2.${i + 1}`, listen_port: 51820 });
  await mesh.updateConfig(configId, { tunnel_protocol: "awg_2" });
  await mesh.settled();
  const rows = await listNodes(store.db, configId);
  assert.ok(rows.every((r) => r.staged_config_sha256 === null), "all staged, none rendered");
  return { store, mesh, configId, ids: rows.map((r) => r.node_id), dir };
}
