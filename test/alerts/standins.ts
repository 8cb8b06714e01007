import { connect as netConnect, type Socket } from "node:net";
import { framer, packet, str } from "../../scripts/bench/raw-mqtt.js";
import type { AgentSpec } from "../../scripts/bench/ingest-lib.js";

/**
 * Raw MQTT 3.1.1 stand-in agents for the storm tests: one socket each with the agent's will
 * (spec §6.3: an `offline` event), a heartbeat, and nothing else. An MQTT.js client per agent
 * would cost a thousand times the memory and most of the test's time.
 */

function connectPacket(a: AgentSpec): Buffer {
  const will = JSON.stringify({
    type: "event", request_id: "", config_id: a.configId, node_id: a.nodeId, boot_id: "", session_id: "",
    sent_at: new Date().toISOString(), payload: { level: "info", event: "offline", message: "agent connection lost" },
  });
  // username | password | will QoS 1 | will flag | clean session; keepalive 0
  const variable = Buffer.concat([str("MQTT"), Buffer.from([4, 0x80 | 0x40 | 0x08 | 0x04 | 0x02, 0, 0])]);
  return packet(0x10, Buffer.concat([variable, str(a.clientId), str(a.eventTopic), str(will), str(a.username), str(a.password)]));
}

function heartbeatPacket(a: AgentSpec): Buffer {
  const body = JSON.stringify({
    type: "heartbeat", request_id: "", config_id: a.configId, node_id: a.nodeId, boot_id: "standin-boot", session_id: "standin-session",
    sent_at: new Date().toISOString(), payload: { client_online: true, wg_online: true },
  });
  return packet(0x30, Buffer.concat([str(a.heartbeatTopic), Buffer.from(body)]));
}

/** Connects one stand-in (CONNACK accepted), then publishes one heartbeat (QoS 0). */
export function connectStandIn(port: number, a: AgentSpec): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    socket.on("error", reject);
    socket.on(
      "data",
      framer((first, body) => {
        if (first >> 4 !== 2) return;
        if (body[1] !== 0) return reject(new Error(`CONNACK rc=${body[1]}`));
        socket.write(heartbeatPacket(a));
        resolve(socket);
      }),
    );
    socket.write(connectPacket(a));
  });
}

/** Connects every stand-in, `concurrency` at a time. */
export async function connectStandIns(port: number, agents: readonly AgentSpec[], concurrency = 50): Promise<Socket[]> {
  const sockets: Socket[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < agents.length) {
        const a = agents[next++] as AgentSpec;
        sockets.push(await connectStandIn(port, a));
      }
    }),
  );
  return sockets;
}
