import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { CommandTracker } from "./actors/commands.js";
import { NodeActorRegistry } from "./actors/registry.js";
import { systemClock, type Clock } from "./clock.js";
import type { Settings } from "./config.js";
import { hashToken } from "./domain/tokens.js";
import { EventHub, type EventHubOptions } from "./events/hub.js";
import { buildApp, type App } from "./http/app.js";
import type { Logger } from "./logger.js";
import { nodeClientId, parseNodeUsername, type BrokerIdentity } from "./mqtt/authz.policy.js";
import { BackendMqttClient, type BackendClientOptions } from "./mqtt/backend-client.js";
import type { BrokerAdmin } from "./mqtt/broker-admin.js";
import { BrokerPasswordVault } from "./mqtt/broker-passwords.js";
import { BrokerSync } from "./mqtt/broker-sync.js";
import type { BrokerUser, BrokerUserLookup } from "./mqtt/broker-users.js";
import { EmbeddedAdmin } from "./mqtt/embedded-admin.js";
import { createEmqxBrokerAdmin } from "./mqtt/emqx-admin.js";
import { MosquittoAdmin } from "./mqtt/mosquitto-admin.js";
import { DetectScheduler } from "./mqtt/detect-scheduler.js";
import { EmbeddedBroker } from "./mqtt/embedded-broker.js";
import { readCaFile, resolveMqttTls } from "./mqtt/tls.js";
import { MqttRouter } from "./mqtt/router.js";
import { EventLog } from "./mqtt/event-log.js";
import { ControlLogRetention } from "./services/control-log-retention.js";
import type { Envelope } from "./protocol/envelope.schema.js";
import { backendSubscriptions } from "./protocol/topics.js";
import { ArtifactsService } from "./services/artifacts.service.js";
import { AuthService } from "./services/auth.service.js";
import { BackupsService } from "./services/backups.service.js";
import { ControlService } from "./services/control.service.js";
import { DownloadsService } from "./services/downloads.service.js";
import { MeshService } from "./services/mesh.service.js";
import { ServiceMetrics } from "./services/metrics.js";
import { MqttSettingsService } from "./services/mqtt-settings.service.js";
import { Notifier, systemStatus, type SystemStatus } from "./services/notifier.js";
import { Store } from "./store/db.js";
import { getSetting, putSetting } from "./store/settings.repository.js";

/** The assembled service. */
export interface Server {
  app: App;
  store: Store;
  auth: AuthService;
  mesh: MeshService;
  downloads: DownloadsService;
  artifacts: ArtifactsService;
  backups: BackupsService;
  control: ControlService;
  registry: NodeActorRegistry;
  commands: CommandTracker;
  router: MqttRouter;
  /** Stores client events as control logs (spec §6.4 rule 9). */
  eventLog: EventLog;
  /** Keeps the newest SVC_CONTROL_LOG_RETENTION control logs per node (issue 10). */
  controlLogRetention: ControlLogRetention;
  hub: EventHub;
  detect: DetectScheduler;
  /** `GET /metrics` families (issue 6 item 6). */
  metrics: ServiceMetrics;
  /** MQTT settings: what bind profiles tell agents (DESIGN §5 settings/mqtt). */
  mqttSettings: MqttSettingsService;
  /** The embedded broker, when MQTT services are enabled. */
  broker: EmbeddedBroker | null;
  /** Keeps the broker's accounts in line with the store (issue 6), when MQTT services are enabled. */
  brokerSync: BrokerSync | null;
  /** The admin password generated at this start (first start without SVC_ADMIN_PASSWORD), else null. */
  generatedAdminPassword: string | null;
  systemStatus(): Promise<SystemStatus>;
  /**
   * Stops probing and waits for detects in flight (at most 5 s on the clock), then closes HTTP
   * (ending SSE streams), MQTT, the actors, then the store.
   */
  close(): Promise<void>;
}

/**
 * Builds every long-lived part from settings. Used by `main.ts` and by tests (with a
 * {@link ManualClock} and a temp data directory). With MQTT services enabled it starts the
 * embedded broker and connects the backend client; with them disabled no broker connection is
 * ever opened (spec §1.7).
 * @param opts.dbFile overrides `{dataDir}/svc.db`
 * @param opts.hub SSE hub options (tests: buffer sizes, clock sync interval)
 * @throws Error when the database cannot be opened or migrated, or the broker cannot start
 */
