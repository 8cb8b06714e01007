import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { isoTime, ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { nodeTopic } from "../../src/protocol/topics.js";
import { createServer, type AppContext } from "../../src/server.js";
import { DETECT_STOP_GRACE_MS } from "../../src/mqtt/detect-scheduler.js";
import { eventually } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Failures on the command path are never swallowed. Each is logged with the node
 * (config_id, node_id) and recorded where an operator looks (a control log row, or the endpoint
 * status), and shutdown waits for detects in flight. Real SQLite file, real embedded broker; the
 * broker "refusing" a publish is the real broker stopped. The node's signals enter through the
 * real router (no MQTT agent, so stopping the broker publishes no will).
 */

interface LogLine {
  level: number;
  msg: string;
  action?: string;
  config_id?: string;
  node_id?: string;
  err?: unknown;
}

interface Rig {
  server: AppContext;
  clock: ManualClock;
  logs: LogLine[];
  configId: string;
  nodeId: string;
  controlLogs(): Promise<Array<{ action: string | null; status: string | null; message: string | null; request_id: string | null }>>;
}

const WARN = 40;

/** A service with one bound dynamic node that is online (one heartbeat through the router). */
async function rig(t: TestContext): Promise<Rig> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-failures-"));
  const logs: LogLine[] = [];
  const log = createLogger("debug", { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) });
  const clock = new ManualClock();
  const server = await createServer(testSettings({ dataDir, adminPassword: "failures-password" }), log, { clock });
  let closed = false;
  t.after(async () => {
    if (!closed) await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const close = server.close;
  server.close = async () => {
    closed = true;
    await close();
  };
  const config = await server.mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.61.0.0/24" });
  const node = await server.mesh.createNode(config.config_id, { name: "edge", mode: "dynamic", public_address: "192.0.2.9" });
  const configId = config.config_id;
  const nodeId = node.node_id;
  const token = /--token (\S+)$/.exec((await server.control.bindCommand(configId, nodeId)).command)?.[1];
  assert.ok(token);
  await server.control.bind({ bind_token: token, server_url: "http://127.0.0.1", client_version: "1.0.0", platform: "linux", hostname: "h" });
  const heartbeat = {
    type: "heartbeat",
    request_id: "",
    config_id: configId,
    node_id: nodeId,
    boot_id: "b",
    session_id: "s",
    sent_at: isoTime(clock.now()),
    payload: { client_online: true, wg_online: true },
  };
  assert.equal(server.router.handle(nodeTopic(configId, nodeId, "heartbeat"), Buffer.from(JSON.stringify(heartbeat))), true);
  await eventually("online", () => (server.registry.projection(configId, nodeId)?.presence === "online" ? true : undefined));
  // Effects (the automatic push's debounce timer) run once the state is committed.
  await eventually("online persisted", () => {
    const row = sqliteOf(server.store).prepare("SELECT client_presence_state AS p FROM node_client_state WHERE node_id = ?").get(nodeId) as { p: string };
    return row.p === "online" ? true : undefined;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { server, clock, logs, configId, nodeId, controlLogs: () => server.control.controlLogs(configId, nodeId, 50) };
}

/**
 * Resolves with the delay of the next timer set on the injected clock. Called just before
 * close(), whose first step stops the detect scheduler: with a detect in flight, that timer is
 * the shutdown's grace (nothing else arms one while the store is held), so close() is then
 * waiting on the detect.
 */
function graceArmed(clock: ManualClock): Promise<number> {
  return new Promise((resolve) => {
    const set = clock.setTimeout.bind(clock);
    clock.setTimeout = (fn, ms) => {
      clock.setTimeout = set;
      resolve(ms);
      return set(fn, ms);
    };
  });
}

/**
 * A barrier for what a moved clock decides without I/O: the grace timer's race and the shutdown
 * wait's continuation (its log line) are promise reactions, all run before the next
 * `setImmediate` callback.
 */
function outcomesSettled(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function warningsAbout(r: Rig, msg: RegExp, action: string): LogLine[] {
  return r.logs.filter((l) => l.level >= WARN && msg.test(l.msg) && l.action === action && l.config_id === r.configId && l.node_id === r.nodeId);
}

/** Lets the automatic push (due when the node came online) go out, so only probes follow. */
async function settlePush(r: Rig): Promise<void> {
  r.clock.advance(60_000);
  await eventually("automatic push settled", async () => (await r.controlLogs()).some((l) => l.action === "push_config" && l.status !== "pending") || r.server.commands.published > 0 ? true : undefined);
}

test("spec §3.1, §6.4 rule 8: a detect the broker does not take (broker stopped) is a detect failure at once: logged with the node, and the node drops without waiting for the 20 s timeout", async (t) => {
  const r = await rig(t);
  await settlePush(r); // also: the heartbeat is now older than the coming probe
  await r.server.mqtt.broker!.close();
  r.server.detect.setActive(true);
  const st = await eventually("dropped", () => {
    const p = r.server.registry.projection(r.configId, r.nodeId);
    return p?.presence === "dropped" ? p : undefined;
  });
  assert.equal(st.runtime, "unknown", "spec §3.3: presence lost → unknown");
  assert.equal(warningsAbout(r, /command not sent/, "detect").length, 1, "the failed detect is logged with config_id and node_id");
  const status = await r.server.control.endpointStatus(r.configId, r.nodeId);
  assert.equal(status.client_presence_state, "dropped", "the endpoint status shows it");
  // Persisted too: the operator sees it after a restart.
  await eventually("dropped persisted", () => {
    const row = sqliteOf(r.server.store).prepare("SELECT client_presence_state AS p FROM node_client_state WHERE node_id = ?").get(r.nodeId) as { p: string };
    return row.p === "dropped" ? true : undefined;
  });
});

test("shutdown waits for a detect in flight: it is published while the store, actors and broker are still open", { timeout: 30_000 }, async (t) => {
  const r = await rig(t);
  await settlePush(r);
  const published = r.server.commands.published;
  // A write transaction holds the store (as a slow REST write would), so the detect's first query waits.
  let release!: () => void;
  let committed!: Promise<void>;
  await new Promise<void>((started) => {
    committed = r.server.store.db.transaction().execute(async () => {
      started();
      await new Promise<void>((resolve) => (release = resolve));
    });
  });
  r.server.detect.setActive(true);
  let closed = false;
  const waiting = graceArmed(r.clock);
  const closing = r.server.close().then(() => {
    closed = true;
  });
  // The barrier: close() has found the detect in flight and waits for it (its grace timer is
  // set on the injected clock, which does not move). A shutdown that does not wait never arms
  // it, and ends first.
  assert.equal(await Promise.race([waiting, closing.then(() => "closed")]), DETECT_STOP_GRACE_MS, "close() waits on the detect in flight, its grace armed");
  await outcomesSettled();
  assert.equal(closed, false, "close() waits while the detect is in flight");
  release();
  await committed;
  await closing;
  assert.equal(r.server.commands.published, published + 1, "the detect was published before the broker closed");
  assert.deepEqual(
    r.logs.filter((l) => l.level >= WARN).map((l) => l.msg),
    [],
    "nothing ran against a closed store or broker",
  );
  r.server.detect.setActive(true);
  assert.equal(r.server.detect.active, false, "a stopped scheduler never probes again");
});

test("shutdown does not wait for a stuck detect longer than its grace (5 s on the injected clock), and says so", { timeout: 30_000 }, async (t) => {
  const r = await rig(t);
  await settlePush(r);
  let release!: () => void;
  let committed!: Promise<void>;
  await new Promise<void>((started) => {
    committed = r.server.store.db.transaction().execute(async () => {
      started();
      await new Promise<void>((resolve) => (release = resolve));
    });
  });
  t.after(async () => {
    release();
    await committed.catch(() => undefined); // the store was closed under it
  });
  r.server.detect.setActive(true);
  let closed = false;
  const waiting = graceArmed(r.clock);
  const closing = r.server.close().then(() => {
    closed = true;
  });
  await Promise.race([waiting, closing]);
  const gaveUp = () => r.logs.some((l) => l.level >= WARN && /did not wait longer for detects in flight/.test(l.msg));
  r.clock.advance(4_999);
  await outcomesSettled();
  assert.equal(gaveUp(), false, "1 ms before the grace the wait goes on");
  assert.equal(closed, false);
  r.clock.advance(1);
  await outcomesSettled();
  assert.equal(gaveUp(), true, "at the grace the wait ends, and says so");
  await closing;
});

test("an automatic config push that cannot be built (the node has no staged config) is logged with the node and stored as a failed push_config control log row", async (t) => {
  const r = await rig(t);
  const pending = (await r.controlLogs()).length;
  assert.equal(pending, 0, "the automatic push waits for its debounce");
  // A stored text that is gone is rendered again (a cache); a node never staged has nothing to push.
  sqliteOf(r.server.store).prepare("UPDATE nodes SET staged_config_version = 0, staged_config_sha256 = NULL WHERE node_id = ?").run(r.nodeId);
  sqliteOf(r.server.store).prepare("DELETE FROM node_staged_texts WHERE node_id = ?").run(r.nodeId);
  r.clock.advance(2000); // DESIGN §3: push debounce 2 s
  const row = await eventually("failed push row", async () => (await r.controlLogs()).find((l) => l.action === "push_config"));
  assert.equal(row.status, "failed");
  assert.match(row.message ?? "", /automatic config push not sent: the node has no staged config/);
  assert.equal(row.request_id, null, "nothing was sent, so no request_id");
  assert.equal(warningsAbout(r, /command failed before it was sent/, "push_config").length, 1);
});

test("an automatic config push the broker does not take (broker stopped) closes its row as failed with the reason and is logged with the node", async (t) => {
  const r = await rig(t);
  await r.server.mqtt.broker!.close();
  r.clock.advance(2000);
  const row = await eventually("failed push row", async () => (await r.controlLogs()).find((l) => l.action === "push_config" && l.status === "failed"));
  assert.match(row.message ?? "", /publish to the broker failed/);
  assert.notEqual(row.request_id, null);
  assert.equal(warningsAbout(r, /command not sent/, "push_config").length, 1);
  assert.equal((await r.server.control.endpointStatus(r.configId, r.nodeId)).config_version_state, "pending", "still pending: a later push retries");
});
