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
import type { BrokerUser, BrokerUserLookup } from "./mqtt/broker-users.js";
import { DetectScheduler } from "./mqtt/detect-scheduler.js";
import { EmbeddedBroker } from "./mqtt/embedded-broker.js";
import { MqttRouter } from "./mqtt/router.js";
import type { Envelope } from "./protocol/envelope.schema.js";
import { backendSubscriptions } from "./protocol/topics.js";
import { ArtifactsService } from "./services/artifacts.service.js";
import { AuthService } from "./services/auth.service.js";
import { BackupsService } from "./services/backups.service.js";
import { ControlService } from "./services/control.service.js";
import { DownloadsService } from "./services/downloads.service.js";
import { MeshService } from "./services/mesh.service.js";
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
  hub: EventHub;
  detect: DetectScheduler;
  /** The embedded broker, when MQTT services are enabled. */
  broker: EmbeddedBroker | null;
  /** The admin password generated at this start (first start without SVC_ADMIN_PASSWORD), else null. */
  generatedAdminPassword: string | null;
  systemStatus(): Promise<SystemStatus>;
  /** Stops probing, closes HTTP (ending SSE streams), MQTT, the actors, then the store. */
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
    /** The backend's channel to the broker: publish downstream, and whether it is up. */
    let client: { publish(topic: string, envelope: Envelope): Promise<void>; connected(): boolean } | null = null;
    // Late-bound: the notifier needs the control service, which needs the registry.
    let notifier: Notifier | null = null;
    let control: ControlService | null = null;

    const registry = new NodeActorRegistry({
      store,
      clock,
      log: log.child({ name: "actors" }),
      onlineTtlMs: settings.onlineTtlMs,
      detectTimeoutMs: settings.detectTimeoutMs,
      // spec §1.7: with MQTT off, time changes nothing stored for dynamic nodes.
      timersEnabled: settings.mqttEnabled,
      effects: {
        revokeClient: (configId, nodeId) => broker?.kick(nodeClientId(configId, nodeId)),
        requestConfigPush: (configId, nodeId) => control?.schedulePush(configId, nodeId),
      },
      onStatusChanged: (configId, nodeId) => notifier?.endpointStatus(configId, nodeId),
    });
    const commands = new CommandTracker({
      store,
      clock,
      log: log.child({ name: "commands" }),
      timeoutMs: settings.commandTimeoutMs,
      detectTimeoutMs: settings.detectTimeoutMs,
      publish: (topic, envelope) =>
        client ? client.publish(topic, envelope) : Promise.reject(new Error("the backend is not connected to the broker")),
      onLog: (change, row) => notifier?.controlLog(change, row),
      onTimeout: () => undefined, // detects: the node machine runs its own timeout
    });
    control = new ControlService({
      store,
      clock,
      registry,
      commands,
      mqttEnabled: settings.mqttEnabled,
      publicUrl: settings.publicUrl,
      bindTokenTtlMs: settings.bindTokenTtlMs,
      configPushDebounceMs: settings.configPushDebounceMs,
      brokerEndpoint: () => ({
        host: settings.mqttPublicHost,
        port: settings.mqttPublicPort ?? broker?.port ?? settings.embeddedBrokerPort,
        tls: false,
      }),
      kick: (clientId) => void broker?.kick(clientId),
    });
    const status = () =>
      systemStatus({ store, registry, mqttEnabled: settings.mqttEnabled, brokerConnected: () => client?.connected() ?? false });
    const hub = new EventHub({ clock, log: log.child({ name: "events" }), systemStatus: status, ...opts.hub });
    notifier = new Notifier({ hub, mesh, control: () => control!, status, log: log.child({ name: "notifier" }) });
    const router = new MqttRouter({ registry, commands, clock, log: log.child({ name: "mqtt" }) });
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
          broker?.kick(nodeClientId(change.configId, id));
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

    if (settings.mqttEnabled) {
      const users = brokerUsers(store, settings.mqttBackendUsername, backendPassword);
      broker = await EmbeddedBroker.start({
        host: settings.embeddedBrokerHost,
        port: settings.embeddedBrokerPort,
        users,
        log: log.child({ name: "broker" }),
      });
      closers.push(() => broker?.close());
      // In-process: the backend subscribes on aedes itself (no loopback MQTT client).
      const link = await broker.attachBackend(backendSubscriptions(), (topic, payload) => router.handle(topic, payload));
      client = { publish: (topic, envelope) => link.publish(topic, JSON.stringify(envelope)), connected: () => link.connected() };
      closers.push(() => link.close());
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
    });
    closers.push(async () => {
      detect.setActive(false);
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
      hub,
      detect,
      broker,
      generatedAdminPassword,
      systemStatus: status,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
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

/** Where the backend reaches a listener bound to `host` ("0.0.0.0"/"::" mean loopback). */
function connectHost(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}
