/**
 * The load side of `scripts/bench/switch.ts` (a benchmark, not a test), forked as a child process
 * so that it does not share the service's event loop: N stand-in agents and one SSE subscriber.
 *
 * A stand-in speaks raw MQTT 3.1.1 over one TCP connection (the precedent of `ingest-agents.ts`
 * and `fleet-agents.ts`: MQTT.js costs far more CPU per connection than the service's side of the
 * wire). It connects with the credentials its bind answered (client id, username, password, the
 * spec §6.3 will), subscribes to its four downstream topics (QoS 1), and publishes event
 * `mqtt_connected` and a heartbeat, as `src/agent/agent.ts` does on connect. On a config push
 * (spec §6.3, §3.8) it PUBACKs, ACKs `accepted`, then `applied` with `config_version` and the
 * SHA-256 **of the `config_text` it received** (computed, not echoed; a digest that differs from
 * the push's `config_sha256` is counted as a mismatch) — what the real agent reports after it
 * wrote that text. Detects are answered `applied` with the heartbeat's wg state (spec §6.3).
 *
 * Heartbeats at a fixed total rate, round robin over the agents, each flipping the agent's
 * `wg_online` so that every heartbeat changes the node's runtime state and yields one
 * `endpoint.status.updated` frame; heartbeat→SSE latency is the time from writing the PUBLISH to
 * reading the frame of that node with that runtime state (both in this process).
 */
