import { join } from "node:path";
import { CommandTracker } from "./actors/commands.js";
import { NodeActorRegistry } from "./actors/registry.js";
import type { Settings } from "./config.js";
import { EventHub, type EventHubOptions } from "./events/hub.js";
import { buildApp, type App } from "./http/app.js";
import { systemClock, type Clock } from "./lib/clock.js";
import { Lifecycle } from "./lib/lifecycle.js";
import { currentRoute } from "./lib/request-route.js";
import type { Logger } from "./logger.js";
import { brokerAdapterFactories, BrokerConnection, resolveIdentity, type BrokerAdapterFactories } from "./mqtt/broker-connection.js";
import { BrokerPasswordVault, sealWithVault } from "./mqtt/broker-passwords.js";
import { DetectScheduler } from "./mqtt/detect-scheduler.js";
import { OutageResync } from "./mqtt/outage-resync.js";
import { EventLog } from "./mqtt/event-log.js";
import { MqttRouter } from "./mqtt/router.js";
import { AppEvents } from "./services/app-events.js";
import { AlertsService, type AlertsServiceDeps } from "./services/alerts/alerts.service.js";
import { LinksService } from "./services/links.service.js";
import { AlertRuleEngine } from "./services/alerts/rule-engine.js";
import { AlertRulesService } from "./services/alerts/rules.service.js";
import { ArtifactsService } from "./services/artifacts.service.js";
import { AccessTokensService } from "./services/access-tokens.service.js";
import { UsersService } from "./services/users.service.js";
import { AuthService } from "./services/auth.service.js";
import { OidcService } from "./services/oidc.service.js";
import { BackupsService } from "./services/backups.service.js";
import { ControlLogRetention } from "./services/control-log-retention.js";
import { AuditService } from "./services/audit.service.js";
import { ControlService } from "./services/control.service.js";
import { DownloadsService } from "./services/downloads.service.js";
import { MachinesService } from "./services/machines.service.js";
import { MeshService, type MeshHooks } from "./services/mesh.service.js";
import { ServiceMetrics } from "./services/metrics.js";
import { MqttSettingsService, storedSecret } from "./services/mqtt-settings.service.js";
import { PublicUrlService } from "./services/public-url.service.js";
import { countedAfresh, Notifier, storeCountsOffThread, systemStatus, type StoreCounts, type SystemStatus } from "./services/notifier.js";
import { Store } from "./store/db.js";
import { createNodeAccountStatements } from "./store/node-client-state.repository.js";
import { deleteNodeTransitionsBelow, timelineSlack, transitionCutoff } from "./store/node-transitions.repository.js";
import { findDetectTarget } from "./store/nodes.repository.js";

/*
 * The composition root. `createServer` builds every long-lived part once, in dependency order,
 * each given what it needs through its constructor:
 *
 *   settings → store → app events → admin account, download tokens → broker link (unopened)
 *   → alert rule engine (it writes inside the actors' commits) → actors → mesh service (its
 *   after-commit hooks) → SSE hub, MQTT settings, control, notifier, metrics, detect → start
 *   (actors, then the broker link, then the rule engine's timers) → artifacts, backups,
 *   machines, alerts and alert rules → HTTP app
 *
 * Nothing is assigned later. The actors, the broker link and the mesh service report what
 * committed on {@link AppEvents}; the services that react (notifier, control, metrics) subscribe
 * to it in their constructors. Shutdown runs the registered close steps newest first.
 */

/** Parts a test (or another entry point) replaces; everything else is built from settings. */
export interface ServerOverrides {
  /** Defaults to the system clock; tests pass a `ManualClock`. */
  clock?: Clock;
  /** Overrides `{dataDir}/svc.db`. */
  dbFile?: string;
  /** SSE hub options (tests: buffer sizes, clock sync interval). */
  hub?: Partial<Omit<EventHubOptions, "clock" | "log">>;
  /** Replaces the adapter factory of a broker kind (SVC_MQTT_BROKER). */
  brokerAdapters?: Partial<BrokerAdapterFactories>;
  /** The built web console to serve; default `dist/web` of this installation. */
  consoleDir?: string;
  /**
   * false: the store worker (src/store/store-worker.ts) does not start when the WAL grows, only
   * with the first large write. For tests that measure the process's CPU time, which counts
   * every thread's.
   */
  storeWorker?: boolean;
  /** The alert delivery worker's seams: host-name lookup, per-attempt timeout, jitter source. */
  alerts?: Pick<AlertsServiceDeps, "lookup" | "timeoutMs" | "random">;
  /** How long a link refresh waits for the hosts it asked, ms (docs/links.md). */
  linkRefreshTimeoutMs?: number;
}

