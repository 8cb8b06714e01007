import assert from "node:assert/strict";
import { test } from "node:test";
import { SSE_EVENT_TYPES, SSE_PAYLOAD_SCHEMAS, type SseEventType, type SsePayloads } from "../../src/events/event-types.js";
import type { EventHub } from "../../src/events/hub.js";
import { api, boundAgent, envelope, nextMessage } from "../control/agent-harness.js";
import { startSseServer, type SseFrame } from "./sse-harness.js";

/**
 * spec §6.5 (event table, frame fields, "the `data` value must be JSON-serializable; times, enums
 * and domain objects are converted to strings or plain objects before sending"): every payload is
 * plain data by type, one zod schema per event type (src/events/event-types.ts). The hub does not
 * validate at run time (the heartbeat path stays as cheap as before); this test validates what the
 * real service paths publish, and `tsc` validates every publishing point by type.
 */

test("spec §6.5 event table: every one of the twelve event types, settings.server.updated and the alert events have a payload schema", () => {
  assert.deepEqual(Object.keys(SSE_PAYLOAD_SCHEMAS).sort(), [...SSE_EVENT_TYPES].sort());
});

test("spec §6.5 frame fields: the twelve event types, settings.server.updated, audit.appended and the alert events, published through the real service paths (a host's peer report included), each arrive as a frame whose data.payload parses with its schema unchanged, and each payload was plain JSON data when handed to the hub", async (t) => {
  const s = await startSseServer(t);
  // What the publishing points hand the hub: already plain JSON data (so no converter is needed).
  const notPlain: string[] = [];
  const publish = s.hub.publish.bind(s.hub);
  s.hub.publish = ((type: SseEventType, payload: SsePayloads[SseEventType]) => {
    try {
      assert.deepStrictEqual(JSON.parse(JSON.stringify(payload)), payload);
    } catch (err) {
      notPlain.push(`${type}: ${err instanceof Error ? err.message.replace(/\s+/g, " ").slice(0, 300) : String(err)}`);
    }
    publish(type, payload as never);
  }) as EventHub["publish"];
  t.after(() => {
    s.hub.publish = publish;
  });

  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  const seen = new Map<SseEventType, SseFrame[]>();
  const take = (f: SseFrame) => {
    assert.equal(f.json.type, f.event, "the data's type is the frame's event");
    const list = seen.get(f.json.type) ?? [];
    list.push(f);
    seen.set(f.json.type, list);
  };
  const until = async (type: SseEventType, match: (f: SseFrame) => boolean = () => true) => {
    const f = await sse.waitFor((x) => {
      take(x);
      return x.event === type && match(x);
    });
    return f;
  };

  // Opening events: system.status.updated, system.clock.sync (rule 1).
  await until("system.clock.sync");
  // Mesh writes: config.list, config.overview, node.workspace, node.apply, mesh.workspace, system.status.
  const n1 = await api(s, "POST", `/api/v1/configs/${configId}/nodes`, { name: "peer", mode: "static", public_address: "192.0.2.20", listen_port: 51820 });
  assert.equal(n1.status, 201, JSON.stringify(n1.json));
  await until("mesh.workspace.updated", (f) => (f.json.payload as { node_id: string }).node_id === n1.json.node_id);
  // The write's audit entry: audit.appended, its id and action only.
  await until("audit.appended", (f) => (f.json.payload as { action: string }).action === "node.create");
  // Heartbeat: endpoint.status.updated.
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await until("endpoint.status.updated", (f) => (f.json.payload as { status: { client_presence_state: string } }).status.client_presence_state === "online");
  // A command and its ACK: control.log.created, control.log.updated.
  const control = nextMessage(agent, p.topics.control!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  assert.equal(sent.status, 202);
  const msg = await control;
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "stopped", action: "stop" }, msg.request_id), { qos: 1 });
  await until("control.log.updated", (f) => (f.json.payload as { log: { status: string } }).log.status === "applied");
  // A host's peer report, the agent's wg_peers event: config.links.updated once it is stored.
  const peers = { interface_name: "svc0", tunnel_protocol: "wireguard", running: true, host_time: 1_800_000_000, public_key: null, listen_port: 51820, peers: [] };
  await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "wg_peers", message: "", output: JSON.stringify(peers) }), { qos: 1 });
  await until("config.links.updated", (f) => (f.json.payload as { node_id: string }).node_id === nodeId);
  // MQTT settings: settings.mqtt.updated.
  const put = await api(s, "PUT", "/api/v1/settings/mqtt", { public_host: "mqtt.example.org" });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  await until("settings.mqtt.updated");
  // The public URL: settings.server.updated.
  const server = await api(s, "PUT", "/api/v1/settings/server", { public_url: "https://mesh.example.org" });
  assert.equal(server.status, 200, JSON.stringify(server.json));
  await until("settings.server.updated");
  // A snapshot, then its restore: snapshot.list.updated; config.list.updated and system.status.updated from the restore path.
  const snap = await api(s, "POST", "/api/v1/backups");
  assert.equal(snap.status, 201, JSON.stringify(snap.json));
  await until("snapshot.list.updated");
  const restored = await api(s, "POST", `/api/v1/backups/${snap.json.snapshot_id}/restore`);
  assert.equal(restored.status, 200, JSON.stringify(restored.json));
  await until("system.status.updated", (f) => (f.json.payload as { summary: { nodes: number } }).summary.nodes === 2);
  // Alerts: a channel (alert.channel.updated) and its test delivery, refused as a loopback target (alert.delivery.updated).
  const channel = await api(s, "POST", "/api/v1/alerts/channels", { name: "hook", kind: "webhook", url: "http://127.0.0.1:9/hook" });
  assert.equal(channel.status, 201, JSON.stringify(channel.json));
  await until("alert.channel.updated");
  const tested = await api(s, "POST", `/api/v1/alerts/channels/${channel.json.channel_id}/test`);
  assert.equal(tested.status, 200, JSON.stringify(tested.json));
  await until("alert.delivery.updated", (f) => (f.json.payload as { delivery: { attempts: number } }).delivery.attempts === 1);
  // A rule naming that channel: alert.rule.updated.
  const rule = await api(s, "POST", "/api/v1/alerts/rules", { name: "down", event: "node.offline", channel_ids: [channel.json.channel_id] });
  assert.equal(rule.status, 201, JSON.stringify(rule.json));
  await until("alert.rule.updated");
  // The 15 s clock sync, timer-driven (rule 2).
  s.clock.advance(15_000);
  await until("system.clock.sync", (f) => f.json.payload !== undefined && (seen.get("system.clock.sync")?.length ?? 0) >= 2);

  assert.deepEqual([...seen.keys()].sort(), [...SSE_EVENT_TYPES].sort(), "every event type was published");
  for (const [type, frames] of seen) {
    const schema = SSE_PAYLOAD_SCHEMAS[type];
    for (const f of frames) {
      // parse() throws on a missing key or a wrong type; deepEqual fails on a key the schema does not know.
      assert.deepStrictEqual(schema.parse(f.json.payload), f.json.payload, `${type} frame ${f.id} is its schema's shape`);
    }
  }
  assert.deepEqual(notPlain, [], "every payload handed to the hub was plain JSON data");
});

test("the typed publish refuses a payload of the wrong shape at compile time (tsc checks this file)", () => {
  const typeOnly = (hub: EventHub) => {
    // @ts-expect-error a Date is not the ISO string the wire carries (spec §6.5)
    hub.publish("system.clock.sync", { timestamp: new Date() });
    // @ts-expect-error endpoint.status.updated carries `status`, not a bare object of any keys
    hub.publish("endpoint.status.updated", { config_id: "c", node_id: "n", status: { presence: "online" } });
    // @ts-expect-error a payload of another event type
    hub.publish("settings.mqtt.updated", { snapshots: [] });
    // @ts-expect-error not an event type of spec §6.5
    hub.publish("node.apply", { config_id: "c" });
    hub.publish("snapshot.list.updated", { snapshots: [{ snapshot_id: "s", created_at: "2026-01-01T00:00:00.000Z", size_bytes: 1, sha256: "x", encrypted: false, contents: null }] });
  };
  assert.equal(typeof typeOnly, "function");
});
