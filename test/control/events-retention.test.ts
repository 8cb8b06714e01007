import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { ManualClock } from "../../src/lib/clock.js";
import { loadSettings, SettingsError, testSettings } from "../../src/config.js";
import { EventLog } from "../../src/mqtt/event-log.js";
import { createServer } from "../../src/server.js";
import { createLogger } from "../../src/logger.js";
import { Store } from "../../src/store/db.js";
import { startSseServer, watchCommits, type SseServer } from "../events/sse-harness.js";
import { api, boundAgent, envelope, eventually } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Client events stored as control logs and control log retention (spec §2.8, §6.3 event payload,
 * §6.4 rule 9), on the real service: embedded aedes on a free port, real SQLite
 * file, real HTTP, MQTT.js clients acting as agents.
 */

const T = { timeout: 120_000 };

/** A second, read-only connection to the service's database file: sees only committed rows. */
function reader(t: TestContext, s: SseServer): SQLite.Database {
  const db = new SQLite(sqliteOf(s.server.store).name, { readonly: true });
  t.after(() => db.close());
  return db;
}

interface StoredLog {
  log_id: number;
  kind: string;
  level: string | null;
  event: string | null;
  message: string | null;
  request_id: string | null;
  action: string | null;
  stream: string | null;
  output: string | null;
  status: string | null;
}

const COLUMNS = "log_id, kind, level, event, message, request_id, action, stream, output, status";

test("spec §6.4 rule 9, §2.8, §6.3: every event an agent sends is stored with its level, event and message; control.log.created follows the commit; a non-offline event after offline restores online", T, async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { endAfter: false });
  const db = reader(t, s);
  const sse = await s.open();
  t.after(() => sse.destroy());
  // spec §6.5 rule 6, checked when each frame is handed to the hub (see watchCommits).
  const watch = watchCommits(t, s, {
    "control.log.created": (other, f) => {
      const log = f.payload.log as StoredLog;
      const { log_id, kind, level, event, message, request_id, action, stream, output, status } = log;
      const row = other.prepare(`SELECT ${COLUMNS} FROM control_logs WHERE log_id = ?`).get(log_id);
      assert.deepEqual(row, { log_id, kind, level, event, message, request_id, action, stream, output, status });
    },
  });

  const sent: Array<Record<string, string>> = [
    { level: "info", event: "mqtt_connected", message: "connected to 127.0.0.1" },
    { level: "error", event: "privileges_missing", message: "the agent does not run as root" },
    { level: "warn", event: "interface_missing", message: "svc0 is not up" },
    { level: "info", event: "command_output", message: "", request_id: "req-1", action: "wg_show", stream: "stdout", output: "interface: svc0" },
    { level: "debug", event: "config_written", message: "wrote /etc/wireguard/svc0.conf" },
    { level: "info", event: "offline", message: "agent stopping" },
  ];
  for (const payload of sent) {
    await agent.publishAsync(p.topics.event!, envelope(p, "event", payload), { qos: 1 });
    const frame = await sse.waitFor(
      (f) => f.event === "control.log.created" && (f.json.payload.log as { event: string }).event === payload.event,
    );
    const log = frame.json.payload.log as StoredLog;
    const row = db.prepare(`SELECT ${COLUMNS} FROM control_logs WHERE log_id = ?`).get(log.log_id) as StoredLog | undefined;
    assert.ok(row, `${payload.event}: stored`);
    assert.equal(frame.json.payload.node_id, nodeId);
    assert.equal(frame.json.payload.config_id, configId);
    const output = payload.event === "command_output";
    const expected: StoredLog = {
      log_id: log.log_id,
      kind: output ? "output" : "event",
      level: payload.level!,
      event: payload.event!,
      message: payload.message!,
      request_id: payload.request_id ?? null,
      action: payload.action ?? null,
      stream: payload.stream ?? null,
      output: payload.output ?? null,
      status: null, // events need no ACK (spec §6.4 rule 9)
    };
    assert.deepEqual(row, expected, `${payload.event}: stored row`);
    const { log_id, kind, level, event, message, request_id, action, stream, output: out, status } = log;
    assert.deepEqual({ log_id, kind, level, event, message, request_id, action, stream, output: out, status }, expected, `${payload.event}: frame`);
  }

  // The explicit offline event took the node offline; the next non-offline event brings it back
  // (spec §6.4 rules 6 and 9; §6.5 emission rule 1: endpoint.status.updated from client events).
  const presence = (f: { event?: string; json: { payload: Record<string, unknown> } }) =>
    f.event === "endpoint.status.updated" ? (f.json.payload.status as { client_presence_state: string }).client_presence_state : undefined;
  await eventually("offline published", () => (sse.frames.some((f) => presence(f) === "offline") ? true : undefined));
  await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "mqtt_connected", message: "back" }), { qos: 1 });
  await sse.waitFor((f) => presence(f) === "online");
  const row = db.prepare("SELECT client_presence_state FROM node_client_state WHERE node_id = ?").get(nodeId);
  assert.deepEqual(row, { client_presence_state: "online" });

  // The will (an abrupt drop) is an event too: stored, then the node is offline.
  agent.stream.destroy();
  const will = await sse.waitFor(
    (f) => f.event === "control.log.created" && (f.json.payload.log as { message: string }).message === "lost",
  );
  assert.deepEqual(
    { level: (will.json.payload.log as StoredLog).level, event: (will.json.payload.log as StoredLog).event },
    { level: "info", event: "offline" },
  );

  assert.deepEqual(watch.failures, [], "control.log.created was published after each row committed");
  assert.equal(watch.checked.get("control.log.created"), sent.length + 2);

  // The REST list shows them all, newest first, with the same fields (DESIGN §5 control-logs).
  const logs = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as StoredLog[];
  assert.deepEqual(
    logs.map((l) => [l.level, l.event, l.message]),
    [["info", "offline", "lost"], ["info", "mqtt_connected", "back"], ...[...sent].reverse().map((e) => [e.level, e.event, e.message])],
  );
});