/** The actor system and the MQTT ingest path: what the services are built on. */
export interface ActorParts {
  registry: NodeActorRegistry;
  commands: CommandTracker;
  /** Stores client events as control logs (spec §6.4 rule 9). */
  eventLog: EventLog;
  /** Keeps the newest SVC_CONTROL_LOG_RETENTION control logs per node (spec §6.4 rule 9). */
  controlLogRetention: ControlLogRetention;
  /** Keeps each node's newest SVC_TIMELINE_MAX_PER_NODE flight-recorder rows (`node_transitions`). */
  timelineRetention: ControlLogRetention;
  router: MqttRouter;
}

/** The assembled service: every long-lived part, built once. `main.ts` and tests use it alike. */
export interface AppContext extends ActorParts {
  settings: Settings;
  clock: Clock;
  store: Store;
  events: AppEvents;
  /** The backend's side of MQTT: `mqtt.broker` is the embedded broker, `mqtt.sync` the account sync (null with MQTT off). */
  mqtt: BrokerConnection;
  hub: EventHub;
  auth: AuthService;
  /** Users and roles (README "Users, roles and tokens"). */
  users: UsersService;
  /** Personal access tokens. */
  accessTokens: AccessTokensService;
  mesh: MeshService;
  downloads: DownloadsService;
  /** MQTT settings: what bind profiles tell agents (DESIGN §5 settings/mqtt). */
  mqttSettings: MqttSettingsService;
  /** The public URL hosts are told now (SVC_PUBLIC_URL, else the one set in Settings, else the default). */
  publicUrl: PublicUrlService;
  control: ControlService;
  notifier: Notifier;
  /** `GET /metrics` families. */
  metrics: ServiceMetrics;
  detect: DetectScheduler;
  artifacts: ArtifactsService;
  backups: BackupsService;
  machines: MachinesService;
  /** The hash-chained audit log (README "Audit log"). */
  audit: AuditService;
  /** Alert channels, the outbox and its delivery worker (docs/alerts.md). */
  alerts: AlertsService;
  /** Measured link health: peer reports, the link matrix, drift (docs/links.md). */
  links: LinksService;
  /** Alert rules' CRUD (docs/alerts.md "Rules"). */
  alertRules: AlertRulesService;
  /** The rule engine: state changes into alerts, in the change's transaction. */
  alertEngine: AlertRuleEngine;
  app: App;
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
 * Group commits at most this often under load, ms (`RegistryDeps.commitPaceMs`). Measured with
 * `scripts/bench/ingest.ts --only latency` at 2,000 state changes/s: 3 ms took the service's CPU
 * per message from ~445 to ~345 µs and the p99 of quiet windows to ~5.6 ms; 8 ms cut CPU a
 * little more but put 5 ms on every p50.
 */
const GROUP_COMMIT_PACE_MS = 3;

/**
 * Builds the service from settings (see the top of this file for the order). With MQTT services
 * enabled it starts the broker adapter and connects the backend; with them disabled no broker
 * connection is ever opened (spec §1.7). On failure every part started so far is closed and the
 * error rethrown.
 * @param overrides parts to replace: clock, database file, SSE hub options, broker adapter factories
 * @throws Error when the database cannot be opened or migrated, or the broker cannot start
 */
export async function createServer(settings: Settings, log: Logger, overrides: ServerOverrides = {}): Promise<AppContext> {
  const clock = overrides.clock ?? systemClock;
  const lifecycle = new Lifecycle(log);
  const store = await Store.open(overrides.dbFile ?? join(settings.dataDir, "svc.db"), log.child({ name: "store" }));
  lifecycle.defer(() => store.close());
  try {
    if (overrides.storeWorker !== false) store.worker()?.startWhenWalGrows(); // renders large writes, checkpoints the WAL
    const events = new AppEvents();
    const core: Core = { settings, log, clock, store, events };
    const auth = new AuthService({ store, clock, sessionTtlMs: settings.adminSessionTtlMs, passwordScryptN: settings.passwordScryptN });
    const generatedAdminPassword = await auth.ensureAdminPassword(settings.adminPassword);
    const users = new UsersService({ store, clock, auth, passwordScryptN: settings.passwordScryptN });
    const accessTokens = new AccessTokensService({ store, clock, auth });
    const downloads = new DownloadsService({ store, clock, tokenTtlMs: settings.downloadTokenTtlMs, events });
    const { mqtt, vault, accounts, authzKey } = await createBrokerLink(core, overrides.brokerAdapters);
    const alertEngine = new AlertRuleEngine({ store, clock, log: log.child({ name: "alerts" }), events, groupWindowMs: settings.alertsGroupWindowMs, brokerConnected: () => mqtt.connected() });
    const actors = createActorParts({ ...core, mqtt, alertEngine });
    const { registry } = actors;
    const mesh = new MeshService({ store, clock, mqttEnabled: settings.mqttEnabled, log, hooks: { ...meshAfterCommit({ clock, registry, mqtt, events }), inCommit: (change) => alertEngine.meshWritten(change) } });
    lifecycle.defer(() => mesh.settled()); // a large write's after-commit rendering ends before the store closes
    const live = await createLiveServices({ ...core, ...actors, mqtt, vault, auth, mesh, hubOptions: overrides.hub });
    const { hub, status, mqttSettings, publicUrl, control, notifier, metrics, detect } = live;
    await start({ ...core, ...actors, mqtt, mesh, mqttSettings, lifecycle });
    // Stopped before the broker link closes: a shutdown is no broker outage.
    lifecycle.defer(() => alertEngine.stop());
    alertEngine.start();

    const artifacts = new ArtifactsService({ settings, store, clock, log: log.child({ name: "artifacts" }), downloads, publicUrl: () => publicUrl.current() });
    const backups = new BackupsService({ settings, store, clock, log: log.child({ name: "backups" }), downloads, mesh, registry, hub, status: countedAfresh(notifier, status), inRestore: () => alertEngine.restored() });
    const { detectTimeoutMs, bindTokenTtlMs, onlineTtlMs, timelineMaxPerNode } = settings;
    const machines = new MachinesService({ store, registry, detectTimeoutMs, bindTokenTtlMs, onlineTtlMs, timelineMaxPerNode });
    const internalAuthz = { sharedKey: () => authzKey, resolve: (username: string) => resolveIdentity(accounts, settings, username) };
    const alerts = new AlertsService({ store, clock, log: log.child({ name: "alerts" }), hub, events, vault, metrics: metrics.registry, settings, rules: alertEngine, ...overrides.alerts });
    const alertRules = new AlertRulesService({ store, clock, hub, engine: alertEngine });
    const consoleDir = overrides.consoleDir === undefined ? {} : { consoleDir: overrides.consoleDir };
    const oidc = new OidcService({ settings: settings.oidc, store, clock, auth, publicUrl: () => publicUrl.current(), log: log.child({ name: "oidc" }) });
    const audit = new AuditService({ store, clock, log: log.child({ name: "audit" }), hub, retentionDays: settings.auditRetentionDays, events });
    lifecycle.defer(() => audit.close()); // after HTTP closed: the last requests' entries are written
    audit.start();
    const links = new LinksService({ store, clock, log: log.child({ name: "links" }), hub, mesh, registry, sendDetect: detectSender({ ...core, ...actors }), ...(overrides.linkRefreshTimeoutMs === undefined ? {} : { refreshTimeoutMs: overrides.linkRefreshTimeoutMs }) });
    actors.router.peerReports = links;
    const app = await buildApp({ settings, log, clock, auth, mesh, downloads, control, hub, status, internalAuthz, artifacts, backups, metrics, mqttSettings, publicUrl, machines, users, accessTokens, oidc, audit, alerts, links, alertRules, ...consoleDir });
    lifecycle.defer(async () => {
      // First: detects in flight finish while the store, the actors and the broker link are open.
      await detect.stop();
      control.stop();
      await app.close();
      await hub.close();
    });
    // Closed before HTTP: a channel test waiting for its attempt answers at once (the attempt is
    // left unrecorded and sent again at the next start).
    lifecycle.defer(() => alerts.stop());
    alerts.start();
    const services = { auth, users, accessTokens, mesh, downloads, mqttSettings, publicUrl, control, notifier, metrics, detect, artifacts, backups, machines, audit, alerts, links, alertRules, alertEngine };
    return { ...core, ...actors, mqtt, hub, ...services, app, generatedAdminPassword, systemStatus: status, close: () => lifecycle.close() };
  } catch (err) {
    await lifecycle.close();
    throw err;
  }
}

/** What every stage below is built from. */
interface Core {
  settings: Settings;
  log: Logger;
  clock: Clock;
  store: Store;
  events: AppEvents;
}

/**
 * The backend's broker link, built unopened (the actors publish through it and cut sessions
 * with it before it starts), with the secrets it needs: the backend's broker password and the
 * authz endpoint's shared key come from the environment or are generated once and stored.
 * Sealed broker passwords: the vault's key file is created at the first bind.
 */
async function createBrokerLink(core: Core, adapters: Partial<BrokerAdapterFactories> | undefined) {
  const { settings, log, clock, store, events } = core;
  const backendPassword = settings.mqttBackendPassword ?? (await storedSecret(store, clock, "mqtt_backend_password"));
  const authzKey = settings.brokerAuthzSharedKey ?? (await storedSecret(store, clock, "broker_authz_shared_key"));
  const vault = new BrokerPasswordVault(settings.dataDir, log.child({ name: "broker-sync" }));
  const accounts = createNodeAccountStatements(store);
  const mqtt = new BrokerConnection({
    settings,
    log,
    store,
    accounts,
    vault,
    backendPassword,
    onConnectionChanged: () => events.emit("broker.connection_changed"),
    factories: { ...brokerAdapterFactories, ...adapters },
  });
  return { mqtt, vault, accounts, authzKey };
}

/**
 * The registry, the command tracker, the client-event log, control-log and flight-recorder
 * retention and the router (not started). What they report after a commit goes out on
 * `events`; broker effects go to `mqtt`, which exists (unopened) before them.
 */
function createActorParts(deps: Core & { mqtt: BrokerConnection; alertEngine: AlertRuleEngine }): ActorParts {
  const { settings, log, clock, store, events, mqtt, alertEngine } = deps;
  const timelineRetention = new ControlLogRetention({
    store,
    clock,
    log: log.child({ name: "timeline-retention" }),
    keep: settings.timelineMaxPerNode,
    rows: { table: "node_transitions", cutoff: transitionCutoff, deleteBelow: deleteNodeTransitionsBelow },
  });
  const registry = createRegistry(deps, timelineRetention);
  const controlLogRetention = new ControlLogRetention({ store, clock, log: log.child({ name: "retention" }), keep: settings.controlLogRetention });
  const commands = new CommandTracker({
    store,
    clock,
    log: log.child({ name: "commands" }),
    timeoutMs: settings.commandTimeoutMs,
    detectTimeoutMs: settings.detectTimeoutMs,
    publish: (topic, envelope) => mqtt.publish(topic, envelope),
    onLog: (change, row) => {
      events.emit("control.log", change, row);
      if (change === "created") controlLogRetention.noteInsert(row.node_id);
    },
    onTimeout: () => undefined, // detects: the node machine runs its own timeout
    // spec §3.1, §6.4 rule 8: a detect the broker did not take has failed now, not at its
    // timeout (the tracker has logged it with the node; the machine may drop the node).
    onPublishFailed: (command) => {
      if (command.kind === "detect") registry.post(command.configId, command.nodeId, { type: "detect.failed", at: clock.now() });
    },
    onFinal: (command, final) => events.emit("command.finished", command.action, final),
    // A push, start or stop that failed or timed out: the command.failed rules' alerts commit with it.
    inFinalWrite: (command, final, message) =>
      final === "failed" || final === "timed_out"
        ? alertEngine.commandFinished({ configId: command.configId, nodeId: command.nodeId, action: command.action, requestId: command.requestId, status: final, message })
        : undefined,
  });
  const eventLog = new EventLog({
    store,
    log: log.child({ name: "events-log" }),
    onStored: (row) => {
      events.emit("control.log", "created", row);
      controlLogRetention.noteInsert(row.node_id);
    },
  });
  const router = new MqttRouter({ registry, commands, clock, log: log.child({ name: "mqtt" }), events: eventLog });
  return { registry, commands, eventLog, controlLogRetention, timelineRetention, router };
}

/** The node actor registry: its effects on the broker and the app events, its flight recorder's retention, the alert rules in its commits. */
function createRegistry(deps: Core & { mqtt: BrokerConnection; alertEngine: AlertRuleEngine }, timelineRetention: ControlLogRetention): NodeActorRegistry {
  const { settings, log, clock, store, events, mqtt, alertEngine } = deps;
  return new NodeActorRegistry({
    store,
    clock,
    log: log.child({ name: "actors" }),
    onlineTtlMs: settings.onlineTtlMs,
    detectTimeoutMs: settings.detectTimeoutMs,
    // spec §1.7: with MQTT off, time changes nothing stored for dynamic nodes.
    timersEnabled: settings.mqttEnabled,
    effects: {
      // Reset and dynamic → static: the broker account goes and the live client is cut (spec §3.1, §4 rule 12).
      revokeClient: (configId, nodeId) => mqtt.removeNode(configId, nodeId),
      requestConfigPush: (configId, nodeId) => events.emit("node.config_push_requested", configId, nodeId),
    },
    onStatusChanged: (configId, nodeId, projection) => events.emit("node.status_changed", configId, nodeId, projection),
    inCommit: (changes) => alertEngine.nodeChanges(changes),
    currentRoute,
    commitPaceMs: GROUP_COMMIT_PACE_MS,
    // The registry marks every timelineSlack(cap)-th row of a node and hands retention the
    // cut-off: no chain walk per commit or per check.
    timelineRetention: {
      keep: settings.timelineMaxPerNode,
      slack: timelineSlack(settings.timelineMaxPerNode),
      prune: (nodeId, cutoff) => timelineRetention.noteCutoff(nodeId, cutoff),
    },
  });
}

/**
 * After a committed mesh write: deleted nodes leave the registry and the broker (their
 * credentials went with the row; a live session goes too), created nodes join it, mode changes
 * and staged configs reach their actors, and the change goes out on `events` (spec §6.5).
 */
function meshAfterCommit(deps: { clock: Clock; registry: NodeActorRegistry; mqtt: BrokerConnection; events: AppEvents }): MeshHooks {
  const { clock, registry, mqtt, events } = deps;
  return {
    afterCommit: (change) => {
      const at = clock.now();
      const settled: Array<Promise<void>> = [];
      for (const id of change.deleted) {
        registry.remove(change.configId, id);
        mqtt.removeNode(change.configId, id);
      }
      for (const row of change.created) settled.push(registry.add({ ...row, machine_snapshot: null, machine_version: null }));
      for (const m of change.modeChanged) settled.push(registry.send(change.configId, m.nodeId, { type: "node.mode_changed", at, mode: m.mode }));
      for (const s of change.staged) {
        settled.push(registry.send(change.configId, s.nodeId, { type: "config.staged", at, version: s.version, sha: s.sha }));
      }
      events.emit("mesh.changed", change);
      return Promise.all(settled);
    },
  };
}

/**
 * The services that serve live state: the SSE hub (a console stream ends with its admin session,
 * spec §5), MQTT settings, control, the notifier, metrics and the detect scheduler (probing
 * while the console has subscribers). Control, the notifier and metrics subscribe to `events`
 * themselves.
 */
async function createLiveServices(deps: Core & ActorParts & {
  mqtt: BrokerConnection;
  vault: BrokerPasswordVault;
  auth: AuthService;
  mesh: MeshService;
  hubOptions: ServerOverrides["hub"];
}) {
  const { settings, log, clock, store, events, registry, commands, router, mqtt } = deps;
  const brokerConnected = () => mqtt.connected();
  const { mqttEnabled, mqttBroker, releaseDownloadUrl } = settings;
  const status = (counts?: StoreCounts) => systemStatus({ store, registry, mqttEnabled, broker: mqttBroker, brokerConnected, releaseDownloadUrl }, counts);
  const hub = new EventHub({ clock, log: log.child({ name: "events" }), systemStatus: status, ...deps.hubOptions });
  deps.auth.onSessionRevoked((key) => hub.endSession(key));
  const environmentUrl = { environmentUrl: settings.publicUrl, environmentSource: settings.publicUrlSource };
  const publicUrl = await PublicUrlService.load({ store, clock, hub, log: log.child({ name: "settings" }), ...environmentUrl });
  const mqttSettings = await MqttSettingsService.load({
    store,
    clock,
    hub,
    log: log.child({ name: "settings" }),
    mqttEnabled,
    broker: mqttBroker,
    backendUsername: settings.mqttBackendUsername,
    tlsEnabled: () => settings.mqttTlsEnabled,
    brokerConnected,
    defaults: () => ({
      // Without SVC_MQTT_PUBLIC_HOST agents reach the broker on the public URL's host, as it is now.
      public_host: settings.mqttPublicHostFromUrl ? new URL(publicUrl.current()).hostname.replace(/^\[(.*)\]$/, "$1") : settings.mqttPublicHost,
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
    events,
    mqttEnabled,
    publicUrl: () => publicUrl.current(),
    bindTokenTtlMs: settings.bindTokenTtlMs,
    configPushDebounceMs: settings.configPushDebounceMs,
    brokerEndpoint: () => mqttSettings.brokerEndpoint(mqtt.profileCa),
    sealBrokerPassword: sealWithVault(deps.vault, log),
    brokerAccountBound: (account) => mqtt.putNode(account),
  });
  const countsOffThread = () => storeCountsOffThread(store);
  const notifier = new Notifier({ events, hub, mesh: deps.mesh, control, status, countsOffThread, clock, log: log.child({ name: "notifier" }) });
  const hubMetrics = () => hub.metrics();
  const metrics = new ServiceMetrics({ mqttEnabled, nodes: () => registry.projections(), received: () => router.received, published: () => commands.published, dropped: () => router.dropped, hub: hubMetrics, brokerConnected, events });
  const detect = createDetect(deps);
  hub.onSubscribersChanged((count) => detect.setActive(mqttEnabled && count > 0));
  const resync = new OutageResync({ connected: brokerConnected, clock, log: log.child({ name: "presence" }), registry, detect });
  events.on("broker.connection_changed", () => resync.linkChanged());
  return { hub, status, mqttSettings, publicUrl, control, notifier, metrics, detect };
}

/** The detect scheduler (spec §3.2): a detect is recorded with the node's actor, then sent as a command. */
function createDetect(deps: Core & Pick<ActorParts, "registry" | "commands">): DetectScheduler {
  const { settings, log, clock, registry } = deps;
  return new DetectScheduler({ registry, clock, log: log.child({ name: "detect" }), intervalMs: settings.detectIntervalMs, sendDetect: detectSender(deps) });
}

/** Sends one detect to a node: recorded with its actor, then a command (the scheduler's probes and the link refresh alike). */
function detectSender(deps: Core & Pick<ActorParts, "registry" | "commands">): (configId: string, nodeId: string) => Promise<void> {
  const { clock, store, registry, commands } = deps;
  return async (configId, nodeId) => {
    const node = await findDetectTarget(store.db, nodeId);
    if (!node) return;
    await registry.send(configId, nodeId, { type: "detect.sent", at: clock.now() });
    await commands.send({ configId, nodeId, kind: "detect", action: "detect", payload: { tunnel_protocol: node.tunnel_protocol, interface_name: node.interface_name } });
  };
}

/**
 * Starts what runs on its own, each close registered as it starts: the actors (then the mesh
 * service renders the dynamic nodes a stopped run left unrendered), the command tracker's
 * re-armed timeouts, the retention sweeps, and last, with MQTT services enabled, the broker link
 * (its messages go to the router, whose actors now exist).
 */
async function start(deps: Core & ActorParts & { mqtt: BrokerConnection; mesh: MeshService; mqttSettings: MqttSettingsService; lifecycle: Lifecycle }): Promise<void> {
  const { settings, registry, commands, eventLog, controlLogRetention, timelineRetention, router, mqtt, lifecycle } = deps;
  await registry.start().then(() => deps.mesh.resumeRendering());
  lifecycle.defer(() => registry.stop());
  commands.start();
  lifecycle.defer(() => commands.stop());
  lifecycle.defer(() => eventLog.close());
  controlLogRetention.start();
  lifecycle.defer(() => controlLogRetention.stop());
  timelineRetention.start();
  lifecycle.defer(() => timelineRetention.stop());
  if (!settings.mqttEnabled) return;
  const onMessage = (topic: string, payload: Buffer) => router.handle(topic, payload);
  await mqtt.start({ publicHost: deps.mqttSettings.current().public_host, onMessage, defer: (close) => lifecycle.defer(close) });
}
