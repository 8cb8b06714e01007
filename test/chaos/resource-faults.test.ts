import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { ManualClock, type Clock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { api, bind, connectAgent, dynamicNode, envelope, eventually, nextMessage, status } from "../control/agent-harness.js";
import { ADMIN_PASSWORD, listenAndLogin, type SseServer } from "../events/sse-harness.js";
import { requireSystem } from "../helpers/system.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Resource faults (docs/history/decisions-2026.md "chaos and resource faults").
 * The data directory full (a 4 MiB tmpfs the test mounts) or read-only, SQLite busy (another
 * connection holding the write lock), and the wall clock jumping forward 2 h and back 5 min (an
 * injected clock whose timers stay monotonic, as Node's do). Each answers a registered error code
 * (503 `STORAGE_UNAVAILABLE` with `details.reason` where the server truly cannot write), leaves no
 * half-written row, and recovers without a restart once the fault ends.
 */

/**
 * The wall clock of a host whose time is set by hand: `jump(ms)` moves `now()` only; timers run
 * on the monotonic time that `advance(ms)` moves (Node's timers do not follow the wall clock).
 */
class JumpClock implements Clock {
  readonly mono = new ManualClock();
  offset = 0;
  now(): number {
    return this.mono.now() + this.offset;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    return this.mono.setTimeout(fn, ms);
  }
  clearTimeout(handle: unknown): void {
    this.mono.clearTimeout(handle);
  }
  advance(ms: number): void {
    this.mono.advance(ms);
  }
  jump(ms: number): void {
    this.offset += ms;
  }
}

interface Running extends SseServer {
  dataDir: string;
}

/** The real service (embedded broker on port 0, REST on 127.0.0.1:0) over `dataDir` with `clock`. */
async function serve(t: TestContext, dataDir: string, clock: Clock = new ManualClock()): Promise<Running> {
  const server: AppContext = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock });
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= server.close());
  t.after(close);
  const { baseUrl, token } = await listenAndLogin(server);
  return { server, hub: server.hub, clock: clock as ManualClock, baseUrl, token, close, dataDir, open: () => Promise.reject(new Error("no SSE here")), openStalled: () => Promise.reject(new Error("no SSE here")) };
}

/**
 * A tmpfs of `sizeBytes` mounted on a fresh directory (root only; unmounted after the test).
 * Returns undefined when the test was skipped (not root, SVC_TEST_REQUIRE_SYSTEM unset).
 */