test("SVC_CONTROL_LOG_RETENTION: default 1000, 1..1000000 integers only", () => {
  assert.equal(loadSettings({}).controlLogRetention, 1000);
  assert.equal(loadSettings({ SVC_CONTROL_LOG_RETENTION: "25" }).controlLogRetention, 25);
  for (const bad of ["0", "-1", "1.5", "abc", "1000001"]) {
    assert.throws(() => loadSettings({ SVC_CONTROL_LOG_RETENTION: bad }), (err: unknown) => {
      assert.ok(err instanceof SettingsError);
      assert.match(err.message, /^invalid setting SVC_CONTROL_LOG_RETENTION: /);
      return true;
    }, bad);
  }
});

test("spec §6.4 rule 9: retention keeps exactly the newest N rows of a node as events arrive, and leaves other nodes' older rows alone", T, async (t) => {
  const s = await startSseServer(t, {}, { settings: { controlLogRetention: 5 } });
  const a = await boundAgent(s, t);
  const b = await boundAgent(s, t);
  const db = reader(t, s);
  // b's rows come first: their log_ids are below a's cut-off, so only the node filter keeps them.
  for (let i = 1; i <= 3; i++) {
    await b.agent.publishAsync(b.p.topics.event!, envelope(b.p, "event", { level: "info", event: "note", message: `b${i}` }), { qos: 1 });
  }
  await eventually("b stored", () => (s.server.eventLog.stored === 3 ? true : undefined));
  for (let i = 1; i <= 8; i++) {
    await a.agent.publishAsync(a.p.topics.event!, envelope(a.p, "event", { level: "info", event: "note", message: `a${i}` }), { qos: 1 });
  }
  await eventually("a stored", () => (s.server.eventLog.stored === 11 ? true : undefined));
  await s.server.controlLogRetention.idle();

  const rows = (nodeId: string) =>
    db.prepare("SELECT log_id, message FROM control_logs WHERE node_id = ? ORDER BY log_id").all(nodeId) as Array<{ log_id: number; message: string }>;
  assert.deepEqual(rows(a.nodeId).map((r) => r.message), ["a4", "a5", "a6", "a7", "a8"], "the newest five of a");
  assert.deepEqual(rows(b.nodeId).map((r) => r.message), ["b1", "b2", "b3"], "b untouched");
  assert.ok(rows(b.nodeId).every((r) => r.log_id < rows(a.nodeId)[0]!.log_id), "b's rows are older than a's cut-off");

  // Commands count too: one more row for a, and the oldest of a goes.
  const sent = await api(s, "POST", `/api/v1/configs/${a.configId}/nodes/${a.nodeId}/control`, { action: "stop" });
  assert.equal(sent.status, 202);
  await s.server.controlLogRetention.idle();
  assert.deepEqual(rows(a.nodeId).map((r) => r.message), ["a5", "a6", "a7", "a8", ""]);
  assert.equal(rows(a.nodeId).at(-1)!.log_id, sent.json.log.log_id);
});

