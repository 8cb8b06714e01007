import type { Aedes, AedesOptions, AuthenticateError, Client, ConnectPacket, PublishPacket } from "aedes";
import type { Logger } from "../logger.js";
import { authorize, type BrokerIdentity } from "./authz.policy.js";
import { verifyBrokerPassword, type BrokerUser, type BrokerUserLookup } from "./broker-users.js";
import { aedesClients } from "./lib-internals.js";

/**
 * The embedded broker's admission rules, as aedes hooks: who may connect and as which identity
 * (DESIGN §3 "Broker identity": per-node credentials and client ids, the backend account linked
 * in-process only), which publishes, wills and subscriptions go through (spec §5 rules 1-3,
 * §6.4 rule 5, judged by {@link authorize}), and the clean session forced on every CONNECT.
 */

/** CONNACK return codes of MQTT 3.1.1 (§3.2.2.3) used here. */
const RC_IDENTIFIER_REJECTED = 2;
const RC_SERVER_UNAVAILABLE = 3;
const RC_BAD_USERNAME_OR_PASSWORD = 4;
const RC_NOT_AUTHORIZED = 5;

/** The will a client announces in its CONNECT. */
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
export function logTopic(topic: unknown): string {
  return typeof topic === "string" ? topic.slice(0, 300) : String(topic);
}

/** What the broker's hooks share: the users, the identity of each authenticated client, its will. */
export interface HookState {
  users: BrokerUserLookup;
  log: Logger;
  /** Largest MQTT packet accepted, bytes (fixed header included). */
  maxPacketBytes: number;
  /** The identity each client authenticated as. */
  identities: WeakMap<Client, BrokerIdentity>;
  /** The will each client announced in its CONNECT (checked at authentication). */
  wills: WeakMap<Client, Will>;
  /**
   * Open in-process backend links (`EmbeddedBroker.attachBackend`); while any is open the
   * backend account has no business on the network.
   */
  backendLinks: { open: number };
  /** Set once the broker exists; the hooks only run after that. */
  broker: Aedes | null;
}

type Hooks = Pick<AedesOptions, "preConnect" | "authenticate" | "authorizePublish" | "authorizeSubscribe" | "authorizeForward">;

/** The aedes hooks: every CONNECT, publish, will, subscription and forward judged by {@link authorize}. */
export function createHooks(s: HookState): Hooks {
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
 * Makes a CONNECT asking for a persistent session a clean one (docs/history/decisions-2026.md "no
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
