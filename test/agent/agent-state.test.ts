/**
 * The agent's `state.json` (src/agent/agent-state.ts): what the agent remembers across restarts
 * for spec §6.3 control `push_config` without a payload (the last applied push) and for its
 * heartbeats (spec §2.7 interface). Written atomically and in order, mode 0600. Real files.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { AgentStateFile } from "../../src/agent/agent-state.js";
import type { ConfigPushPayload } from "../../src/protocol/envelope.schema.js";

function dir(t: { after: (fn: () => unknown) => void }): string {
  const d = mkdtempSync(join(tmpdir(), "svc-agent-state-"));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

const push = (version: number): ConfigPushPayload =>
  ({ interface_name: "svc-a", tunnel_protocol: "wireguard", config_version: version, config_sha256: "a".repeat(64), config_text: "[Interface]\n" }) as ConfigPushPayload;

test("spec §6.3 push_config: the last applied push survives a restart of the agent (state.json read back), mode 0600, no temp file left", async (t) => {
  const path = join(dir(t), "state.json");
  const logs: Array<Record<string, unknown>> = [];
  const state = await AgentStateFile.open(path, (line) => logs.push(line));
  await state.remember("svc-a", "wireguard", push(3));
  const again = await AgentStateFile.open(path, () => {});
  assert.deepEqual(again.current, { interface_name: "svc-a", tunnel_protocol: "wireguard", last_push: { interface_name: "svc-a", tunnel_protocol: "wireguard", config_version: 3, config_sha256: "a".repeat(64) } });
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(join(path, "..")), ["state.json"], "the temp file was renamed, not left");
  assert.deepEqual(logs, []);
});

test("state.json: remembers made without waiting land in order, so the file holds the newest (versions 1..20 written back to back)", async (t) => {
  const path = join(dir(t), "state.json");
  const state = await AgentStateFile.open(path, () => {});
  await Promise.all(Array.from({ length: 20 }, (_, i) => state.remember("svc-a", "wireguard", push(i + 1))));
  const stored = JSON.parse(readFileSync(path, "utf8")) as { last_push: { config_version: number } };
  assert.equal(stored.last_push.config_version, 20);
  assert.deepEqual(readdirSync(join(path, "..")), ["state.json"]);
});

test("state.json: a torn or foreign file reads as empty state, and the next remember replaces it whole", async (t) => {
  const path = join(dir(t), "state.json");
  writeFileSync(path, '{"interface_name":"svc-a","tunnel_proto');
  const state = await AgentStateFile.open(path, () => {});
  assert.deepEqual(state.current, { interface_name: null, tunnel_protocol: null, last_push: null });
  await state.remember("svc-b", "awg_2");
  assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), { interface_name: "svc-b", tunnel_protocol: "awg_2", last_push: null });
});

test("state.json: a write that fails (the directory is gone) is logged, not thrown", async (t) => {
  const d = dir(t);
  const path = join(d, "state.json");
  const logs: Array<Record<string, unknown>> = [];
  const state = await AgentStateFile.open(path, (line) => logs.push(line));
  rmSync(d, { recursive: true, force: true });
  await state.remember("svc-a", "wireguard");
  assert.equal(logs.length, 1);
  assert.equal(logs[0]?.["msg"], "could not write the agent state file");
});
