import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";
import { isoTime } from "../../src/lib/clock.js";
import { fileSseServer, type SseServer } from "../events/sse-harness.js";
import { api, bind, connectAgent, dynamicNode, type Profile } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * bind-command, bind and reset-client (spec §4 rules 10-12, §2.5, §2.6, §3.2, §3.6) over real
 * HTTP on the real service (real SQLite, embedded broker, node actors, ManualClock). One service
 * for the file; each test makes its own nodes.
 */

const MINUTE = 60_000;
const BIND_TTL = 5 * MINUTE; // spec §2.5: default validity 5 minutes

// One service for the file (a fresh node per test keeps the tests apart).
const shared = fileSseServer();

async function issue(s: SseServer, configId: string, nodeId: string): Promise<{ status: number; json: any; token: string | undefined }> {
  const res = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  return { ...res, token: /--token (\S+)$/.exec(res.json?.command ?? "")?.[1] };
}

function redeem(s: SseServer, token: string, extra: Partial<{ client_version: string; platform: string; hostname: string }> = {}) {
  return api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.0.0", platform: "linux", hostname: "h1", ...extra }, false);
}

function clientRow(s: SseServer, nodeId: string): Record<string, unknown> {
  return sqliteOf(s.server.store).prepare("SELECT * FROM node_client_state WHERE node_id = ?").get(nodeId) as Record<string, unknown>;
}

function tokenStates(s: SseServer, nodeId: string): string[] {
  return (sqliteOf(s.server.store).prepare("SELECT state FROM bind_tokens WHERE node_id = ? ORDER BY created_at, rowid").all(nodeId) as Array<{ state: string }>).map((r) => r.state);
}

function credential(s: SseServer, username: string): { password_sealed: string; updated_at: number } | undefined {
  return sqliteOf(s.server.store).prepare("SELECT * FROM broker_credentials WHERE mqtt_username = ?").get(username) as { password_sealed: string; updated_at: number } | undefined;
}

async function staticNode(s: SseServer, configId: string): Promise<string> {
  const node = await api(s, "POST", `/api/v1/configs/${configId}/nodes`, { name: "fixed", mode: "static", public_address: "192.0.2.9" });
  assert.equal(node.status, 201, JSON.stringify(node.json));
  return node.json.node_id;
}

describe("bind-command (spec §4 rule 10, §2.5, §3.6)", () => {
  test("spec §4 rule 10: the command is `svcctl bind --server {public url} --token {token}`, valid 5 minutes from now", async () => {
    const s = await shared();
    const { configId, nodeId } = await dynamicNode(s);
    const res = await issue(s, configId, nodeId);
    assert.equal(res.status, 200);
    assert.match(res.json.command, /^svcctl bind --server \S+ --token [A-Za-z0-9_-]{43}$/);
    assert.equal(res.json.expires_at, isoTime(s.clock.now() + BIND_TTL));
    assert.deepEqual(tokenStates(s, nodeId), ["valid"]);
    assert.equal(s.server.registry.projection(configId, nodeId)?.bindToken, "valid");
    // The --server is the service's public URL, the same the bind profile names.
    const bound = await redeem(s, res.token!);
    assert.equal(res.json.command, `svcctl bind --server ${bound.json.profile.server_url} --token ${res.token}`);
    assert.ok(bound.json.profile.server_url.startsWith("http"));
  });

  test("spec §4 rule 10: a static node gets NODE_NOT_DYNAMIC and no token; an unknown node NOT_FOUND", async () => {
    const s = await shared();
    const { configId } = await dynamicNode(s);
    const fixed = await staticNode(s, configId);
    const res = await issue(s, configId, fixed);
    assert.equal(res.status, 409);
    assert.equal(res.json.error.code, "NODE_NOT_DYNAMIC");
    assert.deepEqual(tokenStates(s, fixed), []);
    const missing = await issue(s, configId, "no-such-node");
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, "NOT_FOUND");
  });

  test("spec §3.6: regenerating invalidates the node's earlier valid token (and only that node's)", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    const b = await dynamicNode(s);
    const first = await issue(s, a.configId, a.nodeId);
    const other = await issue(s, b.configId, b.nodeId);
    const second = await issue(s, a.configId, a.nodeId);
    assert.deepEqual(tokenStates(s, a.nodeId), ["invalidated", "valid"]);
    assert.deepEqual(tokenStates(s, b.nodeId), ["valid"]);
    const old = await redeem(s, first.token!);
    assert.equal(old.status, 401);
    assert.equal(old.json.error.code, "INVALID_BIND_TOKEN");
    assert.equal((await redeem(s, second.token!)).status, 200);
    assert.equal((await redeem(s, other.token!)).status, 200, "the other node's token was untouched");
  });
});

