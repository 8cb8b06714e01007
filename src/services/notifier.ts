import { backgroundTurn as nextTurn } from "../lib/background-turn.js";
import type { ControlLogView } from "../actors/commands.js";
import type { Clock } from "../lib/clock.js";
import type { NodeProjection } from "../actors/projection.js";
import type { NodeActorRegistry } from "../actors/registry.js";
import type { EventHub } from "../events/hub.js";
import type { Logger } from "../logger.js";
import type { SystemStatus } from "../protocol/views.schema.js";
import { VERSION } from "../lib/version.js";
import type { Store } from "../store/db.js";
import { countStore, type StoreCounts } from "../store/summary.repository.js";
import type { AppEvents } from "./app-events.js";
import type { ControlService } from "./control.service.js";
import type { MeshChange, MeshService } from "./mesh.service.js";
import type { StagedChange } from "./rendering.service.js";
import { PAIR_PAGE_LIMIT_MAX } from "../protocol/rest.schema.js";
import type { MeshPairView, NodeView } from "./views.js";

/** Default {@link Notifier} coalescing window of rendering reports, ms. */
export const DEFAULT_RENDERED_COALESCE_MS = 500;

/**
 * The SSE publishing points (spec §6.5 "Publishing points" and "Emission rules"). Every method
 * runs after the write it reports has committed (rule 6), and builds nothing while the console
 * has no subscriber (rule 5). Payloads carry the typical keys of the §6.5 table, typed by the
 * schemas of `events/event-types.ts`.
 */
export class Notifier {
  readonly #hub: Pick<EventHub, "publish" | "subscriberCount">;
  readonly #mesh: MeshService;
  readonly #control: Pick<ControlService, "endpointStatusOf">;
  readonly #status: (counts?: StoreCounts) => Promise<SystemStatus>;
  readonly #countsOffThread: () => Promise<StoreCounts | null>;
  readonly #log: Logger;
  /**
   * The store counts of the last status built from the store, while no write that can change
   * them has committed since (`#countsGen` then still matches); reports of after-commit
   * rendering reuse them instead of counting again.
   */
  #counts: { gen: number; counts: StoreCounts } | undefined;
  #countsGen = 0;
  readonly #clock: Clock;
  readonly #coalesceMs: number;
  /** Rendering reports not published yet: config_id → node_id → its latest staged (version, sha). */
  readonly #rendered = new Map<string, Map<string, StagedChange>>();
  #flushArmed = false;

  constructor(deps: {
    /**
     * The app events the notifier publishes from: `node.status_changed`, `control.log`,
     * `broker.connection_changed` and `mesh.changed`, subscribed here.
     */
    events: AppEvents;
    hub: Pick<EventHub, "publish" | "subscriberCount">;
    mesh: MeshService;
    /** Builds endpoint statuses; the notifier is built after it. */
    control: Pick<ControlService, "endpointStatusOf">;
    /** Builds the system status; with `counts`, takes them as the store's counts instead of counting. */
    status: (counts?: StoreCounts) => Promise<SystemStatus>;
    /**
     * The store's counts read off the event loop's thread (the store worker's connection), or
     * null when that cannot be done now; default: never (the status counts on the main connection).
     */
    countsOffThread?: () => Promise<StoreCounts | null>;
    log: Logger;
    /** Times the coalescing window of rendering reports. */
    clock: Clock;
    /**
     * How long (ms) reports of after-commit rendering (`MeshChange.rendered`) gather before they
     * are published together; default {@link DEFAULT_RENDERED_COALESCE_MS}.
     */
    renderedCoalesceMs?: number;
  }) {
    this.#hub = deps.hub;
    this.#mesh = deps.mesh;
    this.#control = deps.control;
    this.#status = deps.status;
    this.#countsOffThread = deps.countsOffThread ?? (() => Promise.resolve(null));
    this.#log = deps.log;
    this.#clock = deps.clock;
    this.#coalesceMs = deps.renderedCoalesceMs ?? DEFAULT_RENDERED_COALESCE_MS;
    const { events } = deps;
    events.on("node.status_changed", (configId, nodeId, projection) => this.endpointStatus(configId, nodeId, projection));
    events.on("control.log", (change, row) => this.controlLog(change, row));
    events.on("broker.connection_changed", () => this.systemStatusChanged());
    events.on("mesh.changed", (change) => this.meshChanged(change));
    events.on("node.config_downloaded", (configId, nodeId) => this.configDownloaded(configId, nodeId));
  }

