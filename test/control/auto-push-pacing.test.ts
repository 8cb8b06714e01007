import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { isoTime, ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { nodeTopic } from "../../src/protocol/topics.js";
import { createServer } from "../../src/server.js";
import { AUTO_PUSH_CONCURRENCY } from "../../src/services/control.service.js";
import { eventually } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Automatic config pushes paced (src/services/control.service.ts `#autoPushes`,
 * src/lib/background-turn.ts): automatic config pushes whose debounce runs out together start one per background turn (one
 * loop iteration each), at most {@link AUTO_PUSH_CONCURRENCY} in flight, so a re-stage of many
 * nodes does not hold ingest for the whole batch; all of them go out.
 */
test("spec §3.5: automatic pushes due at once start one per loop iteration, at most AUTO_PUSH_CONCURRENCY in flight, and every one goes out", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-auto-push-"));
  const clock = new ManualClock();
  const server = await createServer(testSettings({ dataDir, adminPassword: "auto-push-password" }), createLogger("silent"), { clock });
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const count = AUTO_PUSH_CONCURRENCY * 2 + 3;
  const config = await server.mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.62.0.0/24" });
  const configId = config.config_id;
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const nodeId = (await server.mesh.createNode(configId, { name: `n${i}`, mode: "dynamic", public_address: `192.0.2.${i + 1}` })).node_id;
    const token = /--token (\S+)$/.exec((await server.control.bindCommand(configId, nodeId)).command)?.[1];
    assert.ok(token);
    await server.control.bind({ bind_token: token, server_url: "http://127.0.0.1", client_version: "1.0.0", platform: "linux", hostname: `h${i}` });
    const heartbeat = { type: "heartbeat", request_id: "", config_id: configId, node_id: nodeId, boot_id: "b", session_id: "s", sent_at: isoTime(clock.now()), payload: { client_online: true, wg_online: true } };
    assert.equal(server.router.handle(nodeTopic(configId, nodeId, "heartbeat"), Buffer.from(JSON.stringify(heartbeat))), true);
    ids.push(nodeId);
  }
  // The debounce timers are armed right after the commit that made each node online.
  const online = () => (sqliteOf(server.store).prepare("SELECT COUNT(*) AS n FROM node_client_state WHERE client_presence_state = 'online'").get() as { n: number }).n;
  await eventually("all online, committed", () => (online() === count ? true : undefined));
  await new Promise((resolve) => setImmediate(resolve));
  const pushRows = () => (sqliteOf(server.store).prepare("SELECT COUNT(*) AS n FROM control_logs WHERE action = 'push_config'").get() as { n: number }).n;
  assert.equal(pushRows(), 0, "nothing before the debounce");

  clock.advance(2000); // DESIGN §3: push debounce 2 s; every node's timer runs out in this call
  const perTurn: number[] = [];
  const inFlight: number[] = [];
  let seen = 0;
  for (let turn = 0; turn < 2000 && seen < count; turn++) {
    await new Promise((resolve) => setImmediate(resolve));
    const now = pushRows();
    perTurn.push(now - seen);
    inFlight.push(now - server.commands.published);
    seen = now;
  }
  assert.equal(seen, count, `every push went out (per turn: ${perTurn.slice(0, 40).join(",")})`);
  assert.ok(Math.max(...perTurn) <= 1, `one push starts per background turn: ${perTurn.join(",")}`);
  assert.ok(Math.max(...inFlight) <= AUTO_PUSH_CONCURRENCY, `at most ${AUTO_PUSH_CONCURRENCY} in flight: ${inFlight.join(",")}`);
});
