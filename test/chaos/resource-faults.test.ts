import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { ManualClock, type Clock } from "../../src/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type Server } from "../../src/server.js";
import { api, bind, connectAgent, dynamicNode, envelope, eventually, nextMessage, status } from "../control/agent-harness.js";
import { ADMIN_PASSWORD, listenAndLogin, type SseServer } from "../events/sse-harness.js";
import { requireSystem } from "../helpers/system.js";

/**
 * Resource faults (issue 15 item 6; docs/decisions.md "Issue 15: chaos and resource faults").
 * The data directory full (a 2 MiB tmpfs the test mounts) or read-only, SQLite busy (another
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
  const server: Server = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock });
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

test("data directory full (2 MiB tmpfs): writes answer 503 STORAGE_UNAVAILABLE reason full, reads still answer, no half-written row or snapshot file; freeing space recovers without a restart (issue 15 item 6)", async (t) => {
  const mnt = tmpfs(t, 2 * 1024 * 1024);
  if (mnt === undefined) return;
  const s = await serve(t, join(mnt, "data"));
  assert.equal((await api(s, "POST", "/api/v1/configs", config("before"))).status, 201);
  // The WAL keeps its pages after a checkpoint; truncate it so the next write must grow a file.
  s.server.store.sqlite.pragma("wal_checkpoint(TRUNCATE)");
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

  rmSync(filler);
  const snapshotsDir = join(s.dataDir, "snapshots");
  assert.deepEqual(existsSync(snapshotsDir) ? readdirSync(snapshotsDir).filter((f) => !f.startsWith(".")) : [], [], "no partial snapshot left behind");
  assert.equal((await api(s, "POST", "/api/v1/configs", config("after"))).status, 201, "recovers once space is free");
  assert.equal((await api(s, "POST", "/api/v1/backups")).status, 201);
  await s.close();
  assert.deepEqual(dbCheck(join(s.dataDir, "svc.db")), { integrity: "ok", configs: ["after", "before"] });
});

test("data directory read-only at start: start-up fails with one line naming the directory and the cause; writable again, it starts with every row intact (issue 15 item 6)", async (t) => {
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

test("snapshots directory read-only while running: snapshot create answers 503 STORAGE_UNAVAILABLE reason read_only, no row; writable again, it succeeds (issue 15 item 6)", async (t) => {
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

test("SQLite busy (another connection holds the write lock past busy_timeout): 503 STORAGE_UNAVAILABLE reason busy, no row; once released the same write succeeds (issue 15 item 6)", async (t) => {
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