test("retention prunes a large table in chunks (none doing the whole prune), at start and on the periodic sweep", T, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-retention-test-"));
  const now = Date.parse("2026-01-01T00:00:00.000Z");
  // A database grown by an older version: 300 000 rows for node a, 1 500 for b, 10 for c.
  const seed = await Store.open(join(dataDir, "svc.db"), createLogger("silent"));
  const sqlite = sqliteOf(seed);
  sqlite.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES ('cfg', 'cfg', 'wireguard', '10.9.0.0/24', ?, ?)").run(now, now);
  const addNode = sqlite.prepare(
    `INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at)
     VALUES (?, 'cfg', ?, 'static', 'svc0', ?, 'k', 'k', ?, ?)`,
  );
  const addState = sqlite.prepare("INSERT INTO node_client_state (node_id, updated_at) VALUES (?, ?)");
  ["a", "b", "c"].forEach((id, i) => {
    addNode.run(id, id, `10.9.0.${i + 1}`, now, now);
    addState.run(id, now);
  });
  const addLog = sqlite.prepare(
    `INSERT INTO control_logs (node_id, config_id, kind, level, event, message, created_at, updated_at)
     VALUES (?, 'cfg', 'event', 'info', 'note', ?, ?, ?)`,
  );
  sqlite.transaction(() => {
    for (let i = 0; i < 10; i++) addLog.run("c", `c${i}`, now, now);
    for (let i = 0; i < 300_000; i++) {
      addLog.run("a", `a${i}`, now, now);
      if (i % 200 === 0) addLog.run("b", `b${i}`, now, now);
    }
  })();
  const newest = (node: string, n: number) =>
    (sqlite.prepare("SELECT log_id FROM control_logs WHERE node_id = ? ORDER BY log_id DESC LIMIT ?").all(node, n) as Array<{ log_id: number }>).map((r) => r.log_id);
  const keepA = newest("a", 1000);
  const keepB = newest("b", 1000);
  const allC = newest("c", 100);
  assert.equal(newest("b", 10_000).length, 1500);
  await seed.close();

  // The service alone (no HTTP login: its scrypt would run on the thread pool meanwhile and count
  // in the process's CPU time below).
  const clock = new ManualClock();
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  // No store worker and the broker on the main thread: the process's CPU time, which the steps
  // are measured by, counts every thread's (a broker thread loading its modules would count too).
  const server = await createServer(testSettings({ dataDir, embeddedBrokerThread: false }), createLogger("silent"), { clock, storeWorker: false });
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  await server.controlLogRetention.idle();
  delay.disable();
  const stats = server.controlLogRetention.stats();
  const loopMaxMs = delay.max / 1e6;
  t.diagnostic(
    `steps ${stats.chunks}, deleted ${stats.deleted}, longest step ${stats.longestChunkCpuMs.toFixed(2)} ms CPU / ` +
      `${stats.longestChunkMs.toFixed(2)} ms wall, chunk rows ${stats.chunkRows}, event-loop delay max ${loopMaxMs.toFixed(1)} ms`,
  );

  const db = new SQLite(sqliteOf(server.store).name, { readonly: true });
  t.after(() => db.close());
  const ids = (node: string) => (db.prepare("SELECT log_id FROM control_logs WHERE node_id = ? ORDER BY log_id DESC").all(node) as Array<{ log_id: number }>).map((r) => r.log_id);
  assert.deepEqual(ids("a"), keepA, "a keeps exactly its newest 1000");
  assert.deepEqual(ids("b"), keepB, "b keeps exactly its newest 1000");
  assert.deepEqual(ids("c"), allC, "c (10 rows) untouched");
  assert.equal(stats.deleted, 299_000 + 500);
  assert.ok(stats.chunks > 50, `the work was cut into steps (${stats.chunks})`);
  // No step did the whole prune: deleting the 299,500 rows in one statement costs well over 100 ms
  // of CPU, a 2,048-row chunk about 1 ms. The bound is loose on purpose: the process's CPU time
  // also counts its other threads (garbage collection) and a WAL checkpoint a commit may run, and
  // a step was once measured at 10.05 ms on a loaded machine. How long steps take is a figure for
  // the benchmarks (printed above), not a pass/fail line.
  assert.ok(stats.longestChunkCpuMs < 50, `longest step ${stats.longestChunkCpuMs.toFixed(2)} ms of CPU: a step did far more than one chunk`);

  // Rows that arrive by another path (a restore, an older process): the hourly sweep prunes them.
  const writer = new SQLite(sqliteOf(server.store).name);
  const add = writer.prepare(
    "INSERT INTO control_logs (node_id, config_id, kind, level, event, message, created_at, updated_at) VALUES ('c', 'cfg', 'event', 'info', 'note', ?, ?, ?)",
  );
  writer.transaction(() => {
    for (let i = 0; i < 1500; i++) add.run(`late${i}`, now, now);
  })();
  writer.close();
  clock.advance(3_599_999);
  await server.controlLogRetention.idle();
  assert.equal(ids("c").length, 1510, "nothing before the hour");
  clock.advance(1);
  await server.controlLogRetention.idle();
  const c = db.prepare("SELECT message FROM control_logs WHERE node_id = 'c' ORDER BY log_id").all() as Array<{ message: string }>;
  assert.equal(c.length, 1000);
  assert.equal(c[0]!.message, "late500");
  assert.equal(c.at(-1)!.message, "late1499");
});

