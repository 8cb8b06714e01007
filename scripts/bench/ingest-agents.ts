/**
 * The load side of `scripts/bench/ingest.ts`, run as a child process (forked with IPC) so that it
 * does not share the service's event loop: simulated agents and SSE consoles.
 *
 * Agents speak raw MQTT 3.1.1 over one TCP connection each (CONNECT with username, password,
 * client id and the spec §6.3 will; PUBLISH of pre-encoded heartbeat envelopes; DISCONNECT):
 * MQTT.js costs far more CPU per message than the service's side of the wire, and on 2 cores the
 * generator must not be what is measured. Everything talks to 127.0.0.1 only.
 */
import { get } from "node:http";
import { connect as netConnect, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { AgentSpec, FromAgents, LatencySummary, ToAgents } from "./ingest-lib.js";
import { percentile } from "./ingest-lib.js";
import { framer, remainingLength, str } from "./raw-mqtt.js";

function send(msg: FromAgents): void {
  process.send?.(msg);
}

// ---- MQTT packets (wire pieces in ./raw-mqtt.ts) -------------------------------------------

function connectPacket(a: AgentSpec): Buffer {
  const will = JSON.stringify({
    type: "event",
    request_id: "",
    config_id: a.configId,
    node_id: a.nodeId,
    boot_id: "",
    session_id: "",
    sent_at: new Date().toISOString(),
    payload: { level: "info", event: "offline", message: "agent connection lost" },
  });
  // username | password | will QoS 1 | will flag | clean session
  const flags = 0x80 | 0x40 | 0x08 | 0x04 | 0x02;
  const variable = Buffer.concat([str("MQTT"), Buffer.from([4, flags, 0, 0])]); // keepalive 0: no pings needed
  const payload = Buffer.concat([str(a.clientId), str(a.eventTopic), str(will), str(a.username), str(a.password)]);
  const body = Buffer.concat([variable, payload]);
  return Buffer.concat([Buffer.from([0x10]), remainingLength(body.length), body]);
}

/** A heartbeat envelope (spec §6.2, payload spec §6.3). */
function heartbeat(a: AgentSpec, wgOnline: boolean, sentAt: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      type: "heartbeat",
      request_id: "",
      config_id: a.configId,
      node_id: a.nodeId,
      boot_id: "bench-boot",
      session_id: "bench-session",
      sent_at: sentAt,
      payload: { client_online: true, wg_online: wgOnline },
    }),
  );
}

/** PUBLISH bytes; for QoS 1 the packet id sits at `pidOffset`. */
function publishPacket(topic: string, payload: Buffer, qos: 0 | 1): { bytes: Buffer; pidOffset: number } {
  const t = str(topic);
  const pid = qos === 1 ? Buffer.alloc(2) : Buffer.alloc(0);
  const bodyLen = t.length + pid.length + payload.length;
  const head = Buffer.concat([Buffer.from([0x30 | (qos << 1)]), remainingLength(bodyLen)]);
  return { bytes: Buffer.concat([head, t, pid, payload]), pidOffset: head.length + t.length };
}

const DISCONNECT = Buffer.from([0xe0, 0x00]);

// ---- agents ---------------------------------------------------------------------------------

interface Conn {
  spec: AgentSpec;
  socket: Socket;
  pid: number;
  /** Pre-encoded heartbeats: [wg_online=false, wg_online=true], per QoS. */
  templates: Map<string, { bytes: Buffer; pidOffset: number }>;
  /** Next wg_online this agent reports in rate mode. */
  wg: boolean;
  alive: boolean;
}

const conns: Conn[] = [];
let acks = 0;
let sent = 0;

/** Splits MQTT packets out of a byte stream; calls back with the packet type byte and body. */
function connectOne(port: number, spec: AgentSpec): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    socket.setNoDelay(true);
    const conn: Conn = { spec, socket, pid: 0, templates: new Map(), wg: false, alive: false };
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error("CONNACK timeout")), 20_000);
    socket.on(
      "data",
      framer((type, body) => {
        const kind = type >> 4;
        if (kind === 2) {
          clearTimeout(timer);
          const rc = body[1];
          if (rc !== 0) return fail(new Error(`CONNACK rc=${rc}`));
          settled = true;
          conn.alive = true;
          resolve(conn);
        } else if (kind === 4) {
          acks++;
        }
      }),
    );
    socket.on("error", (err) => fail(err));
    socket.on("close", () => {
      conn.alive = false;
      clearTimeout(timer);
      fail(new Error("closed before CONNACK"));
    });
    socket.write(connectPacket(spec));
  });
}