import { createHash } from "node:crypto";
import { get } from "node:http";
import { connect as netConnect, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { framer, packet, str, u16 } from "./raw-mqtt.js";
import { recordStalls, type Stall } from "./stalls.js";

/** One bound node's connection data (from its bind answer). */
export interface SwitchAgentSpec {
  configId: string;
  nodeId: string;
  clientId: string;
  username: string;
  password: string;
}

/** Parent → child. */
export type ToSwitchAgents =
  | { op: "connect"; port: number; agents: SwitchAgentSpec[] }
  | { op: "sse"; url: string; token: string }
  | { op: "rate"; rate: number }
  | { op: "stop" };

/** One latency sample: when the heartbeat was written (epoch ms) and how long until its frame (ms). */
export type LatencySample = [sentAtMs: number, latencyMs: number];

export interface SwitchAgentTotals {
  heartbeats: number;
  samples: LatencySample[];
  /** Heartbeats whose frame never came (a later frame of the node with another state came first, or none). */
  unmatched: number;
  pushes: number;
  /** Config pushes whose received text does not hash to the push's config_sha256. */
  shaMismatches: number;
  /** Pushes received per node (a node pushed twice shows as > 1). */
  pushesPerNode: Record<string, number>;
  detects: number;
  statusFrames: number;
  cpuMs: number;
  /** This process's event-loop stalls from the start of the heartbeats (`stalls.ts`). */
  stalls: Stall[];
}

/** Child → parent. */
export type FromSwitchAgents =
  | { op: "connected"; ok: number; failed: number; ms: number; errors: string[] }
  | { op: "sse-ready" }
  | { op: "progress"; pushes: number; acked: number }
  | { op: "stopped"; totals: SwitchAgentTotals };

function send(msg: FromSwitchAgents): void {
  process.send?.(msg);
}

// ---- MQTT packets (wire pieces in ./raw-mqtt.ts) -------------------------------------------

const topic = (a: SwitchAgentSpec, suffix: string) => `svc/${a.configId}/${a.nodeId}/${suffix}`;

function envelope(a: SwitchAgentSpec, type: string, payload: unknown, requestId = ""): string {
  return JSON.stringify({ type, request_id: requestId, config_id: a.configId, node_id: a.nodeId, boot_id: "bench-boot", session_id: "bench-session", sent_at: new Date().toISOString(), payload });
}

function connectPacket(a: SwitchAgentSpec): Buffer {
  const will = JSON.stringify({
    type: "event", request_id: "", config_id: a.configId, node_id: a.nodeId, boot_id: "", session_id: "",
    sent_at: new Date().toISOString(), payload: { level: "info", event: "offline", message: "agent connection lost" },
  });
  const flags = 0x80 | 0x40 | 0x08 | 0x04 | 0x02; // username, password, will QoS 1, will, clean session
  const variable = Buffer.concat([str("MQTT"), Buffer.from([4, flags, 0, 0])]); // keepalive 0
  return packet(0x10, Buffer.concat([variable, str(a.clientId), str(topic(a, "event")), str(will), str(a.username), str(a.password)]));
}

// ---- agents ---------------------------------------------------------------------------------

interface Conn {
  spec: SwitchAgentSpec;
  socket: Socket;
  pid: number;
  wg: boolean;
  alive: boolean;
  /** Heartbeats written and not yet seen on the SSE stream, oldest first. */
  pending: Array<{ t: number; wg: boolean }>;
}

const conns: Conn[] = [];
const byNode = new Map<string, Conn>();
const totals: SwitchAgentTotals = { heartbeats: 0, samples: [], unmatched: 0, pushes: 0, shaMismatches: 0, pushesPerNode: {}, detects: 0, statusFrames: 0, cpuMs: 0, stalls: [] };
let stallRecorder: { stop(): Stall[] } | null = null;
let acked = 0;
const cpu0 = process.cpuUsage();

function publish(conn: Conn, t: string, payload: string): void {
  conn.pid = (conn.pid % 65535) + 1;
  conn.socket.write(packet(0x32, Buffer.concat([str(t), u16(conn.pid), Buffer.from(payload, "utf8")])));
}

/** Splits MQTT packets out of a byte stream. */
/** A downstream PUBLISH: PUBACK it (QoS 1), then act as the agent would. */
function onPublish(conn: Conn, first: number, body: Buffer): void {
  const qos = (first >> 1) & 3;
  const tlen = body.readUInt16BE(0);
  const t = body.subarray(2, 2 + tlen).toString("utf8");
  let off = 2 + tlen;
  if (qos > 0) {
    conn.socket.write(Buffer.from([0x40, 0x02, body[off] as number, body[off + 1] as number]));
    off += 2;
  }
  const env = JSON.parse(body.subarray(off).toString("utf8")) as { request_id: string; payload: Record<string, unknown> };
  const a = conn.spec;
  if (t.endsWith("/config/push")) {
    totals.pushes++;
    totals.pushesPerNode[a.nodeId] = (totals.pushesPerNode[a.nodeId] ?? 0) + 1;
    const p = env.payload as { config_text: string; config_sha256: string; config_version: number };
    const sha = createHash("sha256").update(p.config_text, "utf8").digest("hex");
    if (sha !== p.config_sha256) totals.shaMismatches++;
    publish(conn, topic(a, "config/push/ack"), envelope(a, "ack", { status: "accepted", message: "", action: "push_config" }, env.request_id));
    publish(conn, topic(a, "config/push/ack"), envelope(a, "ack", { status: "applied", message: "", action: "push_config", config_version: p.config_version, config_sha256: sha }, env.request_id));
    acked++;
  } else if (t.endsWith("/detect")) {
    totals.detects++;
    publish(conn, topic(a, "detect/ack"), envelope(a, "ack", { status: "applied", message: "", action: "detect", client_online: true, wg_online: !conn.wg, platform: "linux", client_version: "1.0.0" }, env.request_id));
  }
}

function connectOne(port: number, spec: SwitchAgentSpec): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    socket.setNoDelay(true);
    const conn: Conn = { spec, socket, pid: 0, wg: false, alive: false, pending: [] };
    const timer = setTimeout(() => reject(new Error("CONNACK timeout")), 30_000);
    socket.on("connect", () => socket.write(connectPacket(spec)));
    socket.on("error", (err) => reject(err));
    socket.on("close", () => (conn.alive = false));
    socket.on(
      "data",
      framer((first, body) => {
        const type = first >> 4;
        if (type === 2) {
          clearTimeout(timer);
          if (body[1] !== 0) return reject(new Error(`CONNACK ${body[1]}`));
          conn.alive = true;
          const subs = ["config/push", "control", "detect", "info"].map((k) => Buffer.concat([str(topic(spec, k)), Buffer.from([1])]));
          socket.write(packet(0x82, Buffer.concat([u16(1), ...subs])));
          publish(conn, topic(spec, "event"), envelope(spec, "event", { level: "info", event: "mqtt_connected", message: "switch bench" }));
          publish(conn, topic(spec, "heartbeat"), envelope(spec, "heartbeat", { client_online: true, wg_online: true }));
          conn.wg = false; // the next heartbeat reports the other state
          resolve(conn);
        } else if (type === 3) onPublish(conn, first, body);
      }),
    );
  });
}