  /**
   * A node's config was downloaded: `node.apply.updated` for it (its staged config as the
   * preview), so an open static node page reads its "last download" again.
   */
  configDownloaded(configId: string, nodeId: string): void {
    if (!this.#live()) return;
    this.#run(async () => {
      const node = await this.#mesh.getNode(configId, nodeId);
      const sha = node.staged_config.config_sha256;
      if (sha === null) return;
      const state = node.client.config_version_state;
      this.#hub.publish("node.apply.updated", {
        config_id: configId,
        node_id: nodeId,
        sync_status: state ?? "static",
        preview: { config_version: node.staged_config.config_version, config_sha256: sha },
        applied: state === "latest",
      });
    });
  }

  /**
   * `endpoint.status.updated` (heartbeats, ACKs, detect, events, reset), built from the
   * projection the registry just committed.
   */
  endpointStatus(configId: string, nodeId: string, projection: NodeProjection): void {
    if (!this.#live()) return;
    try {
      const status = this.#control.endpointStatusOf(configId, nodeId, projection);
      this.#hub.publish("endpoint.status.updated", { config_id: configId, node_id: nodeId, status });
    } catch (err) {
      this.#log.error({ err }, "building an SSE event failed");
    }
  }

  /**
   * `system.status.updated` on its own: the backend's broker connection came up or went down
   * (the status's `services.mqtt.connected`).
   */
  systemStatusChanged(): void {
    if (!this.#live()) return;
    this.#run(async () => {
      this.#hub.publish("system.status.updated", await this.#systemStatus(false));
    });
  }

  /**
   * A write other than a mesh write (a restore) may have changed the store's counts: the next
   * system status counts them again.
   */
  countsChanged(): void {
    this.#countsGen++;
    this.#counts = undefined;
  }

  /**
   * The system status of a report. Counting the pairs of a 1,000-node full mesh (499,500 rows)
   * takes 15–30 ms, too long to repeat on the event loop for every report, so a report of after-commit rendering (`rendered`), which
   * adds and removes no config, node or pair, takes the counts of the last status counted since
   * the last write that could change them; anything else counts, off the event loop's thread
   * when it can (`countsOffThread`), else on the main connection.
   */
  async #systemStatus(rendered: boolean): Promise<SystemStatus> {
    const known = this.#counts;
    if (rendered && known !== undefined && known.gen === this.#countsGen) return this.#status(known.counts);
    // Labelled with the generation before the read: a write that commits while the counts are
    // read (it may be half in them) moves the generation on, and they are never reused.
    const gen = this.#countsGen;
    const status = await this.#status((await this.#countsOffThread()) ?? undefined);
    this.#counts = { gen, counts: storeCountsOf(status) };
    return status;
  }

  /** `control.log.created` / `control.log.updated`. */
  controlLog(change: "created" | "updated", log: ControlLogView): void {
    if (!this.#live()) return;
    this.#hub.publish(change === "created" ? "control.log.created" : "control.log.updated", {
      config_id: log.config_id,
      node_id: log.node_id,
      log,
    });
  }

  /**
   * A committed mesh write: the config list, the config overview, the workspace of every node it
   * touched, the apply state of every node whose staged config changed, the mesh workspace of
   * the endpoint and its affected peers, and the system status.
   *
   * Reports of after-commit rendering (`change.rendered`: a large write's dynamic nodes, rendered
   * in batches of a few nodes) are not published one by one: they gather for `renderedCoalesceMs`
   * and are then published as one report per config — one config list, one overview, one
   * `node.apply.updated` per node rendered (its latest version and sha), one system status — so
   * a 1,000-node protocol switch builds a few dozen overviews instead of one per batch (O(n²);
   * docs/history/decisions-2026.md "switch rendering and notifier coalescing").
   */
  meshChanged(change: MeshChange): void {
    // Any write but a rendering may have added or removed configs, nodes or pairs.
    if (change.rendered !== true) this.countsChanged();
    if (!this.#live()) return;
    if (change.rendered === true) {
      this.#gather(change);
      return;
    }
    this.#run(() => this.#publishMesh(change));
  }

  #gather(change: MeshChange): void {
    const nodes = this.#rendered.get(change.configId) ?? new Map<string, StagedChange>();
    for (const s of change.staged) nodes.set(s.nodeId, s);
    this.#rendered.set(change.configId, nodes);
    if (this.#flushArmed) return;
    this.#flushArmed = true;
    this.#clock.setTimeout(() => {
      this.#flushArmed = false;
      const reports = [...this.#rendered];
      this.#rendered.clear();
      if (!this.#live()) return;
      this.#run(async () => {
        for (const [configId, nodes] of reports) {
          await this.#publishMesh({ configId, created: [], deleted: [], modeChanged: [], touched: [], staged: [...nodes.values()], rendered: true });
        }
      });
    }, this.#coalesceMs);
  }

  /**
   * Each event is read and sent in one turn, and the three parts (config list; overview with the
   * node and apply events; system status) in turns of their own: each part of a 1,000-node
   * config takes 5–26 ms, all of it 25–50 ms, too long for one turn of the event
   * loop that also serves MQTT and HTTP. A frame is never built from a
   * read of an earlier turn, so none is older than one sent before it.
   */
  async #publishMesh(change: MeshChange): Promise<void> {
    const configs = await this.#mesh.listConfigs();
    this.#hub.publish("config.list.updated", { configs });
    if (!change.configDeleted) {
      await nextTurn();
      const overview = await this.#mesh.getConfig(change.configId);
      this.#hub.publish("config.overview.updated", {
        config_id: change.configId,
        overview,
        tags: overview.tags,
      });
      const byId = new Map(overview.nodes.map((n) => [n.node_id, n]));
      const touched = new Set([...change.touched, ...change.created.map((n) => n.node_id), ...change.modeChanged.map((m) => m.nodeId)]);
      for (const nodeId of touched) {
        const workspace = byId.get(nodeId);
        if (workspace) this.#hub.publish("node.workspace.updated", { config_id: change.configId, node_id: nodeId, workspace });
      }
      for (const s of change.staged) {
        const node = byId.get(s.nodeId);
        if (!node) continue;
        this.#hub.publish("node.apply.updated", {
          config_id: change.configId,
          node_id: s.nodeId,
          sync_status: node.client.config_version_state ?? "static",
          preview: { config_version: s.version, config_sha256: s.sha },
          applied: node.client.config_version_state === "latest",
        });
      }
      await this.#meshWorkspaces(change, overview.nodes);
    }
    await nextTurn();
    this.#hub.publish("system.status.updated", await this.#systemStatus(change.rendered === true));
  }

  /**
   * `mesh.workspace.updated` (spec §6.5 emission rules) for the endpoints a write changed and
   * their affected peers, in work linear in what changed (docs/history/decisions-2026.md "pairs and
   * workspace events at scale"):
   * - each endpoint written (created, its own fields or mode changed, or a side of the pair
   *   written): its node, all its connections, and every node of the config (`nodes`);
   * - each affected peer (paired with a created or changed endpoint, or with a deleted node):
   *   its node, its connections with the endpoints written (none left after a deletion), and
   *   the nodes those connections name (`nodes`).
   * Writes that change no endpoint and no pair (a protocol switch, port forwards, staging done
   * after the commit) publish none: `node.apply.updated` reports them.
   */
  async #meshWorkspaces(change: MeshChange, nodes: readonly NodeView[]): Promise<void> {
    const byId = new Map(nodes.map((n) => [n.node_id, n]));
    const endpoints = new Set([...change.touched, ...change.created.map((n) => n.node_id), ...change.modeChanged.map((m) => m.nodeId)]);
    const written = new Set([...endpoints, ...(change.paired ?? [])]);
    // The peers' connections with the endpoints written, gathered from the endpoints' own lists.
    const peers = new Map<string, MeshPairView[]>();
    for (const id of change.unpaired ?? []) if (!written.has(id)) peers.set(id, []);
    for (const nodeId of written) {
      const node = byId.get(nodeId);
      if (!node) continue;
      const connections = await this.#connectionsOf(change.configId, nodeId);
      this.#hub.publish("mesh.workspace.updated", { config_id: change.configId, node_id: nodeId, workspace: { node, connections }, nodes: [...nodes] });
      if (!endpoints.has(nodeId)) continue;
      for (const pair of connections) {
        const other = pair.node_a === nodeId ? pair.node_b : pair.node_a;
        if (!written.has(other)) peers.set(other, [...(peers.get(other) ?? []), pair]);
      }
    }
    for (const [peerId, connections] of peers) {
      const node = byId.get(peerId);
      if (!node) continue;
      const named = new Set(connections.flatMap((p) => [p.node_a, p.node_b]));
      const others = [...named].filter((id) => id !== peerId).flatMap((id) => byId.get(id) ?? []);
      this.#hub.publish("mesh.workspace.updated", { config_id: change.configId, node_id: peerId, workspace: { node, connections }, nodes: [node, ...others] });
    }
  }

  /** Every mesh pair of one node with its integrity, page by page: O(pairs of the node). */
  async #connectionsOf(configId: string, nodeId: string): Promise<MeshPairView[]> {
    const out: MeshPairView[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.#mesh.listPairs(configId, { limit: PAIR_PAGE_LIMIT_MAX, node_id: nodeId, ...(cursor === undefined ? {} : { cursor }) });
      out.push(...page.mesh_pairs);
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
    return out;
  }

  #live(): boolean {
    return this.#hub.subscriberCount() > 0;
  }

  #run(fn: () => Promise<void>): void {
    fn().catch((err: unknown) => this.#log.error({ err }, "building an SSE event failed"));
  }
}

