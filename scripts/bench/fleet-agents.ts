/**
 * The load side of `scripts/bench/fleet.ts`, run as several child processes (forked with IPC):
 * each holds a slice of the fleet's simulated agents, one real TCP connection to the broker each.
 *
 * A stand-in speaks raw MQTT 3.1.1 (MQTT.js costs ~10× the memory and CPU per connection, and
 * 100k of them must fit on 2 shared cores) but behaves like `src/agent/agent-link.ts`: CONNECT
 * with its bound client id, username, password and the spec §6.3 will (QoS 1); on CONNACK it
 * subscribes to its four downstream topics and publishes event `mqtt_connected` and a heartbeat
 * (QoS 1), as `src/agent/agent.ts` does on every connect; on a lost connection it reconnects with
 * the agent's backoff (doubling from 1 s, first wait 2 s, cap 30 s, reset on CONNACK; no jitter,
 * as the agent has none); an attempt without CONNACK in 15 s is abandoned (the agent's
 * `connectTimeout`). Keepalive 0: the broker's death closes loopback sockets at once, and the
 * PINGREQs of 100k connections are load the run does not measure (said in the report).
 *
 * Connections are spread over loopback source addresses (`localAddress` 127.0.0.x) so that no
 * address needs more than ~20k ephemeral ports (Linux offers 28k per source address).
 */
import { connect as netConnect, type Socket } from "node:net";
import { benchConfigId, benchNodeId, benchPassword } from "./ingest-lib.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { nodeTopic } from "../../src/protocol/topics.js";
import { framer, packet, str, u16 } from "./raw-mqtt.js";

/** Parent → worker. */
export type ToFleetAgents =
  | { type: "start"; from: number; to: number; perConfig: number; port: number; addresses: string[]; concurrency: number }
  | { type: "sessions" }
  | { type: "freeze" }
  /** These agents die (their host went away): they never connect again; an open socket stays until it closes. */
  | { type: "kill"; nodes: number[] }
  | { type: "stop" };

/** Worker → parent, every second and on demand. */
export interface FleetAgentStats {
  type: "stats";
  /** Agents with a CONNACK 0 and an open socket now. */
  connected: number;
  /** TCP or MQTT handshakes in flight. */
  connecting: number;
  /** Agents waiting for their backoff timer. */
  waiting: number;
  /** Cumulative: CONNACK 0 received. */
  connacks: number;
  /** Cumulative: CONNACK with a non-zero return code. */
  refused: number;
  /** Cumulative: socket errors (ECONNREFUSED, EADDRNOTAVAIL, EMFILE, ...), by code. */
  errors: Record<string, number>;
  /** Cumulative: attempts abandoned after 15 s without CONNACK. */
  timeouts: number;
  /** Cumulative: PUBACKs received. */
  pubacks: number;
  rssBytes: number;
}

const CONNECT_TIMEOUT_MS = 15_000;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

// ---- MQTT packets (wire pieces in ./raw-mqtt.ts) -------------------------------------------

interface Ids {
  configId: string;
  nodeId: string;
}

function ids(i: number, perConfig: number): Ids {
  return { configId: benchConfigId(Math.floor(i / perConfig)), nodeId: benchNodeId(i) };
}

function envelope(a: Ids, type: string, payload: unknown, bootId: string, sessionId: string): string {
  return JSON.stringify({ type, request_id: "", config_id: a.configId, node_id: a.nodeId, boot_id: bootId, session_id: sessionId, sent_at: new Date().toISOString(), payload });
}

function connectPacket(a: Ids): Buffer {
  const will = envelope(a, "event", { level: "info", event: "offline", message: "agent connection lost" }, "", "");
  const flags = 0x80 | 0x40 | 0x08 | 0x04 | 0x02; // username, password, will QoS 1, will, clean session
  const variable = Buffer.concat([str("MQTT"), Buffer.from([4, flags, 0, 0])]);
  const username = nodeUsername(a.configId, a.nodeId);
  const body = Buffer.concat([variable, str(nodeClientId(a.configId, a.nodeId)), str(nodeTopic(a.configId, a.nodeId, "event")), str(will), str(username), str(benchPassword(a.nodeId))]);
  return packet(0x10, body);
}

/** SUBSCRIBE (the four downstream topics, QoS 1), event `mqtt_connected` and a heartbeat (QoS 1). */
function onlinePackets(a: Ids, bootId: string, sessionId: string): Buffer {
  const topics = (["config_push", "control", "detect", "info"] as const).map((k) => Buffer.concat([str(nodeTopic(a.configId, a.nodeId, k)), Buffer.from([1])]));
  const sub = packet(0x82, Buffer.concat([u16(1), ...topics]));
  const pub = (pid: number, topic: string, payload: string) => packet(0x32, Buffer.concat([str(topic), u16(pid), Buffer.from(payload, "utf8")]));
  const event = envelope(a, "event", { level: "info", event: "mqtt_connected", message: "agent bench connected" }, bootId, sessionId);
  const heartbeat = envelope(a, "heartbeat", { client_online: true, wg_online: true }, bootId, sessionId);
  return Buffer.concat([sub, pub(2, nodeTopic(a.configId, a.nodeId, "event"), event), pub(3, nodeTopic(a.configId, a.nodeId, "heartbeat"), heartbeat)]);
}

