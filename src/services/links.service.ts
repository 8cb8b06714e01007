import PQueue from "p-queue";
import type { Logger } from "pino";
import type { NodeActorRegistry } from "../actors/registry.js";
import { AppError } from "../errors.js";
import type { EventHub } from "../events/hub.js";
import type { Clock } from "../lib/clock.js";
import { linkMatrixAnswer, linkRefreshAnswer, nodePeersAnswer, type LinkMatrixAnswer, type LinkRefreshAnswer, type NodePeersAnswer } from "../protocol/links.schema.js";
import { PAIR_PAGE_LIMIT_MAX } from "../protocol/rest.schema.js";
import { wgPeersReportSchema, type WgPeersReport } from "../protocol/wg-peers.schema.js";
import { findConfig } from "../store/configs.repository.js";
import type { Store } from "../store/db.js";
import { findPeerReport, listLinkNodes, listPeerReports, putPeerReport, type LinkNodeRow, type PeerReportRow } from "../store/links.repository.js";
import { hasDrift, linkViews, nodeDrift, peerStats, stagedPeers, type NodeDrift } from "./links-matrix.js";
import type { MeshService } from "./mesh.service.js";
import type { MeshPairView } from "./views.js";


/** How long a refresh waits for the hosts it asked, ms, unless configured. */
export const LINK_REFRESH_TIMEOUT_MS = 10_000;
/** How many hosts a refresh asks at once. */
export const LINK_REFRESH_CONCURRENCY = 16;

export interface LinksServiceDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  hub: Pick<EventHub, "publish">;
  mesh: Pick<MeshService, "listPairs" | "getStagedConfig">;
  registry: Pick<NodeActorRegistry, "projection">;
  /** Sends one detect to a node (the detect scheduler's way, spec §3.2); its agent reports its peers after the detect ACK. */
  sendDetect(configId: string, nodeId: string): Promise<void>;
  refreshTimeoutMs?: number;
}

interface Waiter {
  since: number;
  done: (reported: boolean) => void;
}

/**
 * Measured link health (docs/links.md): stores each host's `wg_peers` report, then announces
 * `config.links.updated` (persist before emit); answers the link matrix, a node's peers and
 * drift; and, on an operator's request only, asks every online bound host of a config for a
 * fresh report (a detect each, bounded concurrency) and answers when all reported or the
 * timeout passed.
 */
export class LinksService {
  readonly #d: LinksServiceDeps;
  readonly #waiters = new Map<string, Set<Waiter>>();

  constructor(deps: LinksServiceDeps) {
    this.#d = deps;
  }

