import type { Settings } from "../config.js";
import type { Logger } from "../logger.js";
import { nodeClientId, parseNodeUsername, type BrokerIdentity } from "./authz.policy.js";
import { BackendMqttClient } from "./backend-client.js";
import type { BrokerAdmin, NodeBrokerAccount } from "./broker-admin.js";
import type { BrokerPasswordVault } from "./broker-passwords.js";
import { BrokerSync } from "./broker-sync.js";
import { brokerPasswordHash, brokerUsers, type BrokerUserLookup } from "./broker-users.js";
import { EmbeddedAdmin } from "./embedded-admin.js";
import { ThreadedBroker } from "./broker-thread.js";
import { EmbeddedBroker, type EmbeddedBrokerHandle } from "./embedded-broker.js";
import { createEmqxBrokerAdmin } from "./emqx-admin.js";
import { MosquittoAdmin } from "./mosquitto-admin.js";
import { readCaFile, resolveMqttTls, type TlsMaterial } from "./tls.js";
import type { Envelope } from "../protocol/envelope.schema.js";
import { backendSubscriptions } from "../protocol/topics.js";
import type { Store } from "../store/db.js";
import type { NodeAccountStatements } from "../store/node-client-state.repository.js";

/** A broker and its admin adapter: `broker` is the embedded aedes instance, null for an external one. */
export interface BrokerAdapter {
  broker: EmbeddedBrokerHandle | null;
  admin: BrokerAdmin;
}

/** What every adapter factory is given. */
export interface BrokerAdapterDeps {
  settings: Settings;
  log: Logger;
  /** Accounts read from the store at every CONNECT (embedded broker). */
  users: BrokerUserLookup;
  /**
   * What the embedded broker's worker thread reads accounts with (its own read-only connection
   * to this file); null runs the embedded broker on the main thread.
   */
  brokerThread: { dbFile: string; backendUsername: string; backendPasswordHash: string; onLinksChanged: () => void } | null;
  /** The embedded broker's TLS listener material, null without TLS. */
  tlsListener: TlsMaterial | null;
  /** The backend's trust for an `mqtts://` SVC_MQTT_URL; the system's store when undefined. */
  backendCa: string | undefined;
  /** The Mosquitto admin connection came up: reconcile now. */
  onAdminConnected(): void;
  /**
   * The backend's subscriptions and where their messages go: the embedded broker subscribes them
   * before its listeners open (an agent cannot publish before the backend listens).
   */
  backend: { filters: readonly string[]; onMessage: (topic: string, payload: Buffer) => void };
}

/** One factory per `SVC_MQTT_BROKER` value (spec §1.8; DESIGN §4). */
export type BrokerAdapterFactories = Record<Settings["mqttBroker"], (deps: BrokerAdapterDeps) => Promise<BrokerAdapter>>;

/**
 * The broker adapters (DESIGN §1): the embedded broker starts here and reads accounts from the store; an
 * external one is reached at SVC_MQTT_URL and may be down: nothing here waits for it (spec §1.7
 * last bullet, §1.8).
 */
export const brokerAdapterFactories: BrokerAdapterFactories = {
  embedded: async ({ settings, log, users, tlsListener, brokerThread, backend }) => {
    const listen = {
      host: settings.embeddedBrokerHost,
      port: settings.embeddedBrokerPort,
      ...(tlsListener === null ? {} : { tls: { port: settings.embeddedBrokerTlsPort, key: tlsListener.keyPem, cert: tlsListener.certPem } }),
      backends: [backend],
    };
    // The thread logs as "broker" itself; records come back through this logger.
    const broker =
      brokerThread === null
        ? await EmbeddedBroker.start({ ...listen, users, log: log.child({ name: "broker" }) })
        : await ThreadedBroker.start({ ...listen, ...brokerThread, log });
    return { broker, admin: new EmbeddedAdmin(broker) };
  },
  mosquitto: async ({ settings, log, backendCa, onAdminConnected }) => ({
    broker: null,
    admin: MosquittoAdmin.start({
      url: settings.mqttUrl,
      username: settings.mosquittoAdminUsername,
      password: settings.mosquittoAdminPassword ?? "",
      ...(backendCa === undefined ? {} : { ca: backendCa }),
      log: log.child({ name: "mosquitto-admin" }),
      reconnectMinMs: settings.mqttReconnectMinMs,
      reconnectMaxMs: settings.mqttReconnectMaxMs,
      onConnect: onAdminConnected,
    }),
  }),
  emqx: async ({ settings, log }) => ({
    broker: null,
    admin: createEmqxBrokerAdmin({
      apiUrl: settings.emqxApiUrl ?? "",
      apiKey: settings.emqxApiKey ?? "",
      apiSecret: settings.emqxApiSecret ?? "",
      log: log.child({ name: "emqx-admin" }),
    }),
  }),
};

