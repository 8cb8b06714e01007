import type { CommandTracker } from "./actors/commands.js";
import type { NodeActorRegistry } from "./actors/registry.js";
import type { Settings } from "./config.js";
import { createAppContext, type AppContext, type ContextOverrides } from "./context.js";
import type { EventHub } from "./events/hub.js";
import type { App } from "./http/app.js";
import type { Logger } from "./logger.js";
import type { BrokerSync } from "./mqtt/broker-sync.js";
import type { DetectScheduler } from "./mqtt/detect-scheduler.js";
import type { EmbeddedBrokerHandle } from "./mqtt/embedded-broker.js";
import type { EventLog } from "./mqtt/event-log.js";
import type { MqttRouter } from "./mqtt/router.js";
import type { ArtifactsService } from "./services/artifacts.service.js";
import type { AuthService } from "./services/auth.service.js";
import type { BackupsService } from "./services/backups.service.js";
import type { ControlLogRetention } from "./services/control-log-retention.js";
import type { ControlService } from "./services/control.service.js";
import type { DownloadsService } from "./services/downloads.service.js";
import type { MeshService } from "./services/mesh.service.js";
import type { ServiceMetrics } from "./services/metrics.js";
import type { MqttSettingsService } from "./services/mqtt-settings.service.js";
import type { SystemStatus } from "./services/notifier.js";
import type { Store } from "./store/db.js";

/** The assembled service: the parts of the {@link AppContext} that `main.ts` and tests use. */
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
  /** Keeps the newest SVC_CONTROL_LOG_RETENTION control logs per node (spec §6.4 rule 9, docs/decisions.md). */
  controlLogRetention: ControlLogRetention;
  hub: EventHub;
  detect: DetectScheduler;
  /** `GET /metrics` families. */
  metrics: ServiceMetrics;
  /** MQTT settings: what bind profiles tell agents (DESIGN §5 settings/mqtt). */
  mqttSettings: MqttSettingsService;
  /** The embedded broker, when MQTT services are enabled with SVC_MQTT_BROKER=embedded. */
  broker: EmbeddedBrokerHandle | null;
  /** Keeps the broker's accounts in line with the store, when MQTT services are enabled. */
  brokerSync: BrokerSync | null;
  /** The admin password generated at this start (first start without SVC_ADMIN_PASSWORD), else null. */
  generatedAdminPassword: string | null;
  systemStatus(): Promise<SystemStatus>;
  /** The whole composition root, for tests that replace or reach a part not listed above. */
  context: AppContext;
  /**
   * Stops probing and waits for detects in flight (at most 5 s on the clock), then closes HTTP
   * (ending SSE streams), MQTT, the actors, then the store.
   */
  close(): Promise<void>;
}

/**
 * Builds every long-lived part from settings (see {@link createAppContext}). Used by `main.ts`
 * and by tests (with a {@link ManualClock} and a temp data directory). With MQTT services enabled
 * it starts the broker adapter and connects the backend; with them disabled no broker connection
 * is ever opened (spec §1.7).
 * @param overrides parts to replace: clock, database file, SSE hub options, broker adapter factories
 * @throws Error when the database cannot be opened or migrated, or the broker cannot start
 */
export async function createServer(settings: Settings, log: Logger, overrides: ContextOverrides = {}): Promise<Server> {
  const ctx = await createAppContext(settings, log, overrides);
  return {
    app: ctx.app,
    store: ctx.store,
    auth: ctx.auth,
    mesh: ctx.mesh,
    downloads: ctx.downloads,
    artifacts: ctx.artifacts,
    backups: ctx.backups,
    control: ctx.control,
    registry: ctx.registry,
    commands: ctx.commands,
    router: ctx.router,
    eventLog: ctx.eventLog,
    controlLogRetention: ctx.controlLogRetention,
    hub: ctx.hub,
    detect: ctx.detect,
    metrics: ctx.metrics,
    mqttSettings: ctx.mqttSettings,
    broker: ctx.mqtt.broker,
    brokerSync: ctx.mqtt.sync,
    generatedAdminPassword: ctx.generatedAdminPassword,
    systemStatus: ctx.systemStatus,
    context: ctx,
    close: () => ctx.lifecycle.close(),
  };
}