describe("bind (spec §4 rule 11, §2.6, §3.2, §3.6)", () => {
  test("spec §3.6: valid until 5 min - 1 ms; at exactly 5 min it is expired (INVALID_BIND_TOKEN)", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    const t1 = await issue(s, a.configId, a.nodeId);
    s.clock.advance(BIND_TTL - 1);
    assert.equal((await redeem(s, t1.token!)).status, 200);
    const b = await dynamicNode(s);
    const t2 = await issue(s, b.configId, b.nodeId);
    s.clock.advance(BIND_TTL);
    const late = await redeem(s, t2.token!);
    assert.equal(late.status, 401);
    assert.equal(late.json.error.code, "INVALID_BIND_TOKEN");
    assert.equal(clientRow(s, b.nodeId).client_initialized, 0);
  });

  test("spec §4 rule 11: an unknown token is INVALID_BIND_TOKEN; a used one BIND_TOKEN_USED; neither changes the node", async () => {
    const s = await shared();
    const unknown = await redeem(s, "A".repeat(43));
    assert.equal(unknown.status, 401);
    assert.equal(unknown.json.error.code, "INVALID_BIND_TOKEN");
    const a = await dynamicNode(s);
    const t1 = await issue(s, a.configId, a.nodeId);
    const ok = await redeem(s, t1.token!, { client_version: "1.0.0" });
    assert.equal(ok.status, 200);
    const again = await redeem(s, t1.token!, { client_version: "9.9.9", hostname: "intruder" });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, "BIND_TOKEN_USED");
    assert.equal(clientRow(s, a.nodeId).client_version, "1.0.0");
    assert.equal(clientRow(s, a.nodeId).hostname, "h1");
    assert.deepEqual(tokenStates(s, a.nodeId), ["used"]);
  });

  test("spec §3.6: a token invalidated by making the node static is INVALID_BIND_TOKEN, not BIND_TOKEN_USED", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    const t1 = await issue(s, a.configId, a.nodeId);
    const patched = await api(s, "PATCH", `/api/v1/configs/${a.configId}/nodes/${a.nodeId}`, { mode: "static" });
    assert.equal(patched.status, 200);
    const res = await redeem(s, t1.token!);
    assert.equal(res.status, 401);
    assert.equal(res.json.error.code, "INVALID_BIND_TOKEN");
  });

  test("spec §2.6, §2.7: the profile and the stored client state (version, platform, hostname, username, password hash, sealed copy)", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    const t1 = await issue(s, a.configId, a.nodeId);
    s.clock.advance(1234);
    const res = await redeem(s, t1.token!, { client_version: "2.3.4", platform: "windows", hostname: "desk-7" });
    assert.equal(res.status, 200);
    const p = res.json as Profile & { mqtt: Record<string, unknown> };
    const username = `n:${a.configId}:${a.nodeId}`;
    assert.deepEqual(p.profile, { config_id: a.configId, node_id: a.nodeId, server_url: p.profile.server_url });
    assert.equal(p.mqtt.username, username);
    assert.equal(p.mqtt.client_id, `svc-${a.configId}-${a.nodeId}`);
    assert.equal(p.mqtt.tls, false);
    assert.equal(p.mqtt.port, s.server.mqtt.broker!.port);
    assert.equal("ca_cert" in p.mqtt, false, "no CA without TLS");
    assert.match(String(p.mqtt.password), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(p.topics.heartbeat, `svc/${a.configId}/${a.nodeId}/heartbeat`);
    assert.equal(p.topics.config_push, `svc/${a.configId}/${a.nodeId}/config/push`);
    const row = clientRow(s, a.nodeId);
    assert.equal(row.client_initialized, 1);
    assert.equal(row.client_version, "2.3.4");
    assert.equal(row.platform, "windows");
    assert.equal(row.hostname, "desk-7");
    assert.equal(row.mqtt_username, username);
    assert.equal(row.mqtt_password_hash, createHash("sha256").update(String(p.mqtt.password)).digest("hex"));
    const sealed = credential(s, username);
    assert.ok(sealed, "the sealed password is stored with the bind");
    assert.equal(sealed.updated_at, s.clock.now());
    assert.equal(s.server.registry.projection(a.configId, a.nodeId)?.clientVersion, "2.3.4");
    assert.equal(s.server.registry.projection(a.configId, a.nodeId)?.bindToken, "used");
    // The password works at the broker.
    const agent = await connectAgent(s, p);
    agent.end(true);
  });

  test("spec §3.2: a second bind rotates the credentials: new password, new sealed copy, the old password is refused", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    const first = await bind(s, a.configId, a.nodeId);
    const username = `n:${a.configId}:${a.nodeId}`;
    const sealed1 = credential(s, username)!.password_sealed;
    s.clock.advance(1000);
    const second = await bind(s, a.configId, a.nodeId);
    assert.notEqual(second.mqtt.password, first.mqtt.password);
    const c2 = credential(s, username)!;
    assert.notEqual(c2.password_sealed, sealed1);
    assert.equal(c2.updated_at, s.clock.now());
    assert.equal(clientRow(s, a.nodeId).client_initialized, 1);
    await assert.rejects(connectAgent(s, first), (err: Error & { code?: number }) => err.code === 4 || /Bad username or password|Not authorized/i.test(err.message));
    const agent = await connectAgent(s, second);
    agent.end(true);
  });
});