test("one event whose node is gone does not cost the others of its batch (spec §6.4 rule 9)", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-event-log-test-"));
  const store = await Store.open(join(dataDir, "svc.db"), createLogger("silent"));
  t.after(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const now = Date.parse("2026-01-01T00:00:00.000Z");
  sqliteOf(store).prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES ('cfg', 'cfg', 'wireguard', '10.9.0.0/24', ?, ?)").run(now, now);
  sqliteOf(store)
    .prepare(
      `INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at)
       VALUES ('a', 'cfg', 'a', 'dynamic', 'svc0', '10.9.0.1', 'k', 'k', ?, ?)`,
    )
    .run(now, now);
  const stored: string[] = [];
  const events = new EventLog({ store, log: createLogger("silent"), onStored: (log) => stored.push(`${log.node_id}:${log.message}`) });
  const event = (node: string, message: string) => ({
    config_id: "cfg", node_id: node, kind: "event" as const, request_id: null, level: "info", event: "note", message,
    action: null, stream: null, output: null, created_at: now,
  });
  events.record(event("a", "first"));
  events.record(event("deleted-node", "orphan")); // its node is gone: the foreign key refuses it
  events.record(event("a", "second"));
  await eventually("flushed", () => (events.pending === 0 && stored.length > 0 ? true : undefined));
  assert.deepEqual(stored, ["a:first", "a:second"]);
  assert.equal(events.stored, 2);
  const rows = sqliteOf(store).prepare("SELECT node_id, message FROM control_logs ORDER BY log_id").all();
  assert.deepEqual(rows, [{ node_id: "a", message: "first" }, { node_id: "a", message: "second" }]);
});
