import { join } from "node:path";
import { createActorParts, type ActorParts } from "./actor-parts.js";
import { AppEvents } from "./app-events.js";
import { brokerAdapterFactories, BrokerConnection, resolveIdentity, type BrokerAdapterFactories } from "./broker-factory.js";
import { systemClock, type Clock } from "./clock.js";
import type { Settings } from "./config.js";
import { brokerEndpoint, countedAfresh, meshAfterCommit, sealWithVault, storeCountsOffThread, storedSecret } from "./context-helpers.js";
import { EventHub, type EventHubOptions } from "./events/hub.js";
import { buildApp, type App } from "./http/app.js";
import { Lifecycle } from "./lifecycle.js";
import type { Logger } from "./logger.js";
import { BrokerPasswordVault } from "./mqtt/broker-passwords.js";
import { DetectScheduler } from "./mqtt/detect-scheduler.js";
import { ArtifactsService } from "./services/artifacts.service.js";
import { AuthService } from "./services/auth.service.js";
import { BackupsService } from "./services/backups.service.js";
import { ControlService } from "./services/control.service.js";
import { DownloadsService } from "./services/downloads.service.js";
import { MeshService } from "./services/mesh.service.js";
import { MachinesService } from "./services/machines.service.js";
import { ServiceMetrics } from "./services/metrics.js";
import { MqttSettingsService } from "./services/mqtt-settings.service.js";
import { Notifier, systemStatus, type StoreCounts, type SystemStatus } from "./services/notifier.js";
import { Store } from "./store/db.js";
import { createNodeAccountStatements } from "./store/node-client-state.repository.js";
import { findDetectTarget } from "./store/nodes.repository.js";

/** Parts a test (or another entry point) replaces; everything else is built from settings. */
export interface ContextOverrides {
  /** Defaults to the system clock; tests pass a `ManualClock`. */
  clock?: Clock;
  /** Overrides `{dataDir}/svc.db`. */
  dbFile?: string;
  /** SSE hub options (tests: buffer sizes, clock sync interval). */
  hub?: Partial<Omit<EventHubOptions, "clock" | "log">>;
  /** Replaces the adapter factory of a broker kind (SVC_MQTT_BROKER). */
  brokerAdapters?: Partial<BrokerAdapterFactories>;
  /** The built web console to serve; default `dist/web` of this installation (issue 12). */
  consoleDir?: string;
  /**
   * false: the store worker (src/store/store-worker.ts) does not start when the WAL grows, only
   * with the first large write. For tests that measure the process's CPU time, which counts
   * every thread's.
   */
  storeWorker?: boolean;
}

/** Every long-lived part of the service, each built once with what it needs. */
export interface AppContext extends ActorParts {
  settings: Settings;
  clock: Clock;
  store: Store;
  events: AppEvents;
  mqtt: BrokerConnection;
  hub: EventHub;
  auth: AuthService;
  mesh: MeshService;
  downloads: DownloadsService;
  mqttSettings: MqttSettingsService;
  control: ControlService;
  notifier: Notifier;
  metrics: ServiceMetrics;
  detect: DetectScheduler;
  artifacts: ArtifactsService;
  backups: BackupsService;
  app: App;
  /** The admin password generated at this start (first start without SVC_ADMIN_PASSWORD), else null. */
  generatedAdminPassword: string | null;
  systemStatus(): Promise<SystemStatus>;
  /** Closes what was started, newest first. */
  lifecycle: Lifecycle;
}

/**
 * The composition root: builds the {@link AppContext} once, in dependency order — settings →
 * store → app events and the (unstarted) broker connection → registry and command tracker → SSE
 * hub → services → start (actors, then MQTT through the adapter factory keyed by
 * SVC_MQTT_BROKER) → HTTP app. Nothing is bound late: the registry and the tracker emit on
 * {@link AppEvents}, which the services subscribe to once built (docs/decisions.md "Issue 11:
 * composition root"). On failure every part started so far is closed and the error rethrown.
 * @throws Error when the database cannot be opened or migrated, or the broker cannot start
 */
