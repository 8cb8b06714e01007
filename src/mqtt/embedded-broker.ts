import type { Server as NetServer, Socket } from "node:net";
import { Aedes, type Client } from "aedes";
import type { Logger } from "../logger.js";
import { MAX_ENVELOPE_BYTES, type Envelope } from "../protocol/envelope.schema.js";
import type { BrokerIdentity } from "./authz.policy.js";
import type { BrokerUserLookup } from "./broker-users.js";
import { createHooks, logTopic, type HookState } from "./embedded-hooks.js";
import { createListeners, listenAll, type TlsListenerOptions } from "./embedded-listeners.js";
import { aedesClients, onAedesError } from "./lib-internals.js";

export type { BrokerUser, BrokerUserLookup } from "./broker-users.js";
export { guardPacketSize, PacketFramer } from "./packet-guard.js";

/**
 * The embedded MQTT broker (aedes 1.2, MQTT 3.1.1 only): per-node credentials and client ids
 * (DESIGN §3 "Broker identity"), every publish, will and subscription judged by
 * `authorize` of authz.policy.ts (spec §5 rules 1-3, §6.4 rule 5), packets capped at the socket, and slow
 * subscribers cut off by aedes's `drainTimeout`. Every session is clean: a CONNECT asking for a
 * persistent one gets a clean one (CONNACK session present 0), so no subscription or queued
 * message outlives a connection, a reset or a rebind.
 *
 * This module is the broker's lifecycle and its in-process backend link; the admission rules
 * are in embedded-hooks.ts, the sockets in embedded-listeners.ts, the size cap in packet-guard.ts.
 */

export interface EmbeddedBrokerOptions {
  host: string;
  /** 0 picks a free port; read it back from {@link EmbeddedBroker.port}. */
  port: number;
  users: BrokerUserLookup;
  log: Logger;
  /** Largest MQTT packet accepted (fixed header included); default MAX_ENVELOPE_BYTES + 4096. */
  maxPacketBytes?: number;
  /**
   * aedes `drainTimeout`: a client whose socket does not drain in this time is dropped (its will
   * is published), so a subscriber that never reads cannot stall delivery to everyone. Default
   * 30 s; 0 disables it (never do that in production).
   */
  drainTimeoutMs?: number;
  /** aedes `connectTimeout`: a connection must send CONNECT within this time. Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * A TLS listener beside the plain one (spec §1.9 "client TLS listener"), same host, same
   * broker, same packet-size guard. `port` 0 picks a free port; read it back from
   * {@link EmbeddedBroker.tlsPort}. `key`/`cert` are PEM (cert may be a chain); never logged.
   * The TLS handshake must finish within `connectTimeoutMs` too.
   */
  tls?: TlsListenerOptions;
  /**
   * Backend links subscribed before the listeners open (read back from
   * {@link EmbeddedBrokerHandle.backendLinks}, in this order): no agent can publish before the
   * backend listens, so nothing an agent sends right after connecting (its `mqtt_connected`
   * event) is published to no subscriber.
   */
  backends?: ReadonlyArray<{ filters: readonly string[]; onMessage: (topic: string, payload: Buffer) => void }>;
}

/** Logs the broker's errors and its clients' comings and goings. */
function logBrokerEvents(broker: Aedes, log: Logger, identities: WeakMap<Client, BrokerIdentity>): void {
  onAedesError(broker, (err) => log.error({ err }, "mqtt broker error"));
  broker.on("clientError", (client, err) => log.debug({ clientId: client.id, err: err.message }, "mqtt client error"));
  broker.on("connectionError", (_client, err) => log.debug({ err: err.message }, "mqtt connection error"));
  broker.on("clientReady", (client) => {
    log.info({ clientId: client.id, kind: identities.get(client)?.kind }, "mqtt client connected");
  });
  broker.on("clientDisconnect", (client) => log.info({ clientId: client.id }, "mqtt client disconnected"));
}

/**
 * What the service uses of an embedded broker, in-process ({@link EmbeddedBroker}) or in a worker
 * thread (`ThreadedBroker`, broker-thread.ts).
 */
