import { createServer, type AddressInfo, type Server as NetServer, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import type { Aedes } from "aedes";
import type { Logger } from "../logger.js";
import { guardPacketSize } from "./packet-guard.js";

/**
 * The embedded broker's sockets: the plain MQTT listener and the TLS one beside it (spec §1.9
 * "client TLS listener"), each connection handed to aedes behind the packet-size guard, and
 * every socket tracked so that closing the broker also ends connections that never sent CONNECT.
 */

/** The TLS listener: `port` 0 picks a free port; `key`/`cert` are PEM (cert may be a chain), never logged. */
export interface TlsListenerOptions {
  port: number;
  key: string;
  cert: string;
}

/** Where and how to listen (the listening part of the broker's options). */
export interface ListenerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  log: Logger;
  /** The TLS handshake must finish within this time. Default 10 s. */
  connectTimeoutMs?: number;
  tls?: TlsListenerOptions;
}

/** The broker's listeners, not yet listening, and every socket they hold open. */
export interface Listeners {
  server: NetServer;
  tlsServer: NetServer | null;
  /** Both, for closing. */
  servers: NetServer[];
  sockets: Set<Socket>;
}

/** The plain listener and, with `opts.tls`, the TLS one; each connection handed to aedes behind the packet-size guard. */
export function createListeners(opts: ListenerOptions, broker: Aedes, maxPacketBytes: number): Listeners {
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
export async function listenAll(opts: ListenerOptions, broker: Aedes, l: Listeners): Promise<{ port: number; tlsPort: number | null }> {
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