describe("reset-client (spec §4 rule 12, §3.2)", () => {
  test("spec §4 rule 12: clears the client state and credentials, invalidates a valid token, keeps other nodes' credentials", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    const b = await dynamicNode(s);
    await bind(s, a.configId, a.nodeId);
    const pb = await bind(s, b.configId, b.nodeId);
    const pending = await issue(s, a.configId, a.nodeId);
    s.clock.advance(777);
    const res = await api(s, "POST", `/api/v1/configs/${a.configId}/nodes/${a.nodeId}/reset-client`);
    assert.equal(res.status, 200);
    assert.equal(res.json.client_initialized, false);
    assert.equal(res.json.client_presence_state, "offline");
    assert.equal(res.json.runtime_state, "unknown");
    const row = clientRow(s, a.nodeId);
    assert.deepEqual(
      { init: row.client_initialized, presence: row.client_presence_state, runtime: row.runtime_state, user: row.mqtt_username, hash: row.mqtt_password_hash },
      { init: 0, presence: "offline", runtime: "unknown", user: null, hash: null },
    );
    assert.equal(credential(s, `n:${a.configId}:${a.nodeId}`), undefined, "the sealed copy goes with the hash");
    assert.ok(credential(s, `n:${b.configId}:${b.nodeId}`), "the other node keeps its credentials");
    assert.equal(clientRow(s, b.nodeId).mqtt_username, `n:${b.configId}:${b.nodeId}`);
    assert.deepEqual(tokenStates(s, a.nodeId), ["used", "invalidated"], "the used token stays used; the valid one is invalidated");
    const late = await redeem(s, pending.token!);
    assert.equal(late.status, 401);
    assert.equal(late.json.error.code, "INVALID_BIND_TOKEN");
    const agentB = await connectAgent(s, pb);
    agentB.end(true);
  });

  test("spec §4 rule 12: reset of a static node is NODE_NOT_DYNAMIC, of an unknown node NOT_FOUND", async () => {
    const s = await shared();
    const { configId } = await dynamicNode(s);
    const fixed = await staticNode(s, configId);
    const res = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${fixed}/reset-client`);
    assert.equal(res.status, 409);
    assert.equal(res.json.error.code, "NODE_NOT_DYNAMIC");
    const missing = await api(s, "POST", `/api/v1/configs/${configId}/nodes/nope/reset-client`);
    assert.equal(missing.status, 404);
  });

  test("spec §3.2: after a reset the node binds again with a new token and is initialized again", async () => {
    const s = await shared();
    const a = await dynamicNode(s);
    await bind(s, a.configId, a.nodeId);
    await api(s, "POST", `/api/v1/configs/${a.configId}/nodes/${a.nodeId}/reset-client`);
    const again = await bind(s, a.configId, a.nodeId);
    assert.equal(clientRow(s, a.nodeId).client_initialized, 1);
    const agent = await connectAgent(s, again);
    agent.end(true);
  });
});