function tmpfs(t: TestContext, sizeBytes: number): string | undefined {
  if (!requireSystem(t, { root: true, binaries: ["mount", "umount"] })) return undefined;
  const mnt = mkdtempSync(join(tmpdir(), "svc-faults-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${sizeBytes},mode=0700`, "tmpfs", mnt]);
  t.after(() => {
    try {
      execFileSync("umount", [mnt], { stdio: "ignore" });
    } catch {
      execFileSync("umount", ["-l", mnt]); // a straggling handle: detach now, freed when closed
    }
    rmSync(mnt, { recursive: true, force: true });
  });
  return mnt;
}

/** Writes a filler file until the file system answers ENOSPC; returns its path. */
function fill(dir: string): string {
  const path = join(dir, "filler.bin");
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(16 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, "ENOSPC");
  } finally {
    closeSync(fd);
  }
  return path;
}

function dbCheck(file: string): { integrity: string; configs: string[] } {
  const db = new SQLite(file, { readonly: true });
  try {
    const integrity = (db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join("; ");
    const configs = (db.prepare("SELECT name FROM configs ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name);
    return { integrity, configs };
  } finally {
    db.close();
  }
}

const config = (name: string) => ({ name, tunnel_protocol: "wireguard", network_cidr: "10.70.0.0/24" });

test("data directory full (4 MiB tmpfs): writes answer 503 STORAGE_UNAVAILABLE reason full, reads still answer, no half-written row or snapshot file; freeing space recovers without a restart", async (t) => {
  const mnt = tmpfs(t, 4 * 1024 * 1024);
  if (mnt === undefined) return;
  const s = await serve(t, join(mnt, "data"));
  const node = await dynamicNode(s);
  const p = await bind(s, node.configId, node.nodeId);
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  const received: string[] = [];
  agent.on("message", (topic) => received.push(topic));
  assert.equal((await api(s, "POST", "/api/v1/configs", config("before"))).status, 201);
  // The WAL keeps its pages after a checkpoint; truncate it so the next write must grow a file.
  sqliteOf(s.server.store).pragma("wal_checkpoint(TRUNCATE)");
  const filler = fill(mnt);

  const write = await api(s, "POST", "/api/v1/configs", config("during"));
  assert.equal(write.status, 503, JSON.stringify(write.json));
  assert.equal(write.json.error.code, "STORAGE_UNAVAILABLE");
  assert.equal(write.json.error.details.reason, "full");
  const snapshot = await api(s, "POST", "/api/v1/backups");
  assert.equal(snapshot.status, 503, JSON.stringify(snapshot.json));
  assert.equal(snapshot.json.error.code, "STORAGE_UNAVAILABLE");
  const list = await api(s, "GET", "/api/v1/configs");
  assert.equal(list.status, 200, "reads still answer while the disk is full");
  // A command is logged before it is published (spec §2.8): no row, so nothing reaches the agent.
  const control = await api(s, "POST", `/api/v1/configs/${node.configId}/nodes/${node.nodeId}/control`, { action: "start" });
  assert.equal(control.status, 503, JSON.stringify(control.json));
  assert.equal(control.json.error.code, "STORAGE_UNAVAILABLE");
  // An agent's heartbeat while the disk is full: the backend keeps running (whether its state
  // write finds room in pages SQLite already holds is not controlled here).
  await agent.publishAsync(p.topics["heartbeat"] ?? "", envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  assert.equal((await api(s, "GET", "/api/v1/health")).status, 200, "the backend survives a failed state write");

  rmSync(filler);
  const snapshotsDir = join(s.dataDir, "snapshots");
  assert.deepEqual(existsSync(snapshotsDir) ? readdirSync(snapshotsDir).filter((f) => !f.startsWith(".")) : [], [], "no partial snapshot left behind");
  assert.equal((await api(s, "POST", "/api/v1/configs", config("after"))).status, 201, "recovers once space is free");
  assert.equal((await api(s, "POST", "/api/v1/backups")).status, 201);
  assert.deepEqual(received, [], "no command reached the agent while it could not be logged");
  await agent.publishAsync(p.topics["heartbeat"] ?? "", envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online after the disk has space again", async () => ((await status(s, node.configId, node.nodeId)).client_presence_state === "online" ? true : undefined));
  await s.close();
  const after = dbCheck(join(s.dataDir, "svc.db"));
  assert.equal(after.integrity, "ok");
  assert.deepEqual(after.configs.filter((c) => !c.startsWith("c-")), ["after", "before"]);
});

test("data directory full at start: start-up fails with one line naming the database file, SQLite's reason and the bytes free; with space again it starts with every row intact", async (t) => {
  const mnt = tmpfs(t, 4 * 1024 * 1024);
  if (mnt === undefined) return;
  const dataDir = join(mnt, "data");
  const first = await serve(t, dataDir);
  assert.equal((await api(first, "POST", "/api/v1/configs", config("kept"))).status, 201);
  await first.close();
  const filler = fill(mnt);
  await assert.rejects(
    createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock: new ManualClock() }),
    (err: Error) => {
      assert.ok(err.message.startsWith(`cannot open the database ${join(dataDir, "svc.db")}: `), err.message);
      assert.match(err.message, /; \d+ bytes free on its file system$/);
      return true;
    },
  );
  rmSync(filler);
  const again = await serve(t, dataDir);
  assert.equal((await api(again, "POST", "/api/v1/configs", config("new"))).status, 201);
  await again.close();
  assert.deepEqual(dbCheck(join(dataDir, "svc.db")), { integrity: "ok", configs: ["kept", "new"] });
});

test("data directory read-only at start: start-up fails with one line naming the directory and the cause; writable again, it starts with every row intact", async (t) => {
  const mnt = tmpfs(t, 8 * 1024 * 1024);
  if (mnt === undefined) return;
  const dataDir = join(mnt, "data");
  const first = await serve(t, dataDir);
  assert.equal((await api(first, "POST", "/api/v1/configs", config("kept"))).status, 201);
  await first.close();
  execFileSync("mount", ["-o", "remount,ro", mnt]);
  await assert.rejects(
    createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock: new ManualClock() }),
    (err: Error) => {
      assert.match(err.message, /read-only/);
      assert.ok(err.message.includes(dataDir), err.message);
      return true;
    },
  );
  execFileSync("mount", ["-o", "remount,rw", mnt]);
  const again = await serve(t, dataDir);
  assert.deepEqual((await api(again, "GET", "/api/v1/configs")).json.configs?.map((c: { name: string }) => c.name) ?? (await api(again, "GET", "/api/v1/configs")).json.map((c: { name: string }) => c.name), ["kept"]);
  assert.equal((await api(again, "POST", "/api/v1/configs", config("new"))).status, 201);
});

test("snapshots directory read-only while running: snapshot create answers 503 STORAGE_UNAVAILABLE reason read_only, no row; writable again, it succeeds", async (t) => {
  const mnt = tmpfs(t, 8 * 1024 * 1024);
  if (mnt === undefined) return;
  const s = await serve(t, mkdtempSync(join(tmpdir(), "svc-faults-data-")));
  const snapshotsDir = join(s.dataDir, "snapshots");
  mkdirSync(snapshotsDir, { recursive: true });
  execFileSync("mount", ["--bind", mnt, snapshotsDir]);
  t.after(() => {
    execFileSync("umount", ["-l", snapshotsDir]);
    rmSync(s.dataDir, { recursive: true, force: true });
  });
  execFileSync("mount", ["-o", "remount,bind,ro", snapshotsDir]);
  const refused = await api(s, "POST", "/api/v1/backups");
  assert.equal(refused.status, 503, JSON.stringify(refused.json));
  assert.equal(refused.json.error.code, "STORAGE_UNAVAILABLE");
  assert.equal(refused.json.error.details.reason, "read_only");
  assert.deepEqual((await api(s, "GET", "/api/v1/backups")).json.snapshots ?? (await api(s, "GET", "/api/v1/backups")).json, []);
  execFileSync("mount", ["-o", "remount,bind,rw", snapshotsDir]);
  assert.equal((await api(s, "POST", "/api/v1/backups")).status, 201);
});

test("SQLite busy (another connection holds the write lock past busy_timeout): 503 STORAGE_UNAVAILABLE reason busy, no row; once released the same write succeeds", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-faults-busy-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const s = await serve(t, dataDir);
  const other = new SQLite(join(dataDir, "svc.db"));
  t.after(() => other.close());
  other.exec("BEGIN IMMEDIATE");
  const busy = await api(s, "POST", "/api/v1/configs", config("blocked"));
  assert.equal(busy.status, 503, JSON.stringify(busy.json));
  assert.equal(busy.json.error.code, "STORAGE_UNAVAILABLE");
  assert.equal(busy.json.error.details.reason, "busy");
  other.exec("ROLLBACK");
  assert.equal((await api(s, "POST", "/api/v1/configs", config("blocked"))).status, 201);
  await s.close();
  assert.deepEqual(dbCheck(join(dataDir, "svc.db")), { integrity: "ok", configs: ["blocked"] });
});

const MIN = 60_000;

/** A node online with a connected stand-in agent (heartbeat sent), on a service with a {@link JumpClock}. */
async function onlineNode(t: TestContext) {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-faults-clock-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const clock = new JumpClock();
  const s = await serve(t, dataDir, clock);
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  const heartbeat = async () => {
    await agent.publishAsync(p.topics["heartbeat"] ?? "", envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  };
  const presenceIs = (want: string) => eventually(`presence ${want}`, async () => ((await status(s, configId, nodeId)).client_presence_state === want ? true : undefined));
  await heartbeat();
  await presenceIs("online");
  const base = `/api/v1/configs/${configId}/nodes/${nodeId}`;
  /** POST control `stop` (sent at once, unlike a start before the first config); the agent ACKs it `applied` unless `ack` is false. @returns its request_id */
  const command = async (ack = true): Promise<string> => {
    const received = nextMessage(agent, p.topics["control"] ?? "");
    const sent = await api(s, "POST", `${base}/control`, { action: "stop" });
    assert.equal(sent.status, 202, JSON.stringify(sent.json));
    const msg = await received;
    if (ack) await agent.publishAsync(p.topics["control_ack"] ?? "", envelope(p, "ack", { status: "applied", message: "", action: "stop" }, msg.request_id), { qos: 1 });
    return msg.request_id;
  };
  const logStatus = async (requestId: string) => ((await api(s, "GET", `${base}/control-logs?limit=100`)).json.logs as Array<{ request_id: string; status: string }>).find((l) => l.request_id === requestId)?.status;
  return { s, clock, configId, nodeId, p, agent, base, heartbeat, presenceIs, command, logStatus, dataDir };
}

test("clock jump forward 2 h: tokens expire by the wall clock (401 INVALID_BIND_TOKEN / INVALID_DOWNLOAD_TOKEN), the admin session lives on, the open command times out once, presence drops at the next sweep; a heartbeat and new commands recover; no 5xx, integrity ok (spec §3.1, §3.6, §3.7)", async (t) => {
  const n = await onlineNode(t);
  const other = await dynamicNode(n.s);
  const bindCommand = await api(n.s, "POST", `/api/v1/configs/${other.configId}/nodes/${other.nodeId}/bind-command`);
  const bindToken = /--token (\S+)$/.exec(bindCommand.json.command)?.[1];
  const download = await api(n.s, "POST", `${n.base}/download-token`);
  assert.equal(download.status, 200, JSON.stringify(download.json));
  const open = await n.command(false);

  n.clock.jump(120 * MIN);
  const rebind = await api(n.s, "POST", "/api/client/bind", { bind_token: bindToken, server_url: n.s.baseUrl, client_version: "1", platform: "linux", hostname: "h" }, false);
  assert.equal(rebind.status, 401);
  assert.equal(rebind.json.error.code, "INVALID_BIND_TOKEN");
  const fetched = await fetch(`${n.s.baseUrl}${download.json.download_path}`);
  assert.equal(fetched.status, 401);
  assert.equal(((await fetched.json()) as { error: { code: string } }).error.code, "INVALID_DOWNLOAD_TOKEN");
  assert.equal((await api(n.s, "GET", "/api/v1/configs")).status, 200, "the 12 h admin session outlives a 2 h jump");
  assert.equal(await n.logStatus(open), "pending", "timers run on monotonic time: the command is not timed out by the jump itself");

  n.clock.advance(60_000); // the command timeout (DESIGN §3: 60 s) on monotonic time
  await eventually("timed_out", async () => ((await n.logStatus(open)) === "timed_out" ? true : undefined));
  n.clock.advance(45 * MIN); // the presence sweep that was armed for the old deadline fires
  await n.presenceIs("dropped");

  await n.heartbeat();
  await n.presenceIs("online");
  const next = await n.command();
  await eventually("applied", async () => ((await n.logStatus(next)) === "applied" ? true : undefined));
  assert.equal(await n.logStatus(open), "timed_out", "a terminal status stays terminal");
  const fresh = await api(n.s, "POST", `/api/v1/configs/${other.configId}/nodes/${other.nodeId}/bind-command`);
  assert.equal(fresh.status, 200);
  await n.s.close();
  const db = new SQLite(join(n.dataDir, "svc.db"), { readonly: true });
  t.after(() => db.close());
  assert.deepEqual(db.pragma("integrity_check"), [{ integrity_check: "ok" }]);
  assert.deepEqual(db.prepare("SELECT COUNT(*) AS n FROM control_logs WHERE kind = 'command' AND status IN ('pending', 'accepted')").get(), { n: 0 });
});

test("clock jump backward 5 min: the newest control log is listed first (insertion order, not created_at), commands still close, presence drops one TTL after the last signal; no 5xx, integrity ok (spec §2.8, §3.1)", async (t) => {
  const n = await onlineNode(t);
  const first = await n.command();
  await eventually("first applied", async () => ((await n.logStatus(first)) === "applied" ? true : undefined));

  n.clock.jump(-5 * MIN);
  const second = await n.command();
  await eventually("second applied", async () => ((await n.logStatus(second)) === "applied" ? true : undefined));
  const newest = await api(n.s, "GET", `${n.base}/control-logs?limit=1`);
  assert.equal(newest.status, 200);
  assert.equal(newest.json.logs[0]?.request_id, second, "the command sent last is the newest log, whatever the wall clock said");

  // The node is online already, so wait for this heartbeat's own signal time (the wall clock set
  // back), not for a presence that was true before it arrived.
  const signalAt = new Date(n.clock.now()).toISOString();
  await n.heartbeat();
  await eventually("heartbeat stored", async () => ((await api(n.s, "GET", `${n.base}/machine`)).json.context?.last_signal_at === signalAt ? true : undefined));
  n.clock.advance(44 * MIN);
  assert.equal((await status(n.s, n.configId, n.nodeId)).client_presence_state, "online", "within the TTL of the last signal");
  n.clock.advance(2 * MIN);
  // The heartbeat's commit re-arms the presence sweep; on a loaded machine that can land after
  // the advance above, arming a timer already due, which a manual clock fires at its next move:
  // move it by nothing while waiting.
  await eventually("presence dropped", async () => {
    n.clock.advance(0);
    return (await status(n.s, n.configId, n.nodeId)).client_presence_state === "dropped" ? true : undefined;
  });
  await n.heartbeat();
  await n.presenceIs("online");
  await n.s.close();
  const db = new SQLite(join(n.dataDir, "svc.db"), { readonly: true });
  t.after(() => db.close());
  assert.deepEqual(db.pragma("integrity_check"), [{ integrity_check: "ok" }]);
});