async function connectAll(port: number, specs: AgentSpec[], concurrency: number): Promise<void> {
  const t0 = performance.now();
  let next = 0;
  let failed = 0;
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: Math.min(concurrency, specs.length) }, async () => {
      while (next < specs.length) {
        const spec = specs[next++]!;
        try {
          conns.push(await connectOne(port, spec));
        } catch (err) {
          failed++;
          if (errors.length < 3) errors.push(err instanceof Error ? err.message : String(err));
        }
      }
    }),
  );
  send({ op: "connected", ok: conns.length, failed, ms: performance.now() - t0, errors });
}

function template(conn: Conn, wg: boolean, qos: 0 | 1): { bytes: Buffer; pidOffset: number } {
  const k = `${wg ? 1 : 0}${qos}`;
  let t = conn.templates.get(k);
  if (t === undefined) {
    t = publishPacket(conn.spec.heartbeatTopic, heartbeat(conn.spec, wg, new Date().toISOString()), qos);
    conn.templates.set(k, t);
  }
  return t;
}

/** Writes one heartbeat; false when the connection is gone or its socket is backed up. */
function publish(conn: Conn, wg: boolean, qos: 0 | 1, fresh = false): boolean {
  if (!conn.alive || conn.socket.writableNeedDrain) return false;
  let bytes: Buffer;
  let pidOffset: number;
  if (fresh) {
    ({ bytes, pidOffset } = publishPacket(conn.spec.heartbeatTopic, heartbeat(conn.spec, wg, new Date().toISOString()), qos));
  } else {
    const t = template(conn, wg, qos);
    bytes = Buffer.allocUnsafe(t.bytes.length);
    t.bytes.copy(bytes);
    pidOffset = t.pidOffset;
  }
  if (qos === 1) {
    conn.pid = (conn.pid % 65535) + 1;
    bytes.writeUInt16BE(conn.pid, pidOffset);
  }
  conn.socket.write(bytes);
  sent++;
  return true;
}

// ---- closed-loop flood (upstream throughput) --------------------------------------------------

let flood: { window: number; qos: 0 | 1; toggle: boolean; cursor: number; cpu0: NodeJS.CpuUsage; t0: number } | null = null;
/** `endpoint.status.updated` frames read by console 0 (flood runs with a console). */
let statusFrames = 0;
let handled = 0;

function pump(): void {
  if (flood === null || conns.length === 0) return;
  let budget = handled + flood.window - sent;
  let skipped = 0;
  while (budget > 0 && skipped < conns.length) {
    const conn = conns[flood.cursor]!;
    flood.cursor = (flood.cursor + 1) % conns.length;
    if (publish(conn, flood.toggle ? conn.wg : true, flood.qos)) {
      if (flood.toggle) conn.wg = !conn.wg;
      budget--;
      skipped = 0;
    } else {
      skipped++;
    }
  }
}

// ---- SSE consoles ----------------------------------------------------------------------------

interface SseConn {
  /** Destroys the connection. */
  destroy(): void;
  opened: number;
}

const sse: SseConn[] = [];
/** Per fan-out sequence number: when each console read it (hrtime ns). */
const fanout = new Map<number, { t0: bigint; reads: bigint[]; timer: NodeJS.Timeout }>();
/** Frame listener of the latency run (console 0 only). */
let onStatusFrame: ((nodeId: string, runtime: string) => void) | null = null;

function openSse(url: string, token: string, index: number): Promise<SseConn> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: false, headers: { accept: "text/event-stream", authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`SSE status ${res.statusCode}`));
        return;
      }
      res.setEncoding("utf8");
      const conn: SseConn = { destroy: () => res.destroy(), opened: 0 };
      let buffer = "";
      res.on("data", (chunk: string) => {
        buffer += chunk;
        let idx: number;
        while ((idx = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, idx);
          buffer = buffer.slice(idx + 2);
          onFrame(conn, index, block);
        }
        if (conn.opened === 2) {
          conn.opened = 3;
          resolve(conn);
        }
      });
      res.on("error", () => undefined);
    });
    req.on("error", reject);
    req.setTimeout(30_000, () => req.destroy(new Error("SSE open timeout")));
  });
}

