/**
 * Building a bulk package (spec §2.3, §4 rule 8) yields to the event loop
 * between nodes and between zip entries once a turn has used its step, so a package of a large
 * mesh (~100 MB of config text, most rendered on demand) blocks no turn for long. Real SQLite, a
 * real MeshService, a real zip read back; turns are counted, not timed (step 0: a turn per node).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { collectPackageConfigs, packageEntries, writePackageZip } from "../../src/services/bulk-package.js";
import { MeshService } from "../../src/services/mesh.service.js";
import { Store } from "../../src/store/db.js";
import { unzip } from "./harness.js";
import { turnsDuring } from "../helpers/turns.js";

test("spec §2.3: collecting a package's texts (rendered on demand) and writing its zip yield a turn per node at step 0, and only a few with an unbounded step; the zip holds every node's staged text", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-pkg-steps-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  // Budget 0: every node is staged lazily, so collecting renders each on demand.
  const mesh = new MeshService({ store, clock: new ManualClock(), mqttEnabled: true, eagerPeerBudget: 0 });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  const n = 12;
  for (let i = 0; i < n; i++) await mesh.createNode(configId, { name: `n${i}`, mode: "static", public_address: `192.0.2.${i + 1}` });

  let configs: Awaited<ReturnType<typeof collectPackageConfigs>> = [];
  const collecting = await turnsDuring(async () => {
    configs = await collectPackageConfigs(mesh, [configId], 0);
  });
  assert.ok(collecting >= n, `a turn per node: ${collecting} turns for ${n} nodes`);
  const entries = packageEntries(configs);
  assert.equal(entries.length, n);
  for (const c of configs) for (const node of c.nodes) assert.equal(node.configText, (await mesh.getStagedConfig(configId, node.nodeId)).config_text);

  const zip = join(dir, "p.zip");
  const writing = await turnsDuring(() => writePackageZip(entries, zip, new Date(0), 0));
  assert.ok(writing >= n, `a turn per entry: ${writing} turns for ${n} entries`);
  const read = await unzip(readFileSync(zip));
  assert.deepEqual([...read.keys()].sort(), entries.map((e) => e.path).sort());
  for (const e of entries) assert.equal(read.get(e.path)?.toString("utf8"), e.text);

  const unbounded = await turnsDuring(async () => {
    await collectPackageConfigs(mesh, [configId], Infinity);
  });
  assert.ok(unbounded < n, `without a step bound: ${unbounded} turns`);
});