async function connectAll(port: number, specs: SwitchAgentSpec[]): Promise<void> {
  const t0 = performance.now();
  let next = 0;
  let failed = 0;
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < specs.length) {
        const spec = specs[next++] as SwitchAgentSpec;
        try {
          const c = await connectOne(port, spec);
          conns.push(c);
          byNode.set(spec.nodeId, c);
        } catch (err) {
          failed++;
          if (errors.length < 3) errors.push(err instanceof Error ? err.message : String(err));
        }
      }
    }),
  );
  send({ op: "connected", ok: conns.length, failed, ms: performance.now() - t0, errors });
}

// ---- SSE subscriber ---------------------------------------------------------------------------

function onFrame(block: string): void {
  let event = "";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data = line.slice(6);
  }
  if (event !== "endpoint.status.updated") return;
  const at = performance.now();
  totals.statusFrames++;
  const p = (JSON.parse(data) as { payload: { node_id?: string; status?: { runtime_state?: string } } }).payload;
  const conn = p.node_id === undefined ? undefined : byNode.get(p.node_id);
  if (conn === undefined || p.status?.runtime_state === undefined) return;
  const wg = p.status.runtime_state === "running";
  const k = conn.pending.findIndex((e) => e.wg === wg);
  if (k < 0) return; // a frame of an ACK or event, not of a pending heartbeat
  const e = conn.pending[k] as { t: number; wg: boolean };
  totals.samples.push([performance.timeOrigin + e.t, at - e.t]);
  totals.unmatched += k;
  conn.pending.splice(0, k + 1);
}

function openSse(url: string, token: string): void {
  get(url, { agent: false, headers: { accept: "text/event-stream", authorization: `Bearer ${token}` } }, (res) => {
    res.setEncoding("utf8");
    let buffer = "";
    let ready = false;
    res.on("data", (chunk: string) => {
      buffer += chunk;
      let idx: number;
      while ((idx = buffer.indexOf("\n\n")) >= 0) {
        onFrame(buffer.slice(0, idx));
        buffer = buffer.slice(idx + 2);
      }
      if (!ready) {
        ready = true;
        send({ op: "sse-ready" });
      }
    });
    res.on("error", () => undefined);
  }).on("error", (err) => {
    console.error(`SSE: ${err.message}`);
  });
}

// ---- heartbeats at a fixed rate ------------------------------------------------------------------

let rateTimer: NodeJS.Timeout | null = null;

function startRate(rate: number): void {
  const t0 = performance.now();
  let n = 0;
  let cursor = 0;
  rateTimer = setInterval(() => {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate);
    let guard = 0;
    while (n < due && guard++ < conns.length) {
      const c = conns[cursor] as Conn;
      cursor = (cursor + 1) % conns.length;
      if (!c.alive || c.socket.writableNeedDrain) continue;
      const wg = c.wg;
      c.pending.push({ t: performance.now(), wg });
      publish(c, topic(c.spec, "heartbeat"), envelope(c.spec, "heartbeat", { client_online: true, wg_online: wg }));
      c.wg = !wg;
      n++;
      totals.heartbeats++;
    }
  }, 2);
}

setInterval(() => send({ op: "progress", pushes: totals.pushes, acked }), 250).unref();

process.on("message", (raw) => {
  const msg = raw as ToSwitchAgents;
  if (msg.op === "connect") void connectAll(msg.port, msg.agents);
  else if (msg.op === "sse") openSse(msg.url, msg.token);
  else if (msg.op === "rate") {
    stallRecorder = recordStalls();
    startRate(msg.rate);
  }
  else if (msg.op === "stop") {
    if (rateTimer !== null) clearInterval(rateTimer);
    // Let the last frames arrive, then count what never came.
    setTimeout(() => {
      for (const c of conns) totals.unmatched += c.pending.length;
      const cpu = process.cpuUsage(cpu0);
      totals.cpuMs = (cpu.user + cpu.system) / 1000;
      totals.stalls = stallRecorder?.stop() ?? [];
      for (const c of conns) c.socket.destroy();
      // Exit only once the (large) message is written: a busy parent reads the pipe late.
      process.send?.({ op: "stopped", totals } satisfies FromSwitchAgents, () => process.exit(0));
    }, 1000);
  }
});
process.on("disconnect", () => process.exit(0));
