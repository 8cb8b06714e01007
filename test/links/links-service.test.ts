/**
 * The link service (src/services/links.service.ts; docs/links.md) in the real service with a
 * real SQLite file and a ManualClock, fed reports the way the router hands them over: a
 * malformed report is dropped and announces nothing; a valid one is stored before
 * `config.links.updated` goes out; the judged state follows the clock across REJECT_AFTER_TIME
 * and 3 × REJECT_AFTER_TIME; drift lists extra peers and different allowed IPs.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { testSettings } from "../../src/config.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import type { WgPeersReport } from "../../src/protocol/wg-peers.schema.js";
import { createServer } from "../../src/server.js";
import { api } from "../control/agent-harness.js";
import { listenAndLogin } from "../events/sse-harness.js";
import { tempDir } from "../helpers/temp-dir.js";

const ADMIN_PASSWORD = "correct horse battery staple";
const STRANGER = "4vJ7ND3Ls40W+goHz/6qQ6RJo49/4YGq9TZge24c6WI=";

test("reports: malformed dropped silently, valid stored before announced; states follow the clock; drift found", async (t) => {
  const clock = new ManualClock();
  const server = await createServer(testSettings({ dataDir: tempDir(t, "svc-links-svc-"), adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock });
  t.after(() => server.close());
  const s = await listenAndLogin(server, ADMIN_PASSWORD);
  const config = (await api(s, "POST", "/api/v1/configs", { name: "links-svc", tunnel_protocol: "wireguard", network_cidr: "10.66.0.0/24" })).json;
  const base = `/api/v1/configs/${config.config_id}`;
  const a = (await api(s, "POST", `${base}/nodes`, { name: "a", mode: "dynamic", public_address: "192.0.2.1", listen_port: 51820 })).json;
  const b = (await api(s, "POST", `${base}/nodes`, { name: "b", mode: "dynamic", public_address: "192.0.2.2", listen_port: 51820 })).json;
  const hostNow = 1_800_000_000;
  const report = (peerKey: string, allowed: string[], extra: boolean, endpoint: string | null = null): WgPeersReport => ({
    interface_name: "svc0",
    tunnel_protocol: "wireguard",
    running: true,
    host_time: hostNow,
    public_key: null,
    listen_port: 51820,
    peers: [
      { public_key: peerKey, endpoint, allowed_ips: allowed, latest_handshake: hostNow - 10, rx_bytes: 100, tx_bytes: 200, persistent_keepalive_s: 25 },
      ...(extra ? [{ public_key: STRANGER, endpoint: null, allowed_ips: ["10.99.0.1/32"], latest_handshake: null, rx_bytes: 0, tx_bytes: 0, persistent_keepalive_s: null }] : []),
    ],
  });

  const announced: Array<{ node_id: string; stored: boolean }> = [];
  const publish = server.hub.publish.bind(server.hub);
  server.hub.publish = ((type: string, payload: { node_id: string }) => {
    if (type === "config.links.updated") {
      // Persist before emit: the stored report is already readable when the event goes out.
      void server.links.nodePeers(config.config_id, payload.node_id).then((p) => announced.push({ node_id: payload.node_id, stored: p.measured_at !== null }));
    }
    return publish(type as never, payload as never);
  }) as typeof server.hub.publish;

  await server.links.ingest(config.config_id, a.node_id, "not json", clock.now());
  await server.links.ingest(config.config_id, a.node_id, JSON.stringify({ ...report(b.public_key, [], false), host_time: -1 }), clock.now());
  await server.links.ingest(config.config_id, a.node_id, undefined, clock.now());
  assert.equal((await api(s, "GET", `${base}/nodes/${a.node_id}/peers`)).json.measured_at, null, "nothing stored");
  assert.deepEqual(announced, []);

  const bAddress = String(b.address).split("/")[0];
  await server.links.ingest(config.config_id, a.node_id, JSON.stringify(report(b.public_key, ["10.66.0.200/32"], true, "192.0.2.2:51820")), clock.now());
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(announced, [{ node_id: a.node_id, stored: true }]);
  let matrix = (await api(s, "GET", `${base}/links`)).json;
  assert.equal(matrix.links[0].link, "unknown", "b has not reported");
  const aSide = matrix.links[0].node_a === a.node_id ? "a_to_b" : "b_to_a";
  assert.equal(matrix.links[0][aSide].rx_bytes, 100, "a's view of b");
  assert.deepEqual(matrix.drift, [
    { node_id: a.node_id, missing_peers: [], extra_peers: [STRANGER], different: [{ public_key: b.public_key, field: "allowed_ips", staged: `${bAddress}/32`, running: "10.66.0.200/32" }] },
  ]);

  const aAddress = String(a.address).split("/")[0];
  await server.links.ingest(config.config_id, b.node_id, JSON.stringify(report(a.public_key, [`${aAddress}/32`], false, "192.0.2.1:51820")), clock.now());
  matrix = (await api(s, "GET", `${base}/links`)).json;
  assert.equal(matrix.links[0].link, "up");
  clock.advance(170_000); // handshakes now 180 s old
  assert.equal((await api(s, "GET", `${base}/links`)).json.links[0].link, "stale");
  clock.advance(360_000); // 540 s
  assert.equal((await api(s, "GET", `${base}/links`)).json.links[0].link, "down");

  const peers = (await api(s, "GET", `${base}/nodes/${a.node_id}/peers`)).json;
  assert.deepEqual(peers.peers.map((p: { node_name: string | null }) => p.node_name), ["b", null]);
  const refresh = await api(s, "POST", `${base}/links/refresh`);
  assert.equal(refresh.status, 200);
  assert.deepEqual([refresh.json.asked, refresh.json.timed_out], [[], []], "no agent online: nobody asked");
});