export interface EmbeddedBrokerHandle {
  /** The port actually listened on. */
  readonly port: number;
  /** The TLS listener's port; null without a TLS listener. */
  readonly tlsPort: number | null;
  /** Disconnects the live client with this id, as a drop. @returns false when none is connected */
  kick(clientId: string): boolean;
  /** True while an authenticated client with this id is registered. */
  isConnected(clientId: string): boolean;
  /** The links of the start options' `backends`, in their order, subscribed before the listeners opened. */
  readonly backendLinks: readonly BackendLink[];
  /** The backend's link: `filters` subscribed, downstream publishes at QoS 1. */
  attachBackend(filters: readonly string[], onMessage: (topic: string, payload: Buffer) => void): Promise<BackendLink>;
  /** Stops listening and closes every client and the broker. Idempotent. */
  close(): Promise<void>;
}

/** The backend's in-process link to the embedded broker ({@link EmbeddedBroker.attachBackend}). */
export interface BackendLink {
  /** False once the link or the broker is closed. */
  readonly connected: boolean;
  /**
   * Publishes one envelope at QoS 1, never retained (spec §6.4 rule 5); resolves once aedes has
   * queued it to the subscribers. @throws Error when the broker is closed
   */
  publish(topic: string, envelope: Envelope): Promise<void>;
  close(): Promise<void>;
}

export class EmbeddedBroker implements EmbeddedBrokerHandle {
  /** The port actually listened on. */
  readonly port: number;
  /** The TLS listener's port; null without a TLS listener. */
  readonly tlsPort: number | null;
  readonly backendLinks: readonly BackendLink[];
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly broker: Aedes,
    private readonly servers: NetServer[],
    private readonly sockets: Set<Socket>,
    ports: { port: number; tlsPort: number | null },
    private readonly log: Logger,
    private readonly state: LinkState,
    backendLinks: BackendLink[],
  ) {
    this.port = ports.port;
    this.tlsPort = ports.tlsPort;
    this.backendLinks = backendLinks;
  }

  /**
   * Creates the broker and listens.
   * @throws when the address cannot be listened on (the broker is closed again first)
   */
  static async start(opts: EmbeddedBrokerOptions): Promise<EmbeddedBroker> {
    const log = opts.log;
    const state: HookState = {
      users: opts.users,
      log,
      maxPacketBytes: opts.maxPacketBytes ?? MAX_ENVELOPE_BYTES + 4096,
      identities: new WeakMap(),
      wills: new WeakMap(),
      backendLinks: { open: 0 },
      broker: null,
    };
    const broker = await Aedes.createBroker({
      ...createHooks(state),
      drainTimeout: opts.drainTimeoutMs ?? 30_000,
      connectTimeout: opts.connectTimeoutMs ?? 10_000,
    });
    state.broker = broker;
    logBrokerEvents(broker, log, state.identities);
    const links: LinkState = { broker, log, identities: state.identities, backendLinks: state.backendLinks, closing: false };
    const early: BackendLink[] = [];
    for (const b of opts.backends ?? []) early.push(await openBackendLink(links, b.filters, b.onMessage));
    const listeners = createListeners(opts, broker, state.maxPacketBytes);
    const ports = await listenAll(opts, broker, listeners);
    log.info({ host: opts.host, port: ports.port, tls_port: ports.tlsPort, maxPacketBytes: state.maxPacketBytes }, "embedded mqtt broker listening");
    return new EmbeddedBroker(broker, listeners.servers, listeners.sockets, ports, log, links, early);
  }

  private live(clientId: string): Client | undefined {
    return aedesClients(this.broker)[clientId];
  }

  /**
   * Disconnects the live client with this id, as a drop: its will is published (spec §6.3 LWT).
   * @returns false when no such client is connected
   */
  kick(clientId: string): boolean {
    const client = this.live(clientId);
    if (client === undefined || client.closed) return false;
    this.log.info({ clientId }, "mqtt client kicked");
    client.close();
    return true;
  }

  /**
   * True while an authenticated client with this id is registered (from just before its CONNACK
   * until its connection ends). aedes sets `client.connected` only after the CONNACK is written and
   * the offline queue drained, so that flag lags what the client already knows.
   */
  isConnected(clientId: string): boolean {
    const client = this.live(clientId);
    return client !== undefined && !client.closed;
  }

  /**
   * Calls `onChange(clientId, true)` when an authenticated client is registered (just before its
   * CONNACK) and `onChange(clientId, false)` when it is unregistered (its connection ended, or a
   * takeover by the same client id closed it first). For a mirror of {@link isConnected} in
   * another thread.
   */
  watchClients(onChange: (clientId: string, up: boolean) => void): void {
    this.broker.on("client", (client) => onChange(client.id, true));
    this.broker.on("clientDisconnect", (client) => onChange(client.id, false));
  }

  /** The number of connected clients. */
  connectedCount(): number {
    const clients = aedesClients(this.broker);
    return Object.values(clients).filter((c) => c !== undefined && !c.closed).length;
  }

  /**
   * The backend's in-process link to this broker: subscribes `filters` (the backend's upstream
   * filters, spec §6.4 rule 10) straight on aedes's emitter and publishes downstream messages
   * through aedes, with no MQTT client and no loopback socket in between (the loopback client
   * cost three packets per QoS 1 heartbeat). Deliveries to agents still go through
   * `authorizeForward`. `onMessage` gets every matching publish once; it must not throw.
   *
   * While the link is open, network CONNECTs whose username resolves to the backend identity are
   * refused with CONNACK 5 (not authorized), and a backend-identity client already connected over
   * the network is disconnected (the in-process backend needs no network login; docs/decisions.md
   * "Embedded broker, backend account").
   */
  attachBackend(filters: readonly string[], onMessage: (topic: string, payload: Buffer) => void): Promise<BackendLink> {
    return openBackendLink(this.state, filters, onMessage);
  }

  /** Stops listening, closes every client (their wills are published) and the broker. Idempotent. */
  close(): Promise<void> {
    this.state.closing = true;
    this.closing ??= (async () => {
      const serversClosed = Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      await new Promise<void>((resolve) => this.broker.close(() => resolve()));
      // Connections that never sent CONNECT are not aedes clients yet.
      for (const socket of this.sockets) socket.destroy();
      await serversClosed;
      this.log.info("embedded mqtt broker closed");
    })();
    return this.closing;
  }
}