/** What the server needs of its broker connection (the MQTT.js client or the in-process link). */
interface BackendChannel {
  readonly connected: boolean;
  /** QoS 1, never retained (spec §6.4 rule 5). @throws Error when not connected */
  publish(topic: string, envelope: Envelope): Promise<void>;
  close(): Promise<void>;
}

/** Constructor dependencies of {@link BrokerConnection}. */
export interface BrokerConnectionDeps {
  settings: Settings;
  log: Logger;
  store: Store;
  accounts: NodeAccountStatements;
  vault: BrokerPasswordVault;
  backendPassword: string;
  /** The backend's link to the broker came up or went down (the root reports it as `broker.connection_changed`). */
  onConnectionChanged(): void;
  factories: BrokerAdapterFactories;
}

/**
 * The backend's side of MQTT: the broker adapter, the account sync and the channel downstream
 * commands go out on. Built with the other parts; {@link start} opens it (only with MQTT services
 * enabled: with them off no broker connection is ever opened, spec §1.7). Until then, and with
 * MQTT off, it is not connected: publishes reject and account changes are no-ops.
 */
export class BrokerConnection {
  readonly #d: BrokerConnectionDeps;
  #broker: EmbeddedBrokerHandle | null = null;
  #sync: BrokerSync | null = null;
  #channel: BackendChannel | null = null;
  #reconnectNow: () => void = () => undefined;
  /** The CA PEM bind profiles carry while TLS is preferred (spec §2.6). */
  #profileCa: string | undefined;

  constructor(deps: BrokerConnectionDeps) {
    this.#d = deps;
  }

  /** The embedded broker once started; null for an external broker or with MQTT off. */
  get broker(): EmbeddedBrokerHandle | null {
    return this.#broker;
  }

  /** Keeps the broker's accounts in line with the store (spec §1.8); null until started or with MQTT off. */
  get sync(): BrokerSync | null {
    return this.#sync;
  }

  get profileCa(): string | undefined {
    return this.#profileCa;
  }

  /** Whether the backend's channel to the broker is up. */
  connected(): boolean {
    return this.#channel?.connected ?? false;
  }

  /** Publishes a downstream envelope. @throws Error when the backend has no broker channel */
  publish(topic: string, envelope: Envelope): Promise<void> {
    return this.#channel ? this.#channel.publish(topic, envelope) : Promise.reject(new Error("the backend is not connected to the broker"));
  }

  /** Creates or updates a bound node's account on the broker (no-op without a broker). */
  async putNode(account: NodeBrokerAccount): Promise<void> {
    await this.#sync?.putNode(account);
  }

  /** Removes a node's account and cuts its live session (no-op without a broker). */
  removeNode(configId: string, nodeId: string): void {
    void this.#sync?.removeNode(configId, nodeId);
  }

