import { randomBytes } from "node:crypto";
import type { NodeActorRegistry } from "./actors/registry.js";
import type { AppEvents } from "./app-events.js";
import type { BrokerConnection } from "./broker-factory.js";
import type { Clock } from "./clock.js";
import type { Settings } from "./config.js";
import type { Logger } from "./logger.js";
import type { BrokerPasswordVault } from "./mqtt/broker-passwords.js";
import type { BrokerEndpoint } from "./services/control.service.js";
import type { MeshHooks } from "./services/mesh.service.js";
import type { Notifier, SystemStatus } from "./services/notifier.js";
import type { MqttPublicEndpoint } from "./services/mqtt-settings.service.js";
import type { Store } from "./store/db.js";
import { getSetting, putSetting } from "./store/settings.repository.js";
import type { StoreCounts } from "./store/summary.repository.js";

/** A secret generated once and kept in the store (DESIGN §6 "generated and stored"). */
export async function storedSecret(store: Store, clock: Clock, key: string): Promise<string> {
  const existing = await getSetting(store.db, key);
  if (existing !== undefined) return existing;
  const secret = randomBytes(32).toString("base64url");
  await putSetting(store.db, key, secret, clock.now());
  return secret;
}

/**
 * The broker endpoint bind profiles name: the operator's overrides (PUT /api/v1/settings/mqtt)
 * over the environment; with SVC_MQTT_TLS_ENABLED profiles prefer TLS and carry the CA (spec
 * §1.9, §2.6).
 */
export function brokerEndpoint(
  settings: Settings,
  endpoint: MqttPublicEndpoint,
  profileCa: string | undefined,
): BrokerEndpoint {
  if (!settings.mqttTlsEnabled) return { host: endpoint.public_host, port: endpoint.public_port, tls: false };
  return { host: endpoint.public_host, port: endpoint.public_tls_port, tls: true, ...(profileCa === undefined ? {} : { caCert: profileCa }) };
}

/** Seals a node's broker password (AES-256-GCM, docs/decisions.md); null, logged, when the vault cannot. */
export function sealWithVault(vault: BrokerPasswordVault, log: Logger): (username: string, password: string) => string | null {
  return (username, password) => {
    try {
      return vault.seal(username, password);
    } catch (err) {
      log.error({ err: (err as Error).message, username }, "broker password not sealed: an external broker cannot re-create this account later");
      return null;
    }
  };
}

/**
 * After a committed mesh write: deleted nodes leave the registry and the broker (their
 * credentials went with the row; a live session goes too), created nodes join it, mode changes
 * and staged configs reach their actors, and the change goes out on `events` (spec §6.5).
 */
export function meshAfterCommit(deps: {
  clock: Clock;
  registry: NodeActorRegistry;
  mqtt: BrokerConnection;
  events: AppEvents;
}): MeshHooks["afterCommit"] {
  const { clock, registry, mqtt, events } = deps;
  return (change) => {
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
  };
}

/**
 * The status a restore publishes: a restore replaces every config, node and pair, so the
 * notifier's remembered store counts are dropped first and the status counts them again.
 */
export function countedAfresh(notifier: Pick<Notifier, "countsChanged">, status: () => Promise<SystemStatus>): () => Promise<SystemStatus> {
  return () => {
    notifier.countsChanged();
    return status();
  };
}

/**
 * The store's counts read on the store worker's connection while its thread runs, for the
 * notifier's reports (a 1,000-node full mesh's 499,500 pairs take 15–30 ms to count); null
 * when no thread runs or it fails to answer (it exited: logged by the worker), and the status
 * then counts on the main connection. The console's opening status and `GET
 * /api/v1/system/status` count on the main connection: a worker busy with a render job's first
 * read could hold them for seconds.
 */
export async function storeCountsOffThread(store: Pick<Store, "worker">): Promise<StoreCounts | null> {
  return (await store.worker()?.counts().catch(() => null)) ?? null;
}