  /**
   * One `wg_peers` event's `output` (spec §6.3 event payload) from a node the router accepted.
   * A malformed report is logged (without its text) and dropped; a valid one is stored, then
   * announced, then wakes a refresh waiting for that node.
   */
  async ingest(configId: string, nodeId: string, output: string | undefined, at: number): Promise<void> {
    let report: WgPeersReport;
    try {
      report = wgPeersReportSchema.parse(JSON.parse(output ?? ""));
    } catch {
      this.#d.log.warn({ config_id: configId, node_id: nodeId }, "malformed wg_peers report dropped");
      return;
    }
    const row: PeerReportRow = {
      node_id: nodeId,
      config_id: configId,
      received_at: at,
      host_time: report.host_time,
      running: report.running ? 1 : 0,
      interface_name: report.interface_name,
      tunnel_protocol: report.tunnel_protocol,
      public_key: report.public_key,
      listen_port: report.listen_port,
      peers_json: JSON.stringify(report.peers),
    };
    try {
      await this.#d.store.transaction(async (trx, afterCommit) => {
        await putPeerReport(trx, row);
        afterCommit(() => {
          this.#d.hub.publish("config.links.updated", { config_id: configId, node_id: nodeId });
          for (const w of this.#waiters.get(nodeId) ?? []) if (at >= w.since) w.done(true);
        });
      });
    } catch (err) {
      // The node was deleted between the router's check and this write.
      this.#d.log.warn({ err, config_id: configId, node_id: nodeId }, "wg_peers report not stored");
    }
  }

  /** `GET /api/v1/configs/{config_id}/links`. @throws AppError NOT_FOUND (config) */
  async matrix(configId: string): Promise<LinkMatrixAnswer> {
    await this.#requireConfig(configId);
    const db = this.#d.store.db;
    const nodes = new Map((await listLinkNodes(db, configId)).map((n) => [n.node_id, n]));
    const reports = await listPeerReports(db, configId);
    const links = linkViews({ pairs: await this.#allPairs(configId), nodes, reports, nowMs: this.#d.clock.now() });
    const drift: NodeDrift[] = [];
    for (const [nodeId, report] of reports) {
      const d = await this.#drift(configId, nodeId, report);
      if (d !== null && hasDrift(d)) drift.push(d);
    }
    // Parsed once into the wire type (branded ids); the route's response schema is the same one.
    return linkMatrixAnswer.parse({ config_id: configId, links, drift });
  }

  /** `GET /api/v1/configs/{config_id}/nodes/{node_id}/peers`. @throws AppError NOT_FOUND (config or node) */
  async nodePeers(configId: string, nodeId: string): Promise<NodePeersAnswer> {
    await this.#requireConfig(configId);
    const nodes = await listLinkNodes(this.#d.store.db, configId);
    if (!nodes.some((n) => n.node_id === nodeId)) throw new AppError("NOT_FOUND", "no such node in this config");
    const report = await findPeerReport(this.#d.store.db, nodeId);
    if (report === undefined) return nodePeersAnswer.parse({ node_id: nodeId, measured_at: null, peers: [], drift: null });
    const byKey = new Map<string, LinkNodeRow>(nodes.map((n) => [n.public_key, n]));
    return nodePeersAnswer.parse({
      node_id: nodeId,
      measured_at: new Date(report.received_at).toISOString(),
      peers: peerStats(report, byKey),
      drift: await this.#drift(configId, nodeId, report),
    });
  }

  /**
   * `POST /api/v1/configs/{config_id}/links/refresh`: a detect to every online bound dynamic
   * node of the config ({@link LINK_REFRESH_CONCURRENCY} at a time); answers the matrix once
   * each has reported since the request, or when the timeout passed (those are `timed_out`).
   * @throws AppError NOT_FOUND (config)
   */
  async refresh(configId: string): Promise<LinkRefreshAnswer> {
    await this.#requireConfig(configId);
    const since = this.#d.clock.now();
    const asked = (await listLinkNodes(this.#d.store.db, configId))
      .filter((n) => {
        const p = this.#d.registry.projection(configId, n.node_id);
        return n.mode === "dynamic" && p !== undefined && p.clientInitialized && p.presence !== "offline";
      })
      .map((n) => n.node_id);
    const waits = asked.map((nodeId) => this.#waitFor(nodeId, since));
    const queue = new PQueue({ concurrency: LINK_REFRESH_CONCURRENCY });
    for (const nodeId of asked) {
      void queue.add(() => this.#d.sendDetect(configId, nodeId).catch((err: unknown) => this.#d.log.warn({ err, config_id: configId, node_id: nodeId }, "link refresh: detect not sent")));
    }
    const outcome = await Promise.all(waits);
    const reported = asked.filter((_, i) => outcome[i] === true);
    const timedOut = asked.filter((_, i) => outcome[i] !== true);
    return linkRefreshAnswer.parse({ ...(await this.matrix(configId)), asked, reported, timed_out: timedOut });
  }

  #waitFor(nodeId: string, since: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const set = this.#waiters.get(nodeId) ?? new Set<Waiter>();
      this.#waiters.set(nodeId, set);
      const waiter: Waiter = {
        since,
        done: (reported) => {
          this.#d.clock.clearTimeout(timer);
          set.delete(waiter);
          if (set.size === 0) this.#waiters.delete(nodeId);
          resolve(reported);
        },
      };
      const timer = this.#d.clock.setTimeout(() => waiter.done(false), this.#d.refreshTimeoutMs ?? LINK_REFRESH_TIMEOUT_MS);
      set.add(waiter);
    });
  }

  async #drift(configId: string, nodeId: string, report: PeerReportRow): Promise<NodeDrift | null> {
    try {
      const staged = await this.#d.mesh.getStagedConfig(configId, nodeId);
      return nodeDrift(nodeId, stagedPeers(staged.config_text), report);
    } catch {
      return null; // no staged config (deleted meanwhile): nothing to compare against
    }
  }

  async #allPairs(configId: string): Promise<MeshPairView[]> {
    const out: MeshPairView[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await this.#d.mesh.listPairs(configId, { limit: PAIR_PAGE_LIMIT_MAX, ...(cursor === undefined ? {} : { cursor }) });
      out.push(...page.mesh_pairs);
      if (page.next_cursor === null) return out;
      cursor = page.next_cursor;
    }
  }

  async #requireConfig(configId: string): Promise<void> {
    if ((await findConfig(this.#d.store.db, configId)) === undefined) throw new AppError("NOT_FOUND", "no such config");
  }
}
