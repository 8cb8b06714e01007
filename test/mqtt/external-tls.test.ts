import assert from "node:assert/strict";
import { test } from "node:test";
import { dynamicNode, bindNode, mosquitto, mosquittoSettings, startService, tempDataDir, until } from "./mosquitto-harness.js";

/**
 * spec §1.9 bullet 2 with an external broker: `SVC_MQTT_TLS_ENABLED=true` makes client profiles
 * prefer TLS, while the backend keeps its own (plain) `SVC_MQTT_URL`: TLS is not forced on the
 * backend-broker link. A real Mosquitto 2.0 with only its plain listener stands for the broker.
 */

test("spec §1.9 bullet 2: with TLS enabled and an external broker, the backend connects over its plain mqtt:// SVC_MQTT_URL while bind profiles say tls true with the public TLS port", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return; // skipped: mosquitto missing (fails instead under SVC_TEST_REQUIRE_SYSTEM=1)
  assert.match(m.url, /^mqtt:\/\//, "the backend's URL is plain");
  const s = await startService(t, mosquittoSettings(m, tempDataDir(), { mqttTlsEnabled: true, mqttPublicTlsPort: 8883 }));
  await until("the backend connected over the plain URL and reconciled", async () => {
    const mqtt = (await s.api("GET", "/api/v1/system/status")).json.services.mqtt as { connected: boolean };
    return mqtt.connected && (s.server.mqtt.sync?.state().reconciled ?? 0) > 0;
  });
  assert.equal(s.server.mqtt.broker, null, "no embedded broker, so no TLS listener of ours");
  const { configId, nodeId } = await dynamicNode(s);
  const profile = await bindNode(s, configId, nodeId);
  assert.equal(profile.mqtt.tls, true, "profiles prefer TLS");
  assert.equal(profile.mqtt.port, 8883, "the public TLS port");
  // The backend's link is live on the plain listener: a command reaches the broker (published, PUBACK).
  const before = s.server.commands.published;
  const sent = await s.api("POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  assert.equal(sent.status, 202);
  await until("published over the plain link", () => (s.server.commands.published > before ? true : undefined));
});
