import assert from "node:assert/strict";
import { test } from "node:test";
import { startSseServer } from "../events/sse-harness.js";
import { ADMIN_PASSWORD } from "../events/sse-harness.js";
import { api, connectAgent, dynamicNode, envelope, eventually, status } from "../control/agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * No secret leaves through the machine endpoints, and what a snapshot restore does to
 * the flight recorder (docs/history/decisions-2026.md "flight recorder": cleared with the nodes it
 * described; each restored node starts over with one `restore` row).
 */

test("DESIGN §3 secrets: no stored secret (broker password and its hash, bind token, node private key, admin password and token, backend broker password, authz key, sealed broker passwords) appears in any /machines, /machine or /timeline answer", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const bindToken = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  assert.ok(bindToken);
  const bound = await api(s, "POST", "/api/client/bind", { bind_token: bindToken, server_url: s.baseUrl, client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, false);
  assert.equal(bound.status, 200);
  const p = bound.json;
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  await agent.publishAsync(p.topics.heartbeat, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));

  const sqlite = sqliteOf(s.server.store);
  const secrets: Array<[string, string]> = [
    ["broker password", p.mqtt.password],
    ["bind token", bindToken],
    ["admin password", ADMIN_PASSWORD],
    ["admin session token", s.token],
  ];
  const node = sqlite.prepare("SELECT private_key FROM nodes WHERE node_id = ?").get(nodeId) as { private_key: string };
  secrets.push(["node private key", node.private_key]);
  const state = sqlite.prepare("SELECT mqtt_password_hash FROM node_client_state WHERE node_id = ?").get(nodeId) as { mqtt_password_hash: string };
  secrets.push(["broker password hash", state.mqtt_password_hash]);
  for (const row of sqlite.prepare("SELECT key, value FROM settings_kv").all() as Array<{ key: string; value: string }>) {
    if (row.value.length >= 12) secrets.push([`setting ${row.key}`, row.value]);
  }
  for (const row of sqlite.prepare("SELECT mqtt_username, password_sealed FROM broker_credentials").all() as Array<{ mqtt_username: string; password_sealed: string }>) {
    secrets.push([`sealed password of ${row.mqtt_username}`, row.password_sealed]);
  }
  for (const row of sqlite.prepare("SELECT token_hash FROM bind_tokens").all() as Array<{ token_hash: string }>) secrets.push(["bind token hash", row.token_hash]);
  assert.ok(secrets.length >= 8, "the search has the secrets to look for");

  const answers: Record<string, string> = {};
  for (const path of [
    "/api/v1/machines/node",
    `/api/v1/configs/${configId}/nodes/${nodeId}/machine`,
    `/api/v1/configs/${configId}/nodes/${nodeId}/timeline?limit=500`,
  ]) {
    const res = await api(s, "GET", path);
    assert.equal(res.status, 200, path);
    answers[path] = JSON.stringify(res.json);
  }
  assert.ok(answers[`/api/v1/configs/${configId}/nodes/${nodeId}/timeline?limit=500`]?.includes("client.bound"), "the timeline has rows to search");
  for (const [path, text] of Object.entries(answers)) {
    for (const [what, secret] of secrets) assert.ok(!text.includes(secret), `${what} appears in ${path}`);
  }
});

test("spec §2.4: a snapshot restore clears the restored nodes' flight recorder; each node starts over with one `restore` row naming the restore route, from no state to its fresh one", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const snap = await api(s, "POST", "/api/v1/backups");
  assert.equal(snap.status, 201, JSON.stringify(snap.json));
  await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const before = await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/timeline`);
  assert.ok(before.json.transitions.length >= 3);

  const restored = await api(s, "POST", `/api/v1/backups/${snap.json.snapshot_id}/restore`);
  assert.equal(restored.status, 200, JSON.stringify(restored.json));
  const after = await eventually("the restore row", async () => {
    const res = await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/timeline`);
    return res.json.transitions.length > 0 ? res.json : undefined;
  });
  assert.equal(after.transitions.length, 1, JSON.stringify(after.transitions));
  const [row] = after.transitions;
  assert.equal(row.source, "restore");
  assert.equal(row.event, "xstate.init");
  assert.equal(row.route, "POST /api/v1/backups/:snapshot_id/restore");
  assert.equal(row.before, null);
  assert.equal(row.after.initialization, "uninitialized");
  assert.equal(row.after.bindToken, "none");
  const exported = (sqliteOf(s.server.store).prepare("SELECT count(*) AS n FROM node_transitions").get() as { n: number }).n;
  assert.equal(exported, 1, "no row of the old timeline is left");
});
