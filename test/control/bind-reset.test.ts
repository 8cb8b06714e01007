import assert from "node:assert/strict";
import { test } from "node:test";
import { startSseServer } from "../events/sse-harness.js";
import { api, bind, boundAgent, connectAgent, dynamicNode, envelope, eventually, status } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Bind tokens, bind-command and the broker password over real HTTP and the real embedded broker
 * (spec §2.5, §2.6, §3.6, §4 rules 10–12).
 */

const tokenOf = (command: string): string => {
  const token = /--token (\S+)$/.exec(command)?.[1];
  assert.ok(token, command);
  return token;
};

test("spec §2.5 bullet 4, §3.6 row 3: a bind token issued before reset-client is refused afterwards (INVALID_BIND_TOKEN), for a bound and for a never-bound node", async (t) => {
  const s = await startSseServer(t);
  const redeem = (token: string) =>
    api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1", platform: "linux", hostname: "h" }, false);

  // A bound node: the operator issues a token for a rebind, then resets the client.
  const bound = await boundAgent(s, t, { online: true });
  const before = tokenOf((await api(s, "POST", `/api/v1/configs/${bound.configId}/nodes/${bound.nodeId}/bind-command`)).json.command);
  assert.equal((await api(s, "POST", `/api/v1/configs/${bound.configId}/nodes/${bound.nodeId}/reset-client`)).status, 200);
  const refused = await redeem(before);
  assert.equal(refused.status, 401, JSON.stringify(refused.json));
  assert.equal(refused.json.error.code, "INVALID_BIND_TOKEN");
  const st = await status(s, bound.configId, bound.nodeId);
  assert.equal(st.client_initialized, false, "the refused token bound nothing");
  // A token issued after the reset works.
  const after = tokenOf((await api(s, "POST", `/api/v1/configs/${bound.configId}/nodes/${bound.nodeId}/bind-command`)).json.command);
  assert.equal((await redeem(after)).status, 200);

  // A never-bound node: reset-client still invalidates the outstanding token.
  const fresh = await dynamicNode(s);
  const pending = tokenOf((await api(s, "POST", `/api/v1/configs/${fresh.configId}/nodes/${fresh.nodeId}/bind-command`)).json.command);
  const reset = await api(s, "POST", `/api/v1/configs/${fresh.configId}/nodes/${fresh.nodeId}/reset-client`);
  assert.equal(reset.status, 200, JSON.stringify(reset.json));
  assert.equal((await redeem(pending)).json.error.code, "INVALID_BIND_TOKEN");
  assert.equal((await status(s, fresh.configId, fresh.nodeId)).client_initialized, false);
});

test("spec §2.6 mqtt.password, §3.2 row 1: a second bind rotates the password with the embedded broker; the live agent on the old one is kicked and the old password is refused at CONNECT", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const first = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, first);
  t.after(() => agent.end(true));
  await agent.publishAsync(first.topics.heartbeat!, envelope(first, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
  const hashBefore = (sqliteOf(s.server.store).prepare("SELECT mqtt_password_hash AS h FROM node_client_state WHERE node_id = ?").get(nodeId) as { h: string }).h;

  const closed = new Promise<void>((resolve) => agent.once("close", () => resolve()));
  const second = await bind(s, configId, nodeId);
  assert.notEqual(second.mqtt.password, first.mqtt.password, "rotated at bind");
  assert.equal(second.mqtt.username, first.mqtt.username, "same account, new password");
  // spec §2.6 note: the tunnel protocol is not stored in the profile.
  const leaves = (v: unknown, key = ""): Array<[string, unknown]> =>
    v !== null && typeof v === "object" ? Object.entries(v).flatMap(([k, x]) => leaves(x, k)) : [[key, v]];
  for (const [key, value] of leaves(second)) {
    assert.doesNotMatch(key, /protocol/, "no protocol field");
    assert.ok(value !== "wireguard" && value !== "awg_2", `${key} names no protocol`);
  }
  const hashAfter = (sqliteOf(s.server.store).prepare("SELECT mqtt_password_hash AS h FROM node_client_state WHERE node_id = ?").get(nodeId) as { h: string }).h;
  assert.notEqual(hashAfter, hashBefore);
  assert.ok(!hashAfter.includes(second.mqtt.password), "stored hashed, never as the password");
  await closed; // the session on the old password is cut
  await assert.rejects(connectAgent(s, first), (err: Error & { code?: number }) => err.code === 4 || /Bad username or password|Not authorized/i.test(err.message));
  const again = await connectAgent(s, second);
  t.after(() => again.end(true));
  assert.equal((await status(s, configId, nodeId)).client_initialized, true);
});

test("spec §4 rule 10: bind-command on a static node answers 409 NODE_NOT_DYNAMIC with MQTT on, and issues no token", async (t) => {
  const s = await startSseServer(t);
  const config = (await api(s, "POST", "/api/v1/configs", { name: "st", tunnel_protocol: "wireguard", network_cidr: "10.78.0.0/24" })).json;
  const node = (await api(s, "POST", `/api/v1/configs/${config.config_id}/nodes`, { name: "s", mode: "static", public_address: "192.0.2.4" })).json;
  const res = await api(s, "POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/bind-command`);
  assert.equal(res.status, 409);
  assert.equal(res.json.error.code, "NODE_NOT_DYNAMIC");
  assert.equal(res.json.command, undefined);
  const rows = sqliteOf(s.server.store).prepare("SELECT COUNT(*) AS n FROM bind_tokens").get() as { n: number };
  assert.equal(rows.n, 0, "no token row written");
});
