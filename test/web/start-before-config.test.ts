// The control page while a start waits for the node's first config (spec §3.5, §3.8): the
// backend holds the start until the config push's applied ACK, and the page says so from the
// start's control log row, then stops saying it once the start went out and applied.
import assert from "node:assert/strict";
import test from "node:test";
import { bind, connectAgent, envelope } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

test("spec §3.5, §3.8: Start on a node that never confirmed a config shows “waiting for the first config” until the push applied and the start went out", { timeout: 120_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const s = h as unknown as SseServer; // the control harness needs baseUrl, token and server (the broker's port)
  const cfg = await h.api("POST", "/api/v1/configs", { name: "fresh-net", tunnel_protocol: "wireguard", network_cidr: "10.52.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "fresh-1", mode: "dynamic", public_address: "192.0.2.12", listen_port: 51820 });
  const profile = await bind(s, cfg.config_id, node.node_id);
  const agent = await connectAgent(s, profile);
  t.after(() => agent.end(true));
  const received: Array<{ topic: string; request_id: string }> = [];
  agent.on("message", (topic, buf) => received.push({ topic, request_id: (JSON.parse(buf.toString()) as { request_id: string }).request_id }));
  await agent.publishAsync(profile.topics.event!, envelope(profile, "event", { level: "info", event: "mqtt_connected", message: "agent connected" }), { qos: 1 });

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}/nodes/${node.node_id}`);
  await expectText(page.getByRole("heading", { level: 1 }), "fresh-1");
  await page.getByRole("heading", { name: "Control", exact: true }).waitFor();
  await page.getByRole("button", { name: "Start", exact: true }).click();

  const waiting = page.getByRole("status").filter({ hasText: "waiting for the first config" });
  await expectText(waiting, /^Start is waiting for the first config: sent when config push \S+ is applied\.$/);
  await screenshot(page, "node-control-start-waiting");

  // The agent gets the push first; its applied ACK releases the start.
  const push = received.find((m) => m.topic === profile.topics.config_push);
  assert.ok(push !== undefined, "the push went out at once");
  assert.ok(!received.some((m) => m.topic === profile.topics.control), "no start before the push applied");
  await agent.publishAsync(profile.topics.config_push_ack!, envelope(profile, "ack", { status: "applied", message: "", action: "push_config" }, push.request_id), { qos: 1 });
  const start = await new Promise<{ request_id: string }>((resolve) => {
    const found = () => received.find((m) => m.topic === profile.topics.control);
    const now = found();
    if (now) return resolve(now);
    agent.on("message", () => {
      const later = found();
      if (later) resolve(later);
    });
  });
  await agent.publishAsync(profile.topics.control_ack!, envelope(profile, "ack", { status: "accepted", message: "", action: "start" }, start.request_id), { qos: 1 });
  await waiting.waitFor({ state: "detached" });
  await agent.publishAsync(profile.topics.control_ack!, envelope(profile, "ack", { status: "applied", message: "started", action: "start" }, start.request_id), { qos: 1 });
  const log = page.getByRole("table", { name: "Control log", exact: true });
  await log.getByRole("cell", { name: "started", exact: true }).waitFor();
  await screenshot(page, "node-control-start-applied");
});
