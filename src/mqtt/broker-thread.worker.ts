/**
 * The embedded broker's worker thread (started by {@link ThreadedBroker.start} in
 * `broker-thread.ts`): the same {@link EmbeddedBroker} as in-process, with its account lookup on
 * a read-only connection of its own to the service's SQLite file. Upstream messages go to the
 * main thread once per turn, packed into one transferred buffer; log records go as JSON lines.
 * The main thread's messages (publishes, kicks, links) run in order, in slices of a turn
 * ({@link TurnSlicer}), so that a burst of publishes never holds the sockets' reads for long.
 */
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { TurnSlicer } from "../lib/turn-slicer.js";
import { createLogger } from "../logger.js";
import { openNodeAccountReader } from "../store/node-client-state.repository.js";
import type { BrokerThreadInit, FromBrokerThread, ToBrokerThread } from "./broker-thread.js";
import { brokerUsers } from "./broker-users.js";
import { EmbeddedBroker, type BackendLink } from "./embedded-broker.js";

function parent(): MessagePort {
  if (parentPort === null) throw new Error("broker-thread.worker.ts runs only as a worker thread");
  return parentPort;
}
const port = parent();
const init = workerData as BrokerThreadInit;
const post = (message: FromBrokerThread, transfer?: ArrayBuffer[]): void => port.postMessage(message, transfer);

const log = createLogger(init.logLevel, { write: (line: string) => post({ t: "log", line }) }).child({ name: "broker" });
const reader = openNodeAccountReader(init.dbFile);
const users = brokerUsers(reader.accounts, init.backendUsername, init.backendPasswordHash);

/** Upstream messages of this turn for one backend link, sent together on the next turn. */
interface Batch {
  topics: string[];
  payloads: Buffer[];
  bytes: number;
}

const batches = new Map<number, Batch>();

function forwarder(link: number): (topic: string, payload: Buffer) => void {
  return (topic, payload) => {
    let batch = batches.get(link);
    if (batch === undefined) {
      if (batches.size === 0) setImmediate(flushUpstream);
      batch = { topics: [], payloads: [], bytes: 0 };
      batches.set(link, batch);
    }
    batch.topics.push(topic);
    batch.payloads.push(payload);
    batch.bytes += payload.length;
  };
}

function flushUpstream(): void {
  for (const [link, { topics, payloads, bytes }] of batches) {
    // One buffer of its own (never a pooled slice), transferred rather than copied.
    const packed = new Uint8Array(bytes);
    const lengths = new Array<number>(payloads.length);
    let at = 0;
    for (const [i, p] of payloads.entries()) {
      packed.set(p, at);
      at += p.length;
      lengths[i] = p.length;
    }
    post({ t: "upstream", link, topics, lengths, packed: packed.buffer }, [packed.buffer]);
  }
  batches.clear();
}

/** One message from the main thread, in the order sent. */
function handle(m: ToBrokerThread, broker: EmbeddedBroker, links: Map<number, BackendLink>): void {
  switch (m.t) {
    case "attach":
      void broker.attachBackend(m.filters, forwarder(m.link)).then((l) => {
        links.set(m.link, l);
        post({ t: "attached", link: m.link });
      });
      return;
    case "detach":
      void links.get(m.link)?.close();
      links.delete(m.link);
      return;
    case "publish": {
      const link = links.get(m.link);
      if (link === undefined) {
        post({ t: "published", id: m.id, error: "the backend link is closed" });
        return;
      }
      link.publish(m.topic, m.envelope).then(
        () => post({ t: "published", id: m.id }),
        (err: unknown) => post({ t: "published", id: m.id, error: err instanceof Error ? err.message : String(err) }),
      );
      return;
    }
    case "kick":
      broker.kick(m.clientId);
      return;
    case "close":
      void (async () => {
        for (const link of links.values()) await link.close();
        await broker.close();
        flushUpstream();
        reader.close();
        post({ t: "closed" });
        port.close();
      })();
      return;
  }
}

async function main(): Promise<void> {
  let broker: EmbeddedBroker;
  try {
    // The backend's links are subscribed before the listeners open (EmbeddedBrokerOptions.backends).
    broker = await EmbeddedBroker.start({ ...init.broker, users, log, backends: init.links.map((l) => ({ filters: l.filters, onMessage: forwarder(l.link) })) });
  } catch (err) {
    post({ t: "failed", message: err instanceof Error ? err.message : String(err) });
    reader.close();
    return;
  }
  broker.watchClients((clientId, up) => post({ t: "client", clientId, up }));
  const links = new Map<number, BackendLink>();
  for (const [k, l] of init.links.entries()) {
    const link = broker.backendLinks[k];
    if (link !== undefined) links.set(l.link, link);
  }
  // The backend's messages run in slices of a turn, in order: a burst of config pushes (a
  // protocol switch: ~100 KB each) would otherwise hold this thread's socket reads, and with them
  // every agent's heartbeat and ACK, for as long as the whole burst takes.
  const slicer = new TurnSlicer({ onError: (err) => log.error({ err }, "a message from the backend failed in the broker thread") });
  port.on("message", (m: ToBrokerThread) => {
    slicer.push({
      step: () => {
        handle(m, broker, links);
        return true;
      },
    });
  });
  post({ t: "ready", port: broker.port, tlsPort: broker.tlsPort });
}

void main();
