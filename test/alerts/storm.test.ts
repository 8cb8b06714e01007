/**
 * Storms are grouped (docs/alerts.md "Storms"): 1,000 stand-in agents on the real embedded
 * broker lose their connections at once (a will each) → per channel, the first alert goes out at
 * once and the other 999 leave together in one grouped message when the group window ends: at
 * most 2 deliveries per channel per window, with the right counts. The same on recovery.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";
import { seedStore } from "../../scripts/bench/ingest-lib.js";
import { testSettings } from "../../src/config.js";
import { ManualClock } from "../../src/lib/clock.js";
import { api } from "../control/agent-harness.js";
import { startSseServer } from "../events/sse-harness.js";
import { ALERT_TEST_SETTINGS, startReceiver, until, type Receiver } from "./harness.js";
import { connectStandIns } from "./standins.js";

const NODES = 1000;
const WINDOW_MS = 30_000;

test("1,000 nodes offline at once → per channel one node.offline and one grouped message of 999 per window; recovery → one grouped message of 1,000 node.online", { timeout: 60_000 }, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-alert-storm-"));
  const defaults = testSettings();
  const agents = await seedStore({ file: join(dataDir, "svc.db"), nodes: NODES, snapshot: "offline", onlineTtlMs: defaults.onlineTtlMs, detectTimeoutMs: defaults.detectTimeoutMs });
  const s = await startSseServer(t, {}, { settings: ALERT_TEST_SETTINGS, clock: new ManualClock(Date.now()), dataDir });
  const receivers: Array<{ rx: Receiver; secret: string }> = [];
  for (const name of ["ops", "pager"]) {
    const rx = await startReceiver(t);
    const ch = await api(s, "POST", "/api/v1/alerts/channels", { name, kind: "webhook", url: rx.url });
    receivers.push({ rx, secret: ch.json.secret });
  }
  const channelIds = (await api(s, "GET", "/api/v1/alerts/channels")).json.channels.map((c: { channel_id: string }) => c.channel_id);
  assert.equal((await api(s, "POST", "/api/v1/alerts/rules", { name: "down", event: "node.offline", channel_ids: channelIds })).status, 201);
  assert.equal((await api(s, "POST", "/api/v1/alerts/rules", { name: "dropped", event: "node.dropped", channel_ids: channelIds })).status, 201);

  const online = () => [...s.server.registry.projections()].filter((p) => p.projection.presence === "online").length;
  const port = s.server.mqtt.broker?.port ?? 0;
  const sockets = await connectStandIns(port, agents);
  await until(() => online() === NODES, "every node online", 30_000);
  for (const sock of sockets) sock.destroy(); // at once: a will for each
  await until(() => online() === 0, "every node offline", 30_000);
  await until(() => receivers.every((r) => r.rx.received.length === 1), "the first alert, at once");
  await new Promise((r) => setTimeout(r, 100));
  const bodies = (r: { rx: Receiver; secret: string }) => r.rx.received.map((m) => new Webhook(r.secret).verify(m.body, m.headers as Record<string, string>) as { type: string; data: Record<string, any> });
  for (const r of receivers) assert.deepEqual(bodies(r).map((b) => b.type), ["node.offline"], "the rest wait for the window");

  s.clock.advance(WINDOW_MS);
  await until(() => receivers.every((r) => r.rx.received.length === 2), "one grouped message per channel");
  for (const r of receivers) {
    const grouped = bodies(r)[1];
    assert.equal(grouped?.type, "alert.grouped");
    assert.deepEqual(grouped?.data.counts, { "node.offline": NODES - 1 });
    assert.equal(grouped?.data.count, NODES - 1);
    assert.equal(grouped?.data.first.length, 20, "the first nodes listed");
  }

  // Recovery, inside the window the grouped message opened: all of it in the window's grouped message.
  const back = await connectStandIns(port, agents);
  t.after(() => back.forEach((b) => b.destroy()));
  await until(() => online() === NODES, "every node back online", 30_000);
  await new Promise((r) => setTimeout(r, 100));
  for (const r of receivers) assert.equal(r.rx.received.length, 2, "nothing before the window ends");
  s.clock.advance(WINDOW_MS);
  await until(() => receivers.every((r) => r.rx.received.length === 3), "one grouped recovery per channel");
  for (const r of receivers) {
    const grouped = bodies(r)[2];
    assert.deepEqual(grouped?.data.counts, { "node.online": NODES });
    const resolved = new Set(grouped?.data.first.map((f: { data: { resolves: string } }) => f.data.resolves));
    assert.equal(resolved.size, 20, "each names the alert it resolves");
  }
  s.clock.advance(WINDOW_MS);
  await new Promise((r) => setTimeout(r, 100));
  for (const r of receivers) assert.equal(r.rx.received.length, 3, "an empty window closes without a message");
});