// ---- agents ----------------------------------------------------------------------------------

interface Agent {
  i: number;
  socket: Socket | null;
  connected: boolean;
  backoffMs: number;
  sessions: number;
  /** Killed: never connects again. */
  dead?: true;
}

const stats: FleetAgentStats = { type: "stats", connected: 0, connecting: 0, waiting: 0, connacks: 0, refused: 0, errors: {}, timeouts: 0, pubacks: 0, rssBytes: 0 };
let stopping = false;
/** No new attempts (waiting agents stay down): the parent counts sessions against stored events. */
let frozen = false;
let cfg: Extract<ToFleetAgents, { type: "start" }>;

/** Calls back with each complete packet's first byte and body (a stream may split or join packets). */
function attempt(agent: Agent): void {
  if (stopping || frozen || agent.dead === true) return;
  const a = ids(agent.i, cfg.perConfig);
  const socket = netConnect({ host: "127.0.0.1", port: cfg.port, localAddress: cfg.addresses[agent.i % cfg.addresses.length] });
  agent.socket = socket;
  stats.connecting += 1;
  let handshaking = true;
  const endHandshake = () => {
    if (!handshaking) return;
    handshaking = false;
    stats.connecting -= 1;
    clearTimeout(timer);
  };
  const timer = setTimeout(() => {
    stats.timeouts += 1;
    socket.destroy();
  }, CONNECT_TIMEOUT_MS);
  socket.on("connect", () => socket.write(connectPacket(a)));
  socket.on(
    "data",
    framer((first, body) => {
      const type = first >> 4;
      if (type === 2) {
        endHandshake();
        if (body[1] !== 0) {
          stats.refused += 1;
          socket.destroy();
          return;
        }
        agent.connected = true;
        agent.backoffMs = BACKOFF_MIN_MS;
        agent.sessions += 1;
        stats.connected += 1;
        stats.connacks += 1;
        socket.write(onlinePackets(a, `boot-${agent.i}`, `session-${agent.i}-${agent.sessions}`));
      } else if (type === 4) stats.pubacks += 1;
    }),
  );
  socket.on("error", (err: Error & { code?: string }) => {
    const code = err.code ?? "other";
    stats.errors[code] = (stats.errors[code] ?? 0) + 1;
  });
  socket.on("close", () => {
    endHandshake();
    agent.socket = null;
    if (agent.connected) stats.connected -= 1;
    agent.connected = false;
    if (stopping) return;
    // AgentLink: every close doubles the period before the next attempt (cap 30 s).
    agent.backoffMs = Math.min(agent.backoffMs * 2, BACKOFF_MAX_MS);
    stats.waiting += 1;
    setTimeout(() => {
      stats.waiting -= 1;
      attempt(agent);
    }, agent.backoffMs);
  });
}

/** The first connection of every agent, at most `concurrency` handshakes in flight. */
function ramp(agents: Agent[]): void {
  let next = 0;
  const pump = () => {
    while (next < agents.length && stats.connecting < cfg.concurrency) attempt(agents[next++] as Agent);
    if (next < agents.length) setTimeout(pump, 5);
  };
  pump();
}

function report(): void {
  stats.rssBytes = process.memoryUsage().rss;
  process.send?.(stats);
}

process.on("message", (msg: ToFleetAgents) => {
  if (msg.type === "start") {
    cfg = msg;
    const agents: Agent[] = [];
    for (let i = msg.from; i < msg.to; i++) agents.push({ i, socket: null, connected: false, backoffMs: BACKOFF_MIN_MS, sessions: 0 });
    setInterval(report, 1000).unref();
    ramp(agents);
    (globalThis as { agents?: Agent[] }).agents = agents;
  } else if (msg.type === "kill") {
    const agents = (globalThis as { agents?: Agent[] }).agents ?? [];
    for (const i of msg.nodes) {
      const agent = agents[i - cfg.from];
      if (agent !== undefined) agent.dead = true;
    }
  } else if (msg.type === "freeze") {
    frozen = true;
    report();
  } else if (msg.type === "sessions") {
    // Sessions (CONNACK 0) each agent opened, for the duplicate/loss check of the parent.
    const agents = (globalThis as { agents?: Agent[] }).agents ?? [];
    process.send?.({ type: "sessions", from: cfg.from, counts: agents.map((a) => a.sessions) });
  } else if (msg.type === "stop") {
    stopping = true;
    const agents = (globalThis as { agents?: Agent[] }).agents ?? [];
    for (const a of agents) a.socket?.destroy();
    report();
    setTimeout(() => process.exit(0), 200);
  }
});
process.on("disconnect", () => process.exit(0));