  /**
   * Resolves TLS, starts the adapter chosen by SVC_MQTT_BROKER, the account sync and the backend
   * channel, then asks for the first reconciliation (EMQX and Mosquitto need the backend user
   * before the backend can connect). Each part registers its close with `defer`, in start order.
   * @param opts.publicHost the host bind profiles name (the TLS certificate covers it)
   * @throws SettingsError when TLS or CA files are unusable; Error when the embedded broker cannot listen
   */
  async start(opts: {
    publicHost: string;
    onMessage: (topic: string, payload: Buffer) => void;
    defer: (close: () => Promise<void> | void) => void;
  }): Promise<void> {
    const { settings, log } = this.#d;
    // spec §1.9: the TLS listener's certificate and the CA profiles carry. The wall clock, not the
    // injected one: peers check certificates against their real clocks.
    const tls = await resolveMqttTls(settings, { publicHost: opts.publicHost, now: Date.now(), log: log.child({ name: "tls" }) });
    this.#profileCa = tls.profileCa;
    const backendCa = settings.mqttCaFile === undefined ? undefined : await readCaFile(settings.mqttCaFile, "SVC_MQTT_CA_FILE");
    const backendPasswordHash = brokerPasswordHash(this.#d.backendPassword);
    const { broker, admin } = await this.#d.factories[settings.mqttBroker]({
      settings,
      log,
      users: brokerUsers(this.#d.accounts, settings.mqttBackendUsername, backendPasswordHash),
      brokerThread: this.#brokerThread(backendPasswordHash),
      tlsListener: tls.listener,
      backendCa,
      onAdminConnected: () => this.#sync?.requestReconcile("mosquitto admin connected"),
      backend: { filters: backendSubscriptions(), onMessage: opts.onMessage },
    });
    this.#broker = broker;
    if (broker !== null) opts.defer(() => broker.close());
    const sync = new BrokerSync({
      admin,
      store: this.#d.store,
      vault: this.#d.vault,
      backend: { username: settings.mqttBackendUsername, password: this.#d.backendPassword },
      log: log.child({ name: "broker-sync" }),
      retryMinMs: settings.mqttReconnectMinMs,
      retryMaxMs: settings.mqttReconnectMaxMs,
      // The backend user may have just been created: try now rather than after the grown backoff.
      onReconciled: () => this.#reconnectNow(),
    });
    this.#sync = sync;
    opts.defer(() => sync.close());
    const channel =
      broker === null ? this.#external(sync, opts.onMessage, backendCa) : (broker.backendLinks[0] ?? (await broker.attachBackend(backendSubscriptions(), opts.onMessage)));
    this.#channel = channel;
    opts.defer(() => channel.close());
    sync.requestReconcile("start");
  }

  /** The embedded broker thread's account source, or null to run it on the main thread (setting off, or no database file). */
  #brokerThread(backendPasswordHash: string): BrokerAdapterDeps["brokerThread"] {
    const { settings, store } = this.#d;
    if (!settings.embeddedBrokerThread || store.inMemory) return null;
    const file = store.file;
    // A broker thread that dies and is restarted takes the backend's link down and up again.
    return { dbFile: file, backendUsername: settings.mqttBackendUsername, backendPasswordHash, onLinksChanged: () => this.#d.onConnectionChanged() };
  }

  /** An MQTT.js client to SVC_MQTT_URL; an external broker is never waited for. */
  #external(sync: BrokerSync, onMessage: (topic: string, payload: Buffer) => void, ca: string | undefined): BackendChannel {
    const { settings, log, onConnectionChanged } = this.#d;
    const client = BackendMqttClient.start({
      url: settings.mqttUrl,
      username: settings.mqttBackendUsername,
      password: this.#d.backendPassword,
      ...(ca === undefined ? {} : { ca }),
      log: log.child({ name: "mqtt" }),
      onMessage,
      onConnect: () => {
        sync.requestReconcile("backend connected");
        onConnectionChanged();
      },
      onDisconnect: () => onConnectionChanged(),
      onRefused: (reason) => sync.requestReconcile(`backend refused: ${reason}`),
      reconnectMinMs: settings.mqttReconnectMinMs,
      reconnectMaxMs: settings.mqttReconnectMaxMs,
    });
    this.#reconnectNow = () => client.reconnectNow();
    return client;
  }
}

/** The identity behind a broker username, for `/api/internal/emqx/authz` (spec §4 rule 13). */
export function resolveIdentity(accounts: NodeAccountStatements, settings: Settings, username: string): BrokerIdentity | undefined {
  if (username === settings.mqttBackendUsername) return { kind: "backend" };
  if (!settings.mqttEnabled) return undefined;
  const parsed = parseNodeUsername(username);
  if (parsed === null) return undefined;
  const row = accounts.byUsername(username);
  if (!row || row.hash === null || row.mode !== "dynamic") return undefined;
  return { kind: "node", configId: parsed.configId, nodeId: parsed.nodeId, clientId: nodeClientId(parsed.configId, parsed.nodeId) };
}