/**
 * A console on a raw socket (fan-out runs): one HTTP/1.1 GET, then the chunked body is scanned
 * for complete frames without the http client's stream machinery, which on one core for 1,000
 * consoles would otherwise be most of what is measured. A browser does this part in native code.
 */
function openRawSse(url: string, token: string, index: number): Promise<SseConn> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: u.hostname, port: Number(u.port) });
    socket.setNoDelay(true);
    const conn: SseConn = { destroy: () => socket.destroy(), opened: 0 };
    let head = true;
    let buffer = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("SSE open timeout"));
    }, 30_000);
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("latin1");
      if (head) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        if (!buffer.startsWith("HTTP/1.1 200")) {
          socket.destroy();
          reject(new Error(buffer.slice(0, 40)));
          return;
        }
        head = false;
        buffer = buffer.slice(end + 4);
      }
      // Chunk-size lines of the chunked encoding sit between frames; frames end with a blank line.
      let idx: number;
      while ((idx = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, idx);
        buffer = buffer.slice(idx + 2);
        const start = block.indexOf("id: ");
        if (start >= 0) onFrame(conn, index, block.slice(start));
      }
      if (conn.opened === 2) {
        conn.opened = 3;
        clearTimeout(timer);
        resolve(conn);
      }
    });
    socket.write(
      `GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${token}\r\n\r\n`,
    );
  });
}

function onFrame(conn: SseConn, index: number, block: string): void {
  let event = "";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data = line.slice(6);
  }
  if (conn.opened < 2 && (event === "system.status.updated" || event === "system.clock.sync")) {
    conn.opened++;
    return;
  }
  if (event !== "endpoint.status.updated") return;
  const at = process.hrtime.bigint();
  const json = JSON.parse(data) as {
    payload: { node_id?: string; status?: { runtime_state?: string }; bench_seq?: number; bench_t0?: string };
  };
  const p = json.payload;
  if (typeof p.bench_seq === "number" && typeof p.bench_t0 === "string") {
    const f = noteFanout(p.bench_seq, BigInt(p.bench_t0));
    f.reads.push(at);
    if (f.reads.length === sse.length) finishFanout(p.bench_seq);
    return;
  }
  if (index === 0 && p.node_id !== undefined && p.status?.runtime_state !== undefined) {
    statusFrames++;
    onStatusFrame?.(p.node_id, p.status.runtime_state);
  }
}

/**
 * A fan-out frame carries its publish time (hrtime ns of the server process: CLOCK_MONOTONIC,
 * the same clock in every process) in its payload; the first read arms a 5 s bound.
 */
function noteFanout(seq: number, t0: bigint): { t0: bigint; reads: bigint[]; timer: NodeJS.Timeout } {
  let f = fanout.get(seq);
  if (f === undefined) {
    f = { t0, reads: [], timer: setTimeout(() => finishFanout(seq), 5000) };
    fanout.set(seq, f);
  }
  return f;
}

function finishFanout(seq: number): void {
  const f = fanout.get(seq);
  if (f === undefined) return;
  clearTimeout(f.timer);
  fanout.delete(seq);
  send({ op: "fanout", seq, delaysUs: f.reads.map((r) => Number(r - f.t0) / 1000) });
}

async function openAll(url: string, token: string, n: number, raw: boolean): Promise<void> {
  const t0 = performance.now();
  let failed = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(64, n) }, async () => {
      while (next < n) {
        const i = next++;
        try {
          sse.push(await (raw ? openRawSse(url, token, i) : openSse(url, token, i)));
        } catch {
          failed++;
        }
      }
    }),
  );
  send({ op: "sse-ready", n: sse.length, failed, ms: performance.now() - t0 });
}

// ---- latency runs (rate mode) ----------------------------------------------------------------

const byNode = new Map<string, number>();
/** Per agent: heartbeats sent and not yet seen on the SSE stream, oldest first. */
let pending: Array<Array<{ t: number; wg: boolean }>> = [];