/** What a backend link needs of its broker; `closing` turns true when the broker starts closing. */
interface LinkState {
  broker: Aedes;
  log: Logger;
  identities: WeakMap<Client, BrokerIdentity>;
  backendLinks: { open: number };
  closing: boolean;
}

/**
 * The backend's in-process link (see {@link EmbeddedBroker.attachBackend}): `filters` subscribed
 * on aedes's emitter before this resolves, a network client holding the backend identity cut.
 */
async function openBackendLink(state: LinkState, filters: readonly string[], onMessage: (topic: string, payload: Buffer) => void): Promise<BackendLink> {
  const { broker, log } = state;
  const deliver = (packet: { topic: string; payload: Buffer | string }, done: () => void): void => {
    try {
      onMessage(packet.topic, typeof packet.payload === "string" ? Buffer.from(packet.payload) : packet.payload);
    } catch (err) {
      log.error({ err, topic: logTopic(packet.topic) }, "upstream message handler failed");
    }
    done();
  };
  const subscribe = (filter: string) =>
    new Promise<void>((resolve, reject) => broker.subscribe(filter, deliver, (err?: unknown) => (err ? reject(err as Error) : resolve())));
  for (const filter of filters) await subscribe(filter);
  let open = true;
  state.backendLinks.open += 1;
  for (const client of Object.values(aedesClients(broker))) {
    if (client !== undefined && !client.closed && state.identities.get(client)?.kind === "backend") {
      log.warn({ clientId: client.id }, "network backend client disconnected: the backend is linked in-process");
      client.close();
    }
  }
  return {
    get connected() {
      return open && !state.closing;
    },
    publish: (topic, envelope) =>
      new Promise<void>((resolve, reject) => {
        if (!open || state.closing) {
          reject(new Error("the embedded broker is closed"));
          return;
        }
        broker.publish({ cmd: "publish", topic, payload: Buffer.from(JSON.stringify(envelope)), qos: 1, retain: false, dup: false }, (err?: Error) =>
          err ? reject(err) : resolve(),
        );
      }),
    close: async () => {
      if (!open) return;
      open = false;
      state.backendLinks.open -= 1;
      for (const filter of filters) {
        await new Promise<void>((resolve) => broker.unsubscribe(filter, deliver, () => resolve()));
      }
    },
  };
}