export async function createServer(
  settings: Settings,
  log: Logger,
  opts: { clock?: Clock; dbFile?: string; hub?: Partial<Omit<EventHubOptions, "clock" | "log">> } = {},
): Promise<Server> {
  const clock = opts.clock ?? systemClock;
  const store = await Store.open(opts.dbFile ?? join(settings.dataDir, "svc.db"), log.child({ name: "store" }));
  const closers: Array<() => Promise<void> | void> = [() => store.close()];
  const closeAll = async () => {
    for (const c of closers.reverse()) {
      try {
        await c();
      } catch (err) {
        log.error({ err }, "shutdown step failed");
      }
    }
  };
  try {
    const auth = new AuthService({ store, clock, sessionTtlMs: settings.adminSessionTtlMs });
    const generatedAdminPassword = await auth.ensureAdminPassword(settings.adminPassword);
    const mesh = new MeshService({ store, clock, mqttEnabled: settings.mqttEnabled });
    const downloads = new DownloadsService({ store, clock, tokenTtlMs: settings.downloadTokenTtlMs });
    const backendPassword = settings.mqttBackendPassword ?? (await storedSecret(store, clock, "mqtt_backend_password"));
    const authzKey = settings.brokerAuthzSharedKey ?? (await storedSecret(store, clock, "broker_authz_shared_key"));

    let broker: EmbeddedBroker | null = null;
    /**
     * The backend's channel to the broker: downstream publishes and the connection state. For
     * the embedded broker an in-process link on aedes (no loopback MQTT client); otherwise an
     * MQTT.js client to SVC_MQTT_URL.
     */
    let client: BackendChannel | null = null;
    let sync: BrokerSync | null = null;
    // Sealed broker passwords (issue 6): the key file is created at the first bind.
    const vault = new BrokerPasswordVault(settings.dataDir, log.child({ name: "broker-sync" }));
    // Late-bound: the notifier needs the control service, which needs the registry.
    let notifier: Notifier | null = null;
    let control: ControlService | null = null;
    let metrics: ServiceMetrics | null = null;
    let mqttSettings: MqttSettingsService | null = null;
    /** The CA PEM bind profiles carry while TLS is preferred (spec §2.6); set when MQTT starts. */
    let profileCa: string | undefined;

    const registry = new NodeActorRegistry({
      store,
      clock,
      log: log.child({ name: "actors" }),
      onlineTtlMs: settings.onlineTtlMs,
      detectTimeoutMs: settings.detectTimeoutMs,
      // spec §1.7: with MQTT off, time changes nothing stored for dynamic nodes.
      timersEnabled: settings.mqttEnabled,
      effects: {
        // Reset and dynamic → static: the broker account goes and the live client is cut (spec §3.1, §4 rule 12).
        revokeClient: (configId, nodeId) => void sync?.removeNode(configId, nodeId),
        requestConfigPush: (configId, nodeId) => control?.schedulePush(configId, nodeId),
      },
      onStatusChanged: (configId, nodeId, projection) => notifier?.endpointStatus(configId, nodeId, projection),
    });
    const controlLogRetention = new ControlLogRetention({
      store,
      clock,
      log: log.child({ name: "retention" }),
      keep: settings.controlLogRetention,
    });
    const commands = new CommandTracker({
      store,
      clock,
      log: log.child({ name: "commands" }),
      timeoutMs: settings.commandTimeoutMs,
      detectTimeoutMs: settings.detectTimeoutMs,
      publish: (topic, envelope) =>
        client ? client.publish(topic, envelope) : Promise.reject(new Error("the backend is not connected to the broker")),
      onLog: (change, row) => {
        notifier?.controlLog(change, row);
        if (change === "created") controlLogRetention.noteInsert(row.node_id);
      },
      onTimeout: () => undefined, // detects: the node machine runs its own timeout
      // spec §3.1, §6.4 rule 8: a detect the broker did not take has failed now, not at its
      // timeout (the tracker has logged it with the node; the machine may drop the node).
      onPublishFailed: (command) => {
        if (command.kind === "detect") registry.post(command.configId, command.nodeId, { type: "detect.failed", at: clock.now() });
      },
      onFinal: (command, final) => metrics?.commandFinished(command.action, final),
    });
    control = new ControlService({
      store,
      clock,
      log: log.child({ name: "control" }),
      registry,
      commands,
      mqttEnabled: settings.mqttEnabled,
      publicUrl: settings.publicUrl,
      bindTokenTtlMs: settings.bindTokenTtlMs,
      configPushDebounceMs: settings.configPushDebounceMs,
      brokerEndpoint: () => {
        // The operator's overrides (PUT /api/v1/settings/mqtt) over the environment.
        const endpoint = mqttSettings!.current();
        // spec §1.9, §2.6: with SVC_MQTT_TLS_ENABLED profiles prefer TLS and carry the CA.
        if (!settings.mqttTlsEnabled) return { host: endpoint.public_host, port: endpoint.public_port, tls: false };
        return { host: endpoint.public_host, port: endpoint.public_tls_port, tls: true, ...(profileCa === undefined ? {} : { caCert: profileCa }) };
      },
      sealBrokerPassword: (username, password) => {
        try {
          return vault.seal(username, password);
        } catch (err) {
          log.error({ err: (err as Error).message, username }, "broker password not sealed: an external broker cannot re-create this account later");
          return null;
        }
      },
      brokerAccountBound: async (account) => {
        await sync?.putNode(account);
      },
    });
    const status = () =>
      systemStatus({ store, registry, mqttEnabled: settings.mqttEnabled, broker: settings.mqttBroker, brokerConnected: () => client?.connected ?? false });
    const hub = new EventHub({ clock, log: log.child({ name: "events" }), systemStatus: status, ...opts.hub });
    // issue 10: a console stream ends with its admin session.
    auth.onSessionRevoked((key) => hub.endSession(key));
    notifier = new Notifier({ hub, mesh, control: () => control!, status, log: log.child({ name: "notifier" }) });
    const eventLog = new EventLog({
      store,
      log: log.child({ name: "events-log" }),
      onStored: (row) => {
        notifier?.controlLog("created", row);
        controlLogRetention.noteInsert(row.node_id);
      },
    });
    const router = new MqttRouter({ registry, commands, clock, log: log.child({ name: "mqtt" }), events: eventLog });
    const brokerConnected = () => client?.connected ?? false;
    metrics = new ServiceMetrics({
      mqttEnabled: settings.mqttEnabled,
      nodes: () => registry.projections(),
      received: () => router.received,
      published: () => commands.published,
      dropped: () => router.dropped,
      hub: () => hub.metrics(),
      brokerConnected,
    });
    mqttSettings = await MqttSettingsService.load({
      store,
      clock,
      hub,
      log: log.child({ name: "settings" }),
      mqttEnabled: settings.mqttEnabled,
      broker: settings.mqttBroker,
      backendUsername: settings.mqttBackendUsername,
      tlsEnabled: () => settings.mqttTlsEnabled,
      brokerConnected,
      defaults: () => ({
        public_host: settings.mqttPublicHost,
        public_port: settings.mqttPublicPort ?? broker?.port ?? settings.embeddedBrokerPort,
        public_tls_port: settings.mqttPublicTlsPort ?? broker?.tlsPort ?? settings.embeddedBrokerTlsPort,
      }),
    });
    const detect = new DetectScheduler({
      registry,
      clock,
      log: log.child({ name: "detect" }),
      intervalMs: settings.detectIntervalMs,
      sendDetect: async (configId, nodeId) => {
        const node = await store.db
          .selectFrom("nodes")
          .innerJoin("configs", "configs.config_id", "nodes.config_id")
          .select(["nodes.interface_name", "configs.tunnel_protocol"])
          .where("nodes.node_id", "=", nodeId)
          .executeTakeFirst();
        if (!node) return;
        await registry.send(configId, nodeId, { type: "detect.sent", at: clock.now() });
        await commands.send(configId, nodeId, "detect", "detect", {
          tunnel_protocol: node.tunnel_protocol,
          interface_name: node.interface_name,
        });
      },
    });
    hub.onSubscribersChanged((count) => detect.setActive(settings.mqttEnabled && count > 0));

    mesh.setHooks({
      afterCommit: (change) => {
        const at = clock.now();
        const settled: Array<Promise<void>> = [];
        for (const id of change.deleted) {
          registry.remove(change.configId, id);
          // Its credentials went with the row; a live session goes too.
          void sync?.removeNode(change.configId, id);
        }
        for (const row of change.created) settled.push(registry.add({ ...row, machine_snapshot: null, machine_version: null }));
        for (const m of change.modeChanged) settled.push(registry.send(change.configId, m.nodeId, { type: "node.mode_changed", at, mode: m.mode }));
        for (const s of change.staged) {
          settled.push(registry.send(change.configId, s.nodeId, { type: "config.staged", at, version: s.version, sha: s.sha }));
        }
        notifier?.meshChanged(change);
        return Promise.all(settled);
      },
    });

    await registry.start();
    closers.push(() => registry.stop());
    commands.start();
    closers.push(() => commands.stop());
    closers.push(() => eventLog.close());
    controlLogRetention.start();
    closers.push(() => controlLogRetention.stop());

    if (settings.mqttEnabled) {
      // spec §1.9 (issue 6 TLS): the TLS listener's certificate and the CA profiles carry. The
      // wall clock, not `clock`: peers check certificates against their real clocks.
      const tls = await resolveMqttTls(settings, { publicHost: mqttSettings.current().public_host, now: Date.now(), log: log.child({ name: "tls" }) });
      profileCa = tls.profileCa;
      // What the backend trusts for an `mqtts://` SVC_MQTT_URL; the system's trust store when unset.
      const backendCa = settings.mqttCaFile === undefined ? undefined : await readCaFile(settings.mqttCaFile, "SVC_MQTT_CA_FILE");
      // issue 6: the broker and its admin adapter. The embedded broker starts here and reads
      // accounts from the store; an external one is reached at SVC_MQTT_URL and may be down:
      // nothing below waits for it (spec §1.7 last bullet, §1.8).
      let admin: BrokerAdmin;
      if (settings.mqttBroker === "embedded") {
        const users = brokerUsers(store, settings.mqttBackendUsername, backendPassword);
        broker = await EmbeddedBroker.start({
          host: settings.embeddedBrokerHost,
          port: settings.embeddedBrokerPort,
          users,
          log: log.child({ name: "broker" }),
          ...(tls.listener === null ? {} : { tls: { port: settings.embeddedBrokerTlsPort, key: tls.listener.keyPem, cert: tls.listener.certPem } }),
        });
        closers.push(() => broker?.close());
        admin = new EmbeddedAdmin(broker);
      } else if (settings.mqttBroker === "mosquitto") {
        admin = MosquittoAdmin.start({
          url: settings.mqttUrl,
          username: settings.mosquittoAdminUsername,
          password: settings.mosquittoAdminPassword ?? "",
          ...(backendCa === undefined ? {} : { ca: backendCa }),
          log: log.child({ name: "mosquitto-admin" }),
          reconnectMinMs: settings.mqttReconnectMinMs,
          reconnectMaxMs: settings.mqttReconnectMaxMs,
          onConnect: () => sync?.requestReconcile("mosquitto admin connected"),
        });
      } else {
        admin = createEmqxBrokerAdmin({
          apiUrl: settings.emqxApiUrl ?? "",
          apiKey: settings.emqxApiKey ?? "",
          apiSecret: settings.emqxApiSecret ?? "",
          log: log.child({ name: "emqx-admin" }),
        });
      }
      sync = new BrokerSync({
        admin,
        store,
        vault,
        backend: { username: settings.mqttBackendUsername, password: backendPassword },
        log: log.child({ name: "broker-sync" }),
        retryMinMs: settings.mqttReconnectMinMs,
        retryMaxMs: settings.mqttReconnectMaxMs,
        // The backend user may have just been created: try now rather than after the grown backoff.
        onReconciled: () => client?.reconnectNow?.(),
      });
      closers.push(() => sync?.close());
      if (broker !== null) {
        // In-process: the backend subscribes on aedes itself before any agent can connect, so
        // nothing sent right after start-up is missed, and a heartbeat costs no loopback packets.
        client = await broker.attachBackend(backendSubscriptions(), (topic, payload) => router.handle(topic, payload));
      } else {
        const clientOptions: BackendClientOptions = {
          url: settings.mqttUrl,
          username: settings.mqttBackendUsername,
          password: backendPassword,
          ...(backendCa === undefined ? {} : { ca: backendCa }),
          log: log.child({ name: "mqtt" }),
          onMessage: (topic, payload) => router.handle(topic, payload),
          onConnect: () => {
            sync?.requestReconcile("backend connected");
            notifier?.systemStatusChanged();
          },
          onDisconnect: () => notifier?.systemStatusChanged(),
          onRefused: (reason) => sync?.requestReconcile(`backend refused: ${reason}`),
          reconnectMinMs: settings.mqttReconnectMinMs,
          reconnectMaxMs: settings.mqttReconnectMaxMs,
        };
        // An external broker is never waited for.
        client = BackendMqttClient.start(clientOptions);
      }
      closers.push(() => client?.close());
      // The first reconciliation: EMQX and Mosquitto need the backend user before the backend can connect.
      sync.requestReconcile("start");
    }

    const artifacts = new ArtifactsService({ settings, store, clock, log: log.child({ name: "artifacts" }), downloads });
    const backups = new BackupsService({
      settings,
      store,
      clock,
      log: log.child({ name: "backups" }),
      downloads,
      mesh,
      registry,
      hub,
      status,
    });
    const app = await buildApp({
      settings,
      log,
      clock,
      auth,
      mesh,
      downloads,
      control,
      hub,
      status,
      internalAuthz: {
        sharedKey: () => authzKey,
        resolve: (username) => resolveIdentity(store, settings, username),
      },
      artifacts,
      backups,
      metrics,
      mqttSettings,
    });
    closers.push(async () => {
      // First: detects in flight finish while the store, the actors and the broker link are open.
      await detect.stop();
      control?.stop();
      await app.close();
      await hub.close();
    });
    return {
      app,
      store,
      auth,
      mesh,
      downloads,
      artifacts,
      backups,
      control,
      registry,
      commands,
      router,
      eventLog,
      controlLogRetention,
      hub,
      detect,
      metrics,
      mqttSettings,
      broker,
      brokerSync: sync,
      generatedAdminPassword,
      systemStatus: status,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** What the server needs of its broker connection (the MQTT.js client or the in-process link). */
interface BackendChannel {
  readonly connected: boolean;
  /** QoS 1, never retained (spec §6.4 rule 5). @throws Error when not connected */
  publish(topic: string, envelope: Envelope): Promise<void>;
  close(): Promise<void>;
  /** Retry the connection now instead of after the grown backoff (MQTT.js client only). */
  reconnectNow?(): void;
}

/** A secret generated once and kept in the store (DESIGN §6 "generated and stored"). */
async function storedSecret(store: Store, clock: Clock, key: string): Promise<string> {
  const existing = await getSetting(store.db, key);
  if (existing !== undefined) return existing;
  const secret = randomBytes(32).toString("base64url");
  await putSetting(store.db, key, secret, clock.now());
  return secret;
}

/**
 * The broker's users (DESIGN §3 Broker identity): the backend user, and one per bound dynamic
 * node read from the store at every CONNECT, so rotated or deleted credentials stop working at
 * once.
 */
function brokerUsers(store: Store, backendUsername: string, backendPassword: string): BrokerUserLookup {
  const backend: BrokerUser = { identity: { kind: "backend" }, passwordHash: hashToken(backendPassword) };
  const byUsername = store.sqlite.prepare(
    `SELECT s.mqtt_password_hash AS hash, n.config_id, n.node_id, n.mode
       FROM node_client_state s JOIN nodes n ON n.node_id = s.node_id
      WHERE s.mqtt_username = ? AND s.client_initialized = 1`,
  );
  return {
    find(username) {
      if (username === backendUsername) return backend;
      if (parseNodeUsername(username) === null) return undefined;
      const row = byUsername.get(username) as { hash: string | null; config_id: string; node_id: string; mode: string } | undefined;
      if (!row || row.hash === null || row.mode !== "dynamic") return undefined;
      return {
        identity: { kind: "node", configId: row.config_id, nodeId: row.node_id, clientId: nodeClientId(row.config_id, row.node_id) },
        passwordHash: row.hash,
      };
    },
  };
}

/** The identity behind a broker username, for `/api/internal/emqx/authz` (spec §4 rule 13). */
function resolveIdentity(store: Store, settings: Settings, username: string): BrokerIdentity | undefined {
  if (username === settings.mqttBackendUsername) return { kind: "backend" };
  if (!settings.mqttEnabled) return undefined;
  const parsed = parseNodeUsername(username);
  if (parsed === null) return undefined;
  const row = store.sqlite
    .prepare(
      `SELECT n.mode FROM node_client_state s JOIN nodes n ON n.node_id = s.node_id
        WHERE s.mqtt_username = ? AND s.client_initialized = 1 AND s.mqtt_password_hash IS NOT NULL`,
    )
    .get(username) as { mode: string } | undefined;
  if (!row || row.mode !== "dynamic") return undefined;
  return { kind: "node", configId: parsed.configId, nodeId: parsed.nodeId, clientId: nodeClientId(parsed.configId, parsed.nodeId) };
}
