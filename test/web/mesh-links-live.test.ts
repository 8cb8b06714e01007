/**
 * Link health from the real backend: stand-in agents publish `wg_peers` reports through the real
 * MQTT path (test/control/agent-harness.ts), the backend stores them and announces
 * `config.links.updated`, and the open topology and node page follow without a reload: the pair
 * both hosts see is drawn `up` with its handshake age, the pair whose far side never shook hands
 * `down`, a hand-added peer shows as drift on the node page.
 */
import test from "node:test";
import type { MqttClient } from "mqtt";
import { bind, connectAgent, envelope, type Profile } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

const KEY_X = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

test("reports through MQTT draw the real link states on the topology and the node page's peers and drift, live", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const s = h as unknown as SseServer;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "live", tunnel_protocol: "wireguard", network_cidr: "10.67.0.0/24" });
  const nodes: Record<string, { node_id: string; public_key: string; address: string }> = {};
  const profiles: Record<string, Profile> = {};
  const agents: Record<string, MqttClient> = {};
  for (const [i, name] of ["gate", "edge", "db"].entries()) {
    nodes[name] = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name, mode: "dynamic", public_address: `198.51.100.${i + 1}`, listen_port: 51820 });
    const p = await bind(s, cfg.config_id, nodes[name]?.node_id ?? "");
    profiles[name] = p;
    const agent = await connectAgent(s, p);
    t.after(() => agent.end(true));
    agents[name] = agent;
  }
  const hostTime = Math.floor(h.clock.now() / 1000);
  const peer = (name: string, handshakeAgo: number | null, rx: number, tx: number) => ({
    public_key: nodes[name]?.public_key ?? "",
    endpoint: `198.51.100.${["gate", "edge", "db"].indexOf(name) + 1}:51820`,
    allowed_ips: [`${nodes[name]?.address}/32`],
    latest_handshake: handshakeAgo === null ? null : hostTime - handshakeAgo,
    rx_bytes: rx,
    tx_bytes: tx,
    persistent_keepalive_s: 25,
  });
  const report = async (name: string, peers: unknown[]) => {
    const p = profiles[name] as Profile;
    const body = { interface_name: "svc0", tunnel_protocol: "wireguard", running: true, host_time: hostTime, public_key: nodes[name]?.public_key, listen_port: 51820, peers };
    await agents[name]?.publishAsync(p.topics.event ?? "", envelope(p, "event", { level: "info", event: "wg_peers", message: "", output: JSON.stringify(body) }), { qos: 1 });
  };

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}?view=topology`);
  const figure = page.getByRole("figure", { name: "Topology" });
  await figure.getByRole("img", { name: /^edge ↔ gate: not measured/ }).waitFor({ state: "attached" });

  // gate and edge see each other (12 s and 14 s ago); db never completed a handshake with gate.
  await report("gate", [peer("edge", 12, 1_572_864, 307_200), peer("db", null, 0, 1480), { ...peer("db", null, 0, 0), public_key: KEY_X, allowed_ips: ["10.99.0.1/32"] }]);
  await report("edge", [peer("gate", 14, 307_200, 1_572_864), peer("db", null, 0, 0)]);
  await figure.getByRole("img", { name: /^edge ↔ gate: up, handshake 1[2-5] s ago; configured ok$/ }).waitFor({ state: "attached" });
  await figure.getByRole("img", { name: /^db ↔ gate: down, no handshake yet; configured ok$/ }).waitFor({ state: "attached" });
  await figure.getByRole("img", { name: /^edge ↔ gate/ }).hover({ force: true });
  await expectText(figure.getByLabel("Link details"), /gate → edge: handshake 1[2-5] s ago, received 1\.5 MiB, sent 300 KiB, endpoint 198\.51\.100\.2:51820/);
  await screenshot(page, "mesh-links-live");

  // The node page: the running peers and the hand-added one as drift.
  await page.goto(`/configs/${cfg.config_id}/nodes/${nodes["gate"]?.node_id}`);
  const card = page.getByRole("region", { name: "Peers" });
  await expectText(card.getByRole("row").filter({ has: page.getByRole("rowheader", { name: "edge" }) }), /198\.51\.100\.2:51820\s*10\.67\.0\.\d+\/32\s*1[2-5] s ago\s*1\.5 MiB\s*300 KiB\s*every 25 s/);
  await expectText(card.getByRole("note"), /extra peer xTIBA5rb… \(running, not staged\)/);
  // A new report without the extra peer: the drift goes, live.
  await report("gate", [peer("edge", 2, 1_600_000, 310_000), peer("db", null, 0, 1480)]);
  await expectText(card, /The running peers match the staged config\./);
  await screenshot(page, "node-peers-live");
});
