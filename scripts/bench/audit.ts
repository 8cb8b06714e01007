/**
 * The audit log's cost per write (a benchmark, not a test: it prints tables and asserts nothing).
 *
 *   npx tsx scripts/bench/audit.ts [--rows 20000] [--requests 3000]
 *
 * 1. The writer alone (src/services/audit-writer.ts), over a real SQLite file: `--rows` entries
 *    recorded in batches of 1, 10, 100 and 1,000 per turn of the event loop, each batch chained
 *    (SHA-256) and written in one transaction. Prints µs of wall and CPU time per entry and the
 *    longest batch (the time the event loop is held by one group commit).
 * 2. The request path, over the real HTTP stack on loopback: `--requests` sequential
 *    `PATCH /api/v1/configs/{unknown}` (404, recorded as `config.update failed`) with the audit
 *    log as built, then with `AuditService.record` replaced by a no-op (the entry is still
 *    built), alternating in rounds. Prints p50/p99 latency and the event loop's largest delay.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { testSettings } from "../../src/config.js";
import { systemClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { AuditService } from "../../src/services/audit.service.js";
import { Store } from "../../src/store/db.js";

const { values } = parseArgs({ options: { rows: { type: "string", default: "20000" }, requests: { type: "string", default: "3000" } } });
const ROWS = Number(values.rows);
const REQUESTS = Number(values.requests);
const log = createLogger("silent");

function entry(i: number) {
  return {
    actor_kind: "user" as const,
    actor_id: "usr-admin",
    actor_name: "admin",
    action: "node.update",
    target_type: "node",
    target_id: `node-${i % 5000}`,
    target_config_id: "cfg-bench",
    outcome: "ok" as const,
    source_ip: "192.0.2.1",
    request_id: "3f1c2b7e-0d4a-4c8e-9a57-6b2f1e0c9d3a",
    changes: JSON.stringify({ fields: ["listen_port", "name"], values: { name: `node-${i}`, listen_port: 51820 } }),
  };
}

async function writer(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-audit-bench-"));
  const store = await Store.open(join(dir, "svc.db"), log);
  console.log(`\nwriter: ${ROWS} entries per batch size, real SQLite file (WAL, synchronous = NORMAL)\n`);
  console.log("| batch | µs/entry wall | µs/entry CPU | longest group commit ms |");
  console.log("|---:|---:|---:|---:|");
  for (const batch of [1, 10, 100, 1000]) {
    const audit = new AuditService({ store, clock: systemClock, log, hub: { publish: () => undefined }, retentionDays: 365 });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let done = 0; done < ROWS; done += batch) {
      for (let i = 0; i < batch; i++) audit.record(entry(done + i));
      await audit.flushed();
    }
    const longest = audit.longestCommitMs;
    const wall = ((performance.now() - t0) * 1000) / ROWS;
    const cpu = process.cpuUsage(cpu0);
    console.log(`| ${batch} | ${wall.toFixed(1)} | ${((cpu.user + cpu.system) / ROWS).toFixed(1)} | ${longest.toFixed(2)} |`);
    await audit.close();
  }
  const audit = new AuditService({ store, clock: systemClock, log, hub: { publish: () => undefined }, retentionDays: 365 });
  const v0 = performance.now();
  const verified = await audit.verify();
  console.log(`\nverify: ${verified.rows_checked} rows in ${(performance.now() - v0).toFixed(0)} ms (ok: ${verified.ok})`);
  await audit.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

async function requestPath(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-audit-bench-http-"));
  const server = await createServer(testSettings({ dataDir, adminPassword: "bench password 123", httpPort: 0, mqttEnabled: false }), log);
  await server.app.listen({ host: "127.0.0.1", port: 0 });
  const address = server.app.server.address();
  const base = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`;
  const login = await fetch(`${base}/api/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: "bench password 123" }) });
  const token = ((await login.json()) as { access_token: string }).access_token;
  const record = server.audit.record.bind(server.audit);
  const timings: Record<string, number[]> = { recorded: [], "record is a no-op": [] };
  const loop: Record<string, number> = { recorded: 0, "record is a no-op": 0 };
  const rounds = 6;
  for (let round = 0; round < rounds; round++) {
    for (const mode of ["recorded", "record is a no-op"] as const) {
      server.audit.record = mode === "recorded" ? record : () => undefined;
      const h = monitorEventLoopDelay({ resolution: 1 });
      h.enable();
      for (let i = 0; i < REQUESTS / rounds; i++) {
        const t0 = performance.now();
        const res = await fetch(`${base}/api/v1/configs/cfg-unknown-${i}`, { method: "PATCH", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ name: `n-${i}` }) });
        await res.arrayBuffer();
        timings[mode]?.push(performance.now() - t0);
      }
      h.disable();
      loop[mode] = Math.max(loop[mode] ?? 0, h.max / 1e6);
    }
  }
  await server.audit.flushed();
  console.log(`\nrequest path: ${REQUESTS} PATCH requests each way, sequential, loopback (audit rows written: ${server.audit.written})\n`);
  console.log("| audit | p50 ms | p99 ms | event loop max delay ms |");
  console.log("|---|---:|---:|---:|");
  for (const [mode, list] of Object.entries(timings)) {
    list.sort((a, b) => a - b);
    const q = (p: number) => list[Math.min(list.length - 1, Math.floor(p * list.length))]?.toFixed(2);
    console.log(`| ${mode} | ${q(0.5)} | ${q(0.99)} | ${(loop[mode] ?? 0).toFixed(1)} |`);
  }
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}

await writer();
await requestPath();