/** The `system.status.updated` payload and `GET /api/v1/system/status` (DESIGN §5): its schema is `systemStatusSchema`. */
export type { StoreCounts, SystemStatus };

/** The store counts a system status carries. */
function storeCountsOf(status: SystemStatus): StoreCounts {
  return { configs: status.summary.configs, nodes: status.summary.nodes, mesh_pairs: status.topology.mesh_pairs };
}

/**
 * Computes the system status from the store and the live actors; with `counts`, those are taken
 * as the store's counts and nothing is read from the store.
 */
export async function systemStatus(
  deps: {
    store: Store;
    registry: NodeActorRegistry;
    mqttEnabled: boolean;
    /** The broker kind (SVC_MQTT_BROKER); default "embedded". */
    broker?: string;
    brokerConnected: () => boolean;
    /** SVC_RELEASE_DOWNLOAD_URL without its trailing slash (spec §4 rules 2/5: the console builds asset URLs from it). */
    releaseDownloadUrl: string;
  },
  counts?: StoreCounts,
): Promise<SystemStatus> {
  // Counted on the read path: never in the middle of another caller's open transaction.
  const c = counts ?? (await deps.store.read(countStore));
  let dynamic = 0;
  let online = 0;
  let dropped = 0;
  let latest = 0;
  let pending = 0;
  if (deps.mqttEnabled) {
    for (const { projection } of deps.registry.projections()) {
      if (projection.mode !== "dynamic") continue;
      dynamic++;
      if (projection.presence === "online") online++;
      if (projection.presence === "dropped") dropped++;
      if (projection.sync === "latest") latest++;
      else pending++;
    }
  }
  return {
    summary: { configs: c.configs, nodes: c.nodes, dynamic_nodes: dynamic, online, dropped },
    services: { mqtt: { enabled: deps.mqttEnabled, broker: deps.mqttEnabled ? (deps.broker ?? "embedded") : "disabled", connected: deps.brokerConnected() } },
    sync: { latest, pending },
    topology: { mesh_pairs: c.mesh_pairs },
    update: { version: VERSION, release_download_url: deps.releaseDownloadUrl },
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
