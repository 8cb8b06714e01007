import assert from "node:assert/strict";
import { test } from "node:test";
import { projectNode } from "../../src/actors/projection.js";
import { newEntry, NodeEntries, nodeKey, type Entry } from "../../src/actors/node-entries.js";

/**
 * The directory of nodes under management (src/actors/node-entries.ts), keyed by
 * `config_id/node_id` (DESIGN §2 actors), with the last lookup kept for the router's two calls
 * per message. What it must never do: answer from the kept lookup after the map changed.
 */

const ROW = { node_id: "n", config_id: "c", mode: "dynamic" as const, staged_config_version: 0, staged_config_sha256: null, machine_snapshot: null, machine_version: null };

function dormant(configId: string, nodeId: string): Entry {
  const context = { configId, nodeId, mode: "dynamic" as const, onlineTtlMs: 1, detectTimeoutMs: 1, lastSignalAt: null, lastReachableAt: null, detectSentAt: null, bindTokenExpiresAt: null, stagedVersion: 0, stagedSha: null, confirmedVersion: null, confirmedSha: null, confirmedProtocol: null, clientVersion: null };
  const projection = projectNode({ value: {}, context });
  return newEntry({ configId, nodeId, mode: "dynamic" }, { ...ROW, transition_head: 7 }, { kind: "dormant", snapshot: "{}", lastSignalAt: null, projection }, projection);
}

test("DESIGN §2 actors: nodes are found by config and node id; the same node id in another config is another node", () => {
  const entries = new NodeEntries();
  const a = dormant("c1", "n");
  const b = dormant("c2", "n");
  entries.set(a);
  entries.set(b);
  assert.equal(entries.lookup("c1", "n"), a);
  assert.equal(entries.lookup("c2", "n"), b);
  assert.equal(entries.lookup("c1", "n"), a, "the kept lookup is of the node asked for");
  assert.equal(entries.lookup("c3", "n"), undefined);
  assert.equal(entries.size, 2);
  assert.equal(entries.has("c2", "n"), true);
  assert.equal(entries.get(nodeKey("c2", "n")), b);
  assert.equal(a.head, 7, "a new entry starts from the row's newest flight-recorder row");
});

test("DESIGN §2 actors: a node deleted, replaced or cleared right after a lookup of it is looked up afresh", () => {
  const entries = new NodeEntries();
  const a = dormant("c", "n");
  entries.set(a);
  assert.equal(entries.lookup("c", "n"), a);
  entries.delete(nodeKey("c", "n"));
  assert.equal(entries.lookup("c", "n"), undefined, "deleted");

  entries.set(a);
  assert.equal(entries.lookup("c", "n"), a);
  const replacement = dormant("c", "n");
  entries.set(replacement);
  assert.equal(entries.lookup("c", "n"), replacement, "replaced (a reload)");

  entries.clear();
  assert.equal(entries.lookup("c", "n"), undefined, "cleared");
  assert.deepEqual([...entries.values()], []);
});
