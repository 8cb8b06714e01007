import assert from "node:assert/strict";
import { test } from "node:test";
import { Quarantine } from "../../src/actors/quarantine.js";
import { NodeActorRegistry } from "../../src/actors/registry.js";
import { ManualClock } from "../../src/lib/clock.js";
import { capturingLog, CONFIG, openStores, registryDeps, seedNodes, tempDbFile } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Quarantine at start and reload (src/actors/quarantine.ts; docs/history/decisions-2026.md "Quarantine at
 * start and reload"): a node whose stored state cannot be restored is left out with an error line
 * naming it and why; one bad row never stops start-up. A real SQLite file.
 */

test("a quarantined node is listed with its reason (at most 300 characters) and logged as an error naming it; a new start's list starts empty", () => {
  const { log: capture, lines } = capturingLog();
  const quarantine = new Quarantine(capture);
  quarantine.add({ config_id: "c", node_id: "n-1" }, new Error("machine_snapshot is not JSON"));
  quarantine.add({ config_id: "c", node_id: "n-2" }, "x".repeat(400));
  assert.deepEqual(quarantine.list(), [
    { configId: "c", nodeId: "n-1", reason: "machine_snapshot is not JSON" },
    { configId: "c", nodeId: "n-2", reason: "x".repeat(300) },
  ]);
  assert.equal(quarantine.size, 2);
  const logged = lines.filter((l) => l.level === 50);
  assert.deepEqual(logged.map((l) => [l.config_id, l.node_id, l.reason]), [["c", "n-1", "machine_snapshot is not JSON"], ["c", "n-2", "x".repeat(300)]]);
  quarantine.clear();
  assert.deepEqual(quarantine.list(), []);
});

test("a node with a broken stored snapshot is left out at start (no actor, not counted) while the others start; once the row is repaired a reload takes it back", async (t) => {
  const file = tempDbFile(t);
  const { store, reader, close } = await openStores(file);
  await seedNodes(store, ["n-good", "n-bad"]);
  const clock = new ManualClock();
  const deps = registryDeps(store, clock, { onlineTtlMs: 60_000 });
  const first = new NodeActorRegistry(deps);
  assert.equal(await first.start(), 2);
  await first.stop();
  sqliteOf(reader).exec("UPDATE node_client_state SET machine_snapshot = '{\"status\":\"active\"' WHERE node_id = 'n-bad'");

  const { log: capture, lines } = capturingLog();
  const registry = new NodeActorRegistry({ ...deps, log: capture });
  t.after(async () => {
    await registry.stop();
    await close();
  });
  assert.equal(await registry.start(), 1, "the good node is under management");
  assert.deepEqual(registry.quarantined(), [{ configId: CONFIG, nodeId: "n-bad", reason: "machine_snapshot is not JSON" }]);
  assert.equal(registry.has(CONFIG, "n-bad"), false, "a quarantined node has no actor");
  assert.equal(registry.post(CONFIG, "n-bad", { type: "mqtt.will", at: clock.now() }), false, "its events are dropped");
  assert.equal(registry.has(CONFIG, "n-good"), true);
  assert.ok(lines.some((l) => l.level === 50 && l.node_id === "n-bad"), "the error line names the node");

  sqliteOf(reader).exec("UPDATE node_client_state SET machine_snapshot = NULL, machine_version = NULL WHERE node_id = 'n-bad'");
  assert.equal(await registry.reload(), 2);
  assert.deepEqual(registry.quarantined(), []);
  assert.equal(registry.has(CONFIG, "n-bad"), true);
});