async function warm(rate: number, timeoutMs: number): Promise<void> {
  const t0 = performance.now();
  const seen = new Set<string>();
  onStatusFrame = (nodeId, runtime) => {
    if (runtime === "running") seen.add(nodeId);
  };
  let i = 0;
  const deadline = t0 + timeoutMs;
  while (i < conns.length && performance.now() < deadline) {
    const due = Math.min(conns.length, Math.floor(((performance.now() - t0) / 1000) * rate) + 1);
    for (; i < due; i++) {
      const c = conns[i]!;
      publish(c, true, 1, true);
      c.wg = false;
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  while (seen.size < conns.length && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  onStatusFrame = null;
  send({ op: "warm-done", seen: seen.size, ms: performance.now() - t0 });
}

async function rateRun(rate: number, durationMs: number, drainMs: number): Promise<void> {
  conns.forEach((c, i) => byNode.set(c.spec.nodeId, i));
  pending = conns.map(() => []);
  const lat: number[] = [];
  let frames = 0;
  let unmatched = 0;
  onStatusFrame = (nodeId, runtime) => {
    frames++;
    const i = byNode.get(nodeId);
    if (i === undefined) return;
    const q = pending[i]!;
    const wg = runtime === "running";
    const k = q.findIndex((e) => e.wg === wg);
    if (k < 0) return;
    lat.push(performance.now() - q[k]!.t);
    unmatched += k; // older sends of this node that never produced a frame of their own
    q.splice(0, k + 1);
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let n = 0;
  let cursor = 0;
  const end = t0 + durationMs;
  while (performance.now() < end) {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate);
    let guard = 0;
    while (n < due && guard++ < conns.length) {
      const idx = cursor;
      cursor = (cursor + 1) % conns.length;
      const c = conns[idx]!;
      const q = pending[idx]!;
      const wg = c.wg;
      const t = performance.now();
      if (!publish(c, wg, 1, true)) continue;
      q.push({ t, wg });
      c.wg = !wg;
      n++;
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  const elapsed = performance.now() - t0;
  const drainEnd = performance.now() + drainMs;
  while (performance.now() < drainEnd && lat.length + unmatched < n) await new Promise((r) => setTimeout(r, 10));
  onStatusFrame = null;
  const cpu = process.cpuUsage(cpu0);
  for (const q of pending) unmatched += q.length;
  lat.sort((a, b) => a - b);
  const summary: LatencySummary = {
    rate,
    durationMs: elapsed,
    sent: n,
    frames,
    matched: lat.length,
    unmatched,
    p50: percentile(lat, 50),
    p90: percentile(lat, 90),
    p99: percentile(lat, 99),
    max: lat[lat.length - 1] ?? Number.NaN,
    achievedRate: (n / elapsed) * 1000,
    agentCpuPct: ((cpu.user + cpu.system) / 1000 / elapsed) * 100,
  };
  send({ op: "rate-done", summary });
}

// ---- control ----------------------------------------------------------------------------------

async function closeAll(): Promise<void> {
  for (const c of conns) {
    if (c.alive) {
      c.alive = false;
      c.socket.end(DISCONNECT);
    }
  }
  for (const s of sse) s.destroy();
  await new Promise((r) => setTimeout(r, 200));
  for (const c of conns) c.socket.destroy();
  send({ op: "closed" });
  process.disconnect?.();
}

process.on("message", (raw) => {
  const msg = raw as ToAgents;
  switch (msg.op) {
    case "connect":
      void connectAll(msg.port, msg.agents, msg.concurrency);
      break;
    case "credit":
      handled = msg.handled;
      pump();
      break;
    case "flood":
      flood = { window: msg.window, qos: msg.qos, toggle: msg.toggle, cursor: 0, cpu0: process.cpuUsage(), t0: performance.now() };
      pump();
      break;
    case "halt": {
      const f = flood;
      flood = null;
      const cpu = f === null ? { user: 0, system: 0 } : process.cpuUsage(f.cpu0);
      const elapsed = f === null ? 1 : performance.now() - f.t0;
      send({ op: "halted", sent, acks, statusFrames, cpuPct: ((cpu.user + cpu.system) / 1000 / elapsed) * 100 });
      break;
    }
    case "sse":
      void openAll(msg.url, msg.token, msg.n, msg.raw);
      break;
    case "warm":
      void warm(msg.rate, msg.timeoutMs);
      break;
    case "rate":
      void rateRun(msg.rate, msg.durationMs, msg.drainMs);
      break;
    case "close":
      void closeAll();
      break;
  }
});

// Never outlive the bench: the parent going away ends this process.
process.on("disconnect", () => {
  for (const c of conns) c.socket.destroy();
  for (const s of sse) s.destroy();
  setTimeout(() => process.exit(0), 100).unref();
});