export async function createAppContext(settings: Settings, log: Logger, overrides: ContextOverrides = {}): Promise<AppContext> {
  const clock = overrides.clock ?? systemClock;
  const lifecycle = new Lifecycle(log);
  const store = await Store.open(overrides.dbFile ?? join(settings.dataDir, "svc.db"), log.child({ name: "store" }));
  lifecycle.defer(() => store.close());
  try {
    const auth = new AuthService({ store, clock, sessionTtlMs: settings.adminSessionTtlMs });
    const generatedAdminPassword = await auth.ensureAdminPassword(settings.adminPassword);
    const mesh = new MeshService({ store, clock, mqttEnabled: settings.mqttEnabled, log });
    lifecycle.defer(() => mesh.settled()); // a large write's after-commit rendering ends before the store closes
    if (overrides.storeWorker !== false) store.worker()?.startWhenWalGrows(); // renders large writes, checkpoints the WAL
    const downloads = new DownloadsService({ store, clock, tokenTtlMs: settings.downloadTokenTtlMs });
    const backendPassword = settings.mqttBackendPassword ?? (await storedSecret(store, clock, "mqtt_backend_password"));
    const authzKey = settings.brokerAuthzSharedKey ?? (await storedSecret(store, clock, "broker_authz_shared_key"));
    // Sealed broker passwords (docs/decisions.md "Broker passwords (the sealed copy)"): the key file is created at the first bind.
    const vault = new BrokerPasswordVault(settings.dataDir, log.child({ name: "broker-sync" }));
    const accounts = createNodeAccountStatements(store.sqlite);
    const events = new AppEvents();
    const factories = { ...brokerAdapterFactories, ...overrides.brokerAdapters };
    const mqtt = new BrokerConnection({ settings, log, store, accounts, vault, backendPassword, events, factories });
    const actors = createActorParts({ settings, log, clock, store, events, mqtt });
    const { registry, commands, eventLog, controlLogRetention, timelineRetention, router } = actors;

    const brokerConnected = () => mqtt.connected();
    const status = (counts?: StoreCounts) => systemStatus({ store, registry, mqttEnabled: settings.mqttEnabled, broker: settings.mqttBroker, brokerConnected, releaseDownloadUrl: settings.releaseDownloadUrl }, counts);
    const hub = new EventHub({ clock, log: log.child({ name: "events" }), systemStatus: status, ...overrides.hub });
    auth.onSessionRevoked((key) => hub.endSession(key)); // a console stream ends with its admin session (spec §5).
    const mqttSettings = await MqttSettingsService.load({
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
        public_port: settings.mqttPublicPort ?? mqtt.broker?.port ?? settings.embeddedBrokerPort,
        public_tls_port: settings.mqttPublicTlsPort ?? mqtt.broker?.tlsPort ?? settings.embeddedBrokerTlsPort,
      }),
    });
    const control = new ControlService({
      store,
      clock,
      log: log.child({ name: "control" }),
      registry,
      commands,
      mqttEnabled: settings.mqttEnabled,
      publicUrl: settings.publicUrl,
      bindTokenTtlMs: settings.bindTokenTtlMs,
      configPushDebounceMs: settings.configPushDebounceMs,
      brokerEndpoint: () => brokerEndpoint(settings, mqttSettings.current(), mqtt.profileCa),
      sealBrokerPassword: sealWithVault(vault, log),
      brokerAccountBound: (account) => mqtt.putNode(account),
    });
    const notifier = new Notifier({ hub, mesh, control, status, countsOffThread: () => storeCountsOffThread(store), clock, log: log.child({ name: "notifier" }) });
    const metrics = new ServiceMetrics({
      mqttEnabled: settings.mqttEnabled,
      nodes: () => registry.projections(),
      received: () => router.received,
      published: () => commands.published,
      dropped: () => router.dropped,
      hub: () => hub.metrics(),
      brokerConnected,
    });
    const detect = new DetectScheduler({
      registry,
      clock,
      log: log.child({ name: "detect" }),
      intervalMs: settings.detectIntervalMs,
      sendDetect: async (configId, nodeId) => {
        const node = await findDetectTarget(store.db, nodeId);
        if (!node) return;
        await registry.send(configId, nodeId, { type: "detect.sent", at: clock.now() });
        await commands.send({ configId, nodeId, kind: "detect", action: "detect", payload: { tunnel_protocol: node.tunnel_protocol, interface_name: node.interface_name } });
      },
    });
    hub.onSubscribersChanged((count) => detect.setActive(settings.mqttEnabled && count > 0));
    events.on("node.config_push_requested", (configId, nodeId) => control.schedulePush(configId, nodeId));
    events.on("node.status_changed", (configId, nodeId, projection) => notifier.endpointStatus(configId, nodeId, projection));
    events.on("control.log", (change, row) => notifier.controlLog(change, row));
    events.on("command.finished", (action, final) => metrics.commandFinished(action, final));
    events.on("broker.connection_changed", () => notifier.systemStatusChanged());
    events.on("mesh.changed", (change) => notifier.meshChanged(change));
    mesh.setHooks({ afterCommit: meshAfterCommit({ clock, registry, mqtt, events }) });

    await registry.start().then(() => mesh.resumeRendering()); // dynamic nodes a stopped run left unrendered
    lifecycle.defer(() => registry.stop());
    commands.start();
    lifecycle.defer(() => commands.stop());
    lifecycle.defer(() => eventLog.close());
    controlLogRetention.start();
    lifecycle.defer(() => controlLogRetention.stop());
    timelineRetention.start();
    lifecycle.defer(() => timelineRetention.stop());
    if (settings.mqttEnabled) {
      const onMessage = (topic: string, payload: Buffer) => router.handle(topic, payload);
      await mqtt.start({ publicHost: mqttSettings.current().public_host, onMessage, defer: (close) => lifecycle.defer(close) });
    }

    const artifacts = new ArtifactsService({ settings, store, clock, log: log.child({ name: "artifacts" }), downloads });
    const backups = new BackupsService({ settings, store, clock, log: log.child({ name: "backups" }), downloads, mesh, registry, hub, status: countedAfresh(notifier, status) });
    const internalAuthz = { sharedKey: () => authzKey, resolve: (username: string) => resolveIdentity(accounts, settings, username) };
    const { detectTimeoutMs, bindTokenTtlMs, onlineTtlMs, timelineMaxPerNode } = settings;
    const machines = new MachinesService({ store, registry, detectTimeoutMs, bindTokenTtlMs, onlineTtlMs, timelineMaxPerNode });
    const app = await buildApp({ settings, log, clock, auth, mesh, downloads, control, hub, status, internalAuthz, artifacts, backups, metrics, mqttSettings, machines, ...(overrides.consoleDir === undefined ? {} : { consoleDir: overrides.consoleDir }) });
    lifecycle.defer(async () => {
      // First: detects in flight finish while the store, the actors and the broker link are open.
      await detect.stop();
      control.stop();
      await app.close();
      await hub.close();
    });
    return { settings, clock, store, events, mqtt, ...actors, hub, auth, mesh, downloads, mqttSettings, control, notifier, metrics, detect, artifacts, backups, app, generatedAdminPassword, systemStatus: status, lifecycle };
  } catch (err) {
    await lifecycle.close();
    throw err;
  }
}
