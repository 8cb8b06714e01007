import { createServer, type AddressInfo, type Server as NetServer, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import {
  Aedes,
  type AedesOptions,
  type AuthenticateError,
  type Client,
  type ConnectPacket,
  type PublishPacket,
} from "aedes";
import type { Logger } from "../logger.js";
import { MAX_ENVELOPE_BYTES, type Envelope } from "../protocol/envelope.schema.js";
import { authorize, type BrokerIdentity } from "./authz.policy.js";
import { verifyBrokerPassword, type BrokerUser, type BrokerUserLookup } from "./broker-users.js";
import { aedesClients, onAedesError } from "./lib-internals.js";

export type { BrokerUser, BrokerUserLookup } from "./broker-users.js";

/**
 * The embedded MQTT broker (aedes 1.2, MQTT 3.1.1 only): per-node credentials and client ids
 * (DESIGN §3 "Broker identity"), every publish, will and subscription judged by
 * {@link authorize} (spec §5 rules 1-3, §6.4 rule 5), packets capped at the socket, and slow
 * subscribers cut off by aedes's `drainTimeout`. Every session is clean: a CONNECT asking for a
 * persistent one gets a clean one (CONNACK session present 0), so no subscription or queued
 * message outlives a connection, a reset or a rebind.
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
  tls?: { port: number; key: string; cert: string };
}

/** CONNACK return codes of MQTT 3.1.1 (§3.2.2.3) used here. */
const RC_IDENTIFIER_REJECTED = 2;
const RC_SERVER_UNAVAILABLE = 3;
const RC_BAD_USERNAME_OR_PASSWORD = 4;
const RC_NOT_AUTHORIZED = 5;

/** What aedes has at runtime but does not declare: the live clients by id, and their state. */
type Will = NonNullable<ConnectPacket["will"]>;

function refuse(returnCode: number, message: string): AuthenticateError {
  return Object.assign(new Error(message), { returnCode }) as AuthenticateError;
}

function sameIdentity(a: BrokerIdentity | undefined, b: BrokerIdentity): boolean {
  if (a === undefined || a.kind !== b.kind) return false;
  if (a.kind === "backend" || b.kind === "backend") return true;
  return a.configId === b.configId && a.nodeId === b.nodeId;
}

/** A topic shortened for a log line. */
function logTopic(topic: unknown): string {
  return typeof topic === "string" ? topic.slice(0, 300) : String(topic);
}

/** What the broker's hooks share: the users, the identity of each authenticated client, its will. */
interface HookState {
  users: BrokerUserLookup;
  log: Logger;
  /** Largest MQTT packet accepted, bytes (fixed header included). */
  maxPacketBytes: number;
  /** The identity each client authenticated as. */
  identities: WeakMap<Client, BrokerIdentity>;
  /** The will each client announced in its CONNECT (checked at authentication). */
  wills: WeakMap<Client, Will>;
  /**
   * Open in-process backend links ({@link EmbeddedBroker.attachBackend}); while any is open the
   * backend account has no business on the network.
   */
  backendLinks: { open: number };
  /** Set once the broker exists; the hooks only run after that. */
  broker: Aedes | null;
}

type Hooks = Pick<AedesOptions, "preConnect" | "authenticate" | "authorizePublish" | "authorizeSubscribe" | "authorizeForward">;

/** The aedes hooks: every CONNECT, publish, will, subscription and forward judged by {@link authorize}. */
function createHooks(s: HookState): Hooks {
  return {
    preConnect(client, packet, done) {
      if (packet.will) s.wills.set(client, packet.will);
      forceCleanSession(s.log, packet);
      done(null, true);
    },

    authenticate(client, rawUsername, password, done) {
      const username = rawUsername === undefined ? undefined : rawUsername.slice(0, 200);
      let user;
      try {
        user = rawUsername === undefined ? undefined : s.users.find(rawUsername);
      } catch (err) {
        s.log.error({ err, clientId: client.id }, "broker user lookup failed");
        done(refuse(RC_SERVER_UNAVAILABLE, "server unavailable"), null);
        return;
      }
      const verdict = judgeConnect(s, client, user, password);
      if ("returnCode" in verdict) {
        s.log.warn({ clientId: client.id, username, ...verdict.fields }, `mqtt connect refused: ${verdict.why}`);
        done(refuse(verdict.returnCode, verdict.message), null);
        return;
      }
      s.identities.set(client, verdict.identity);
      done(null, true);
    },

    // Called for every inbound PUBLISH and for the will when a client drops or is kicked.
    // An error closes the connection (MQTT 3.1.1 cannot refuse one publish).
    authorizePublish(client, packet, done) {
      done(publishRefusal(s, client, packet));
    },

    // A denied filter answers SUBACK 128 for that filter alone; the others of the same
    // SUBSCRIBE go on.
    authorizeSubscribe(client, sub, done) {
      const identity = s.identities.get(client) ?? null;
      if (authorize(identity, "subscribe", sub.topic, { qos: sub.qos }) === "deny") {
        s.log.warn({ clientId: client.id, topic: logTopic(sub.topic), qos: sub.qos }, "mqtt subscribe refused");
        done(null, null);
        return;
      }
      done(null, sub);
    },

    // Defence in depth: a node only ever receives its own downstream topics.
    authorizeForward(client, packet) {
      const identity = s.identities.get(client);
      if (identity === undefined) return null;
      if (identity.kind === "backend") return packet;
      return authorize(identity, "subscribe", packet.topic) === "allow" ? packet : null;
    },
  };
}

/**
 * Makes a CONNECT asking for a persistent session a clean one (docs/decisions.md "Issue 15: no
 * persistent sessions"): the database is the source of truth, agents connect clean, and a
 * persistent session would outlive a reset or rebind (CVE-2021-34434's class: its subscriptions
 * and queued messages reach whoever binds next). aedes reads `packet.clean` after preConnect.
 */
function forceCleanSession(log: Logger, packet: ConnectPacket): void {
  if (packet.clean !== false) return;
  log.info({ clientId: String(packet.clientId).slice(0, 200) }, "mqtt persistent session requested: connected as a clean session");
  packet.clean = true;
}

/** A refused CONNECT: its CONNACK code and message, and what the log line says. */
interface ConnectRefusal {
  returnCode: number;
  message: string;
  /** After "mqtt connect refused: ". */
  why: string;
  fields?: Record<string, unknown>;
}

/**
 * Whether a client may connect as `user` with `password` (DESIGN §3 "Broker identity";
 * spec §5 rules 1-3, §6.3 LWT): the identity it connects as, or why not.
 */
function judgeConnect(s: HookState, client: Client, user: BrokerUser | undefined, password: Buffer | undefined): { identity: BrokerIdentity } | ConnectRefusal {
  // The backend is linked in-process, so its broker account is refused over the
  // network before its password is even checked (no password oracle either; docs/decisions.md
  // "Embedded broker, backend account").
  if (user?.identity.kind === "backend" && s.backendLinks.open > 0) {
    return { returnCode: RC_NOT_AUTHORIZED, message: "not authorized", why: "the backend account is linked in-process only" };
  }
  if (!verifyBrokerPassword(user, password) || user === undefined) {
    return { returnCode: RC_BAD_USERNAME_OR_PASSWORD, message: "bad username or password", why: "bad username or password" };
  }
  const identity = user.identity;
  // DESIGN §3: a node connects only with its own client id.
  if (identity.kind === "node" && client.id !== identity.clientId) {
    return { returnCode: RC_IDENTIFIER_REJECTED, message: "identifier rejected", why: "client id does not belong to the user" };
  }
  // A live client with this id is taken over by aedes (MQTT-3.1.4-2); only its own
  // identity may do that.
  const live = s.broker === null ? undefined : aedesClients(s.broker)[client.id];
  if (live !== undefined && live !== client && !sameIdentity(s.identities.get(live), identity)) {
    return { returnCode: RC_IDENTIFIER_REJECTED, message: "identifier rejected", why: "client id in use by another user" };
  }
  // The will must be a publish this identity may make (spec §6.3 LWT on its event topic,
  // not retained per §6.4 rule 5); refused now rather than silently dropped later.
  const will = s.wills.get(client);
  if (will !== undefined && authorize(identity, "publish", will.topic, { retain: will.retain === true, qos: will.qos ?? 0 }) === "deny") {
    return { returnCode: RC_NOT_AUTHORIZED, message: "will not authorized", why: "will not authorized", fields: { topic: logTopic(will.topic) } };
  }
  return { identity };
}

/** Why a PUBLISH (or a will being published) is refused, or null when it may go (spec §5, §6.4 rule 5). */
function publishRefusal(s: HookState, client: Client | null, packet: PublishPacket): Error | null {
  const identity = client === null ? undefined : s.identities.get(client);
  const size = packet.payload === undefined ? 0 : Buffer.byteLength(packet.payload);
  if (size > s.maxPacketBytes) {
    s.log.warn({ clientId: client?.id, topic: logTopic(packet.topic), size }, "mqtt publish refused: too large");
    return new Error("payload too large");
  }
  // aedes's default `$SYS/` protection, kept explicitly (the policy denies `$` topics too).
  if (typeof packet.topic !== "string" || packet.topic.startsWith("$SYS/")) return new Error("$SYS/ topic is reserved");
  const verdict = authorize(identity ?? null, "publish", packet.topic, {
    retain: packet.retain === true,
    qos: packet.qos,
  });
  if (verdict === "deny") {
    s.log.warn({ clientId: client?.id, topic: logTopic(packet.topic), retain: packet.retain === true, qos: packet.qos }, "mqtt publish refused");
    return new Error("publish not authorized");
  }
  return null;
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

/** The broker's listeners, not yet listening, and every socket they hold open. */
interface Listeners {
  server: NetServer;
  tlsServer: NetServer | null;
  /** Both, for closing. */
  servers: NetServer[];
  sockets: Set<Socket>;
}

/** The plain listener and, with `opts.tls`, the TLS one; each connection handed to aedes behind the packet-size guard. */
function createListeners(opts: EmbeddedBrokerOptions, broker: Aedes, maxPacketBytes: number): Listeners {
  const log = opts.log;
  const sockets = new Set<Socket>();
  const onConnection = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    broker.handle(socket);
    guardPacketSize(socket, maxPacketBytes, (declared) => {
      log.warn({ remote: socket.remoteAddress, declared, max: maxPacketBytes }, "mqtt packet over the size cap: connection closed");
      socket.destroy();
    });
  };
  const server = createServer(onConnection);
  server.on("error", (err) => log.error({ err }, "mqtt listener error"));
  if (opts.tls === undefined) return { server, tlsServer: null, servers: [server], sockets };
  const tls = createTlsServer(
    { key: opts.tls.key, cert: opts.tls.cert, minVersion: "TLSv1.2", handshakeTimeout: opts.connectTimeoutMs ?? 10_000 },
    (socket: TLSSocket) => onConnection(socket),
  );
  // Connections still in their handshake are not in `sockets` yet; closing destroys them too.
  tls.on("connection", (raw: Socket) => {
    sockets.add(raw);
    raw.once("close", () => sockets.delete(raw));
  });
  // A failed handshake (wrong CA on the client, plain MQTT on the TLS port) ends there.
  tls.on("tlsClientError", (err, socket) => log.debug({ remote: socket.remoteAddress, err: err.message }, "mqtt tls handshake failed"));
  tls.on("error", (err) => log.error({ err }, "mqtt tls listener error"));
  return { server, tlsServer: tls, servers: [server, tls], sockets };
}

/**
 * Listens on the plain port and, when configured, the TLS port.
 * @returns the ports actually listened on
 * @throws what `listen` threw, after closing the listeners and the broker
 */
async function listenAll(opts: EmbeddedBrokerOptions, broker: Aedes, l: Listeners): Promise<{ port: number; tlsPort: number | null }> {
  try {
    const port = await listen(l.server, opts.port, opts.host);
    const tlsPort = l.tlsServer !== null && opts.tls !== undefined ? await listen(l.tlsServer, opts.tls.port, opts.host) : null;
    return { port, tlsPort };
  } catch (err) {
    for (const s of l.servers) if (s.listening) s.close();
    await new Promise<void>((resolve) => broker.close(() => resolve()));
    throw err;
  }
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
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly broker: Aedes,
    private readonly servers: NetServer[],
    private readonly sockets: Set<Socket>,
    port: number,
    tlsPort: number | null,
    private readonly log: Logger,
    private readonly identities: WeakMap<Client, BrokerIdentity>,
    private readonly backendLinks: { open: number },
  ) {
    this.port = port;
    this.tlsPort = tlsPort;
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
    const listeners = createListeners(opts, broker, state.maxPacketBytes);
    const { port, tlsPort } = await listenAll(opts, broker, listeners);
    log.info({ host: opts.host, port, tls_port: tlsPort, maxPacketBytes: state.maxPacketBytes }, "embedded mqtt broker listening");
    return new EmbeddedBroker(broker, listeners.servers, listeners.sockets, port, tlsPort, log, state.identities, state.backendLinks);
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
  async attachBackend(filters: readonly string[], onMessage: (topic: string, payload: Buffer) => void): Promise<BackendLink> {
    const deliver = (packet: { topic: string; payload: Buffer | string }, done: () => void): void => {
      try {
        onMessage(packet.topic, typeof packet.payload === "string" ? Buffer.from(packet.payload) : packet.payload);
      } catch (err) {
        this.log.error({ err, topic: logTopic(packet.topic) }, "upstream message handler failed");
      }
      done();
    };
    const subscribe = (filter: string) =>
      new Promise<void>((resolve, reject) =>
        this.broker.subscribe(filter, deliver, (err?: unknown) => (err ? reject(err as Error) : resolve())),
      );
    for (const filter of filters) await subscribe(filter);
    let open = true;
    this.backendLinks.open += 1;
    for (const client of Object.values(aedesClients(this.broker))) {
      if (client !== undefined && !client.closed && this.identities.get(client)?.kind === "backend") {
        this.log.warn({ clientId: client.id }, "network backend client disconnected: the backend is linked in-process");
        client.close();
      }
    }
    const broker = this;
    return {
      get connected() {
        return open && broker.closing === undefined;
      },
      publish: (topic, envelope) =>
        new Promise<void>((resolve, reject) => {
          if (!open || this.closing !== undefined) {
            reject(new Error("the embedded broker is closed"));
            return;
          }
          this.broker.publish(
            { cmd: "publish", topic, payload: Buffer.from(JSON.stringify(envelope)), qos: 1, retain: false, dup: false },
            (err?: Error) => (err ? reject(err) : resolve()),
          );
        }),
      close: async () => {
        if (!open) return;
        open = false;
        this.backendLinks.open -= 1;
        for (const filter of filters) {
          await new Promise<void>((resolve) => this.broker.unsubscribe(filter, deliver, () => resolve()));
        }
      },
    };
  }

  /** Stops listening, closes every client (their wills are published) and the broker. Idempotent. */
  close(): Promise<void> {
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

/** Listens on `port` (0: a free one) and `host`. @returns the port listened on */
function listen(server: NetServer, port: number, host: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Watches the bytes aedes reads from `socket` and calls `onOversize` as soon as a packet's fixed
 * header declares more than `maxBytes` (or a malformed length): aedes's parser has no cap and
 * would otherwise buffer up to 256 MB per packet.
 *
 * aedes reads with `readable` + `read()`; a `data` listener added next to it sees each chunk
 * `read()` returns, synchronously, without switching the socket to flowing mode.
 */
export function guardPacketSize(socket: Socket, maxBytes: number, onOversize: (declared: number) => void): void {
  const framer = new PacketFramer(maxBytes);
  const onData = (chunk: Buffer): void => {
    const declared = framer.feed(chunk);
    if (declared !== null) {
      socket.off("data", onData);
      onOversize(declared);
    }
  };
  socket.on("data", onData);
}

/**
 * Follows MQTT packet boundaries (fixed header: 1 type byte, 1-4 bytes of remaining length)
 * across chunks without buffering payloads.
 */
export class PacketFramer {
  private state: "type" | "length" | "body" = "type";
  private length = 0;
  private multiplier = 1;
  private lengthBytes = 0;
  private remaining = 0;

  constructor(private readonly maxBytes: number) {}

  /**
   * @returns null while every packet fits; else the declared size of the first packet that does
   *   not (Infinity for a malformed remaining length)
   */
  feed(chunk: Buffer): number | null {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === "type") {
        i += 1;
        this.state = "length";
        this.length = 0;
        this.multiplier = 1;
        this.lengthBytes = 0;
      } else if (this.state === "length") {
        const b = chunk.readUInt8(i);
        i += 1;
        this.length += (b & 0x7f) * this.multiplier;
        this.multiplier *= 128;
        this.lengthBytes += 1;
        if ((b & 0x80) !== 0) {
          if (this.lengthBytes >= 4) return Number.POSITIVE_INFINITY;
          continue;
        }
        const total = 1 + this.lengthBytes + this.length;
        if (total > this.maxBytes) return total;
        this.remaining = this.length;
        this.state = this.remaining === 0 ? "type" : "body";
      } else {
        const n = Math.min(this.remaining, chunk.length - i);
        i += n;
        this.remaining -= n;
        if (this.remaining === 0) this.state = "type";
      }
    }
    return null;
  }
}
