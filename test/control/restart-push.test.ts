import assert from "node:assert/strict";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import type { SseServer } from "../events/sse-harness.js";
import { ADMIN_PASSWORD, startSseServer } from "../events/sse-harness.js";
import { api, boundAgent, connectAgent, envelope, eventually, nextMessage, status } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * A config push left open by a backend restart still confirms the pushed pair
 * when its ACK arrives after the restart (spec §3.5, §9 rule 4). Real SQLite file, real embedded
 * broker, real HTTP; the agent is an MQTT.js client speaking the wire protocol.
 */

test("spec §3.5, §9 rule 4: a config push ACKed `applied` after a backend restart makes the node `latest` (the pushed version and sha survive the restart)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true, endAfter: false });
  const push = nextMessage(agent, p.topics.config_push!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  assert.equal(sent.status, 202, JSON.stringify(sent.json));
  const msg = await push;
  assert.equal(msg.request_id, sent.json.request_id);
  const before = await status(s, configId, nodeId);
  assert.equal(before.config_version_state, "pending");
  const staged = before.staged_config as { config_version: number; config_sha256: string };
  await agent.endAsync(); // a clean DISCONNECT: no will
  const dbFile = sqliteOf(s.server.store).name;
  const dataDir = dbFile.slice(0, dbFile.lastIndexOf("/"));
  const restartAt = s.clock.now() + 10_000; // within the 60 s command timeout
  await s.close();

  const clock = new ManualClock(restartAt);
  const again = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock, dbFile });
  t.after(() => again.close());
  assert.equal(again.commands.openCount, 1, "the push is re-armed as an open command");
  const row = sqliteOf(again.store)
    .prepare("SELECT pushed_config_version AS v, pushed_config_sha256 AS sha, pushed_tunnel_protocol AS proto FROM control_logs WHERE request_id = ?")
    .get(sent.json.request_id);
  assert.deepEqual(row, { v: staged.config_version, sha: staged.config_sha256, proto: "wireguard" }, "the control log row keeps what was pushed");

  const agent2 = await connectAgent({ server: again } as unknown as SseServer, p);
  t.after(() => agent2.end(true));
  await agent2.publishAsync(
    p.topics.config_push_ack!,
    envelope(p, "ack", { status: "applied", message: "", action: "push_config", config_version: staged.config_version, config_sha256: staged.config_sha256 }, sent.json.request_id),
    { qos: 1 },
  );
  const st = await eventually("latest after the ACK", async () => {
    const x = await again.control.endpointStatus(configId, nodeId);
    return x.config_version_state === "latest" ? x : undefined;
  });
  assert.deepEqual(st.confirmed_config, { config_version: staged.config_version, config_sha256: staged.config_sha256 });
  const log = await again.control.controlLogs(configId, nodeId, 10);
  assert.equal(log.find((l) => l.request_id === sent.json.request_id)?.status, "applied");
});

test("spec §3.5: a push target altered in the database while the backend was down (e.g. by a restored snapshot) is not trusted: logged, and the ACK confirms nothing", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true, endAfter: false });
  const push = nextMessage(agent, p.topics.config_push!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  await push;
  await agent.endAsync();
  const dbFile = sqliteOf(s.server.store).name;
  const dataDir = dbFile.slice(0, dbFile.lastIndexOf("/"));
  const restartAt = s.clock.now() + 10_000;
  sqliteOf(s.server.store).prepare("UPDATE control_logs SET pushed_config_sha256 = ? WHERE request_id = ?").run("Z".repeat(64), sent.json.request_id);
  await s.close();

  const lines: Array<{ msg: string; request_id?: string }> = [];
  const log = createLogger("warn", { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
  const again = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), log, { clock: new ManualClock(restartAt), dbFile });
  t.after(() => again.close());
  assert.ok(lines.some((l) => /without a valid push target/.test(l.msg) && l.request_id === sent.json.request_id));
  const agent2 = await connectAgent({ server: again } as unknown as SseServer, p);
  t.after(() => agent2.end(true));
  await agent2.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, sent.json.request_id), { qos: 1 });
  await eventually("the command closed", async () => {
    const l = await again.control.controlLogs(configId, nodeId, 10);
    return l.find((x) => x.request_id === sent.json.request_id)?.status === "applied" ? true : undefined;
  });
  assert.equal((await again.control.endpointStatus(configId, nodeId)).config_version_state, "pending");
});
