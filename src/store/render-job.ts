/**
 * Render jobs over the stored inputs of a config's nodes (DESIGN §3 Config versions): what the
 * store worker thread (src/store/store-worker.thread.ts) and its in-thread fallback run. A job
 * reads the nodes' staged versions and the config's render inputs once and renders the staged
 * texts step by step; it writes nothing (src/services/rendering.service.ts stores the
 * renderings, conditionally on the version read, and decides what to render, when and where).
 */
import { performance } from "node:perf_hooks";
import PQueue from "p-queue";
import type { AwgParams } from "../domain/awg.js";
import { ConfigRenderer, hasPublicEndpoint, HubGraph, isDirectPair, stageConfig, type RenderCommon, type RenderInput, type RenderPeer } from "../domain/render.js";
// The next turn of a background task: one background step per loop iteration.
import { backgroundTurn as nextTurn } from "../lib/background-turn.js";
import { findConfig } from "./configs.repository.js";
import type { Db } from "./connection.js";
import { hubPartners } from "./mesh-pairs.repository.js";
import { forEachConfigPair } from "./mesh-policy.js";
import { listPortForwardsAmong, listRenderSides, listRenderSidesAmong, type RenderSideRow } from "./render-inputs.repository.js";
import type { ConfigRow, NodeRow, PortForwardRow } from "./schema.js";

/** A node whose staged config changed. */
export interface StagedChange {
  nodeId: string;
  version: number;
  sha: string;
}

/** The render fields of a node (its own and as a peer). */
export type RenderSide = Pick<NodeRow, "node_id" | "name" | "hub" | "public_key" | "address" | "public_address" | "listen_port">;
export type SelfSide = RenderSide & Pick<NodeRow, "private_key">;

/** True when the pair `(a, b)` is rendered in both configs as each other's peer: enabled, and one side can initiate. */
export function isPairRendered(a: RenderSide, b: RenderSide, enabled: boolean): boolean {
  return isDirectPair(a, b, enabled);
}

/**
 * The hub through which the pair `(a, b)` is routed: enabled, neither side has a public
 * endpoint, and a hub is paired with both ({@link HubGraph.hubFor}); null otherwise.
 */
export function viaHub(a: RenderSide, b: RenderSide, enabled: boolean, hubs: HubGraph): string | null {
  if (!enabled || hubs.size === 0 || hasPublicEndpoint(a) || hasPublicEndpoint(b)) return null;
  return hubs.hubFor(a.node_id, b.node_id);
}

/** The hubs of a config and their enabled partners ({@link hubPartners}): O(hubs × nodes of the config). */
export async function readHubGraph(db: Db, configId: string): Promise<HubGraph> {
  const hubs = await hubPartners(db, configId);
  return hubs.length === 0 ? HubGraph.EMPTY : new HubGraph(hubs);
}

/**
 * The addresses a node reaches through each hub: hub node_id → the addresses of the other sides
 * of the node's pairs routed through it ({@link viaHub}).
 */
export function routedThrough(self: RenderSide, pairs: ReadonlyArray<{ enabled: number; peer: RenderSide }>, hubs: HubGraph): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (hubs.size === 0 || hasPublicEndpoint(self)) return out;
  for (const p of pairs) {
    const hub = viaHub(self, p.peer, p.enabled === 1, hubs);
    if (hub !== null) out.set(hub, [...(out.get(hub) ?? []), p.peer.address]);
  }
  return out;
}

export function renderPeer(other: RenderSide): RenderPeer {
  return {
    node_id: other.node_id,
    name: other.name,
    public_key: other.public_key,
    address: other.address,
    public_address: other.public_address,
    listen_port: other.listen_port,
  };
}

/** The config-wide render inputs of a config row. */
export function renderCommon(config: ConfigRow): RenderCommon {
  return {
    config_id: config.config_id,
    tunnel_protocol: config.tunnel_protocol,
    network_cidr: config.network_cidr,
    awg: config.awg_params === null ? null : (JSON.parse(config.awg_params) as AwgParams),
  };
}

/** The rendered node's own fields. */
export function nodeInput(node: SelfSide): RenderInput["node"] {
  return {
    node_id: node.node_id,
    private_key: node.private_key,
    public_key: node.public_key,
    address: node.address,
    listen_port: node.listen_port,
    public_address: node.public_address,
    hub: node.hub === 1,
  };
}

/** The enabled port forwards as the renderer takes them. */
export function enabledForwards(forwards: readonly PortForwardRow[]): RenderInput["port_forwards"] {
  return forwards
    .filter((f) => f.enabled === 1)
    .map((f) => ({ protocol: f.protocol, listen_port: f.listen_port, target_address: f.target_address, target_port: f.target_port }));
}

/** A stretch of the event loop: when it started (`performance.now()`, ms) and how long it may run (ms). */
export interface Turn {
  start: number;
  stepMs: number;
}

/** Yields to the event loop when the turn has run its step, and starts a new turn. */
export async function yieldIfSpent(turn: Turn): Promise<void> {
  if (performance.now() - turn.start < turn.stepMs) return;
  await nextTurn();
  turn.start = performance.now();
}

/** One node's rendering, not stored yet: the text of `version`'s inputs and its SHA-256. */
export interface ChunkRendering extends StagedChange {
  text: string;
}

/** One step of a {@link RenderJob}. */
export interface RenderedChunk {
  /** Nodes already rendered at their staged version, with their stored sha (first step only). */
  stored: StagedChange[];
  /** Nodes staged but not rendered, each rendered at the version read before the job's inputs. */
  rendered: ChunkRendering[];
}

/** A running deferred rendering: its steps, in order, until `next` answers null. */
export interface RenderJob {
  /**
   * The next up to `n` renderings (and, the first time, the nodes found already rendered);
   * null when none is left or the config is gone.
   * @throws AppError `VALIDATION_FAILED` from the renderer on bad stored input
   */
  next(n: number): Promise<RenderedChunk | null>;
  /** Drops the job's inputs (also when it ends early). */
  close(): void;
}

/**
 * Where {@link renderDeferred} gets its renderings from: in this thread ({@link inThreadJobs}) or
 * from the store worker (src/store/store-worker.ts), which reads and renders on its own
 * connection while this thread stores the previous step.
 */
export interface ChunkSource {
  /** Steps asked ahead of the one being stored (0: one at a time). */
  readonly ahead: number;
  /** Starts rendering the staged configs of `ids` (nodes of `configId`). */
  open(configId: string, ids: readonly string[]): RenderJob;
}

/**
 * A render job over the stored inputs, writing nothing. On its first step it reads, in this
 * order, the staged versions of `ids`, then the config, every node's render fields (no texts),
 * the port forwards of the nodes to render and every pair of the config (once, grouped by
 * `node_a`: {@link PAIR_READ_NODES} nodes per statement); each step then renders the next nodes
 * with one {@link ConfigRenderer} (each peer validated and its `[Peer]` block built once per
 * job). Reading versions before inputs makes every rendering at least as new as its version, so
 * a store conditional on that version is exact. Yields whenever the turn has run `turn.stepMs`
 * ms (pass `Infinity` on a thread of its own). Memory: the config's rendered pairs as numbers
 * ({@link readRenderedPeers}).
 */
export function openRenderJob(db: Db, configId: string, ids: readonly string[], turn: Turn): RenderJob {
  let inputs: Promise<JobInputs | null> | null = null;
  let pos = 0;
  let first = true;
  // Steps run one after another, in the order asked: a step asked ahead never overtakes one before it.
  const steps = new PQueue({ concurrency: 1 });
  const step = async (n: number): Promise<RenderedChunk | null> => {
    inputs ??= readJobInputs(db, configId, ids, turn);
    const job = await inputs;
    if (job === null) return null;
    const stored = first ? job.stored : [];
    first = false;
    const rendered: ChunkRendering[] = [];
    for (const end = Math.min(pos + n, job.toRender.length); pos < end; pos++) {
      await yieldIfSpent(turn);
      const row = job.toRender[pos];
      if (row !== undefined) rendered.push(renderJobNode(job, row));
    }
    return stored.length === 0 && rendered.length === 0 ? null : { stored, rendered };
  };
  return {
    next: (n) => steps.add(() => step(n)),
    close() {
      inputs = Promise.resolve(null);
    },
  };
}

/** What a render job reads once. */
interface JobInputs {
  stored: StagedChange[];
  toRender: RenderSideRow[];
  renderer: ConfigRenderer;
  forwards: Map<string, PortForwardRow[]>;
  peers: RenderedPeers;
}

async function readJobInputs(db: Db, configId: string, ids: readonly string[], turn: Turn): Promise<JobInputs | null> {
  const rows = await listRenderSidesAmong(db, configId, ids);
  const config = await findConfig(db, configId);
  if (!config) return null;
  const stored: StagedChange[] = [];
  for (const r of rows) {
    if (r.staged_config_version >= 1 && r.staged_config_sha256 !== null) stored.push({ nodeId: r.node_id, version: r.staged_config_version, sha: r.staged_config_sha256 });
  }
  const toRender = rows.filter((r) => r.staged_config_version >= 1 && r.staged_config_sha256 === null);
  const sides = await listRenderSides(db, configId);
  const forwards = toRender.length === 0 ? new Map<string, PortForwardRow[]>() : await listPortForwardsAmong(db, toRender.map((r) => r.node_id));
  // Nothing to render: the pairs are not read (the job gives its stored nodes only).
  const peers = await readRenderedPeers(db, configId, toRender.length === 0 ? [] : sides, turn);
  return { stored, toRender, renderer: new ConfigRenderer(renderCommon(config), sides.map(renderPeer)), forwards, peers };
}

/** One node of a job rendered and hashed. */
function renderJobNode(job: JobInputs, row: RenderSideRow): ChunkRendering {
  const text = job.renderer.render(nodeInput(row), peerIdsOf(job.peers, row.node_id), enabledForwards(job.forwards.get(row.node_id) ?? []), routedOf(job.peers, row.node_id));
  return { nodeId: row.node_id, version: row.staged_config_version, sha: stageConfig(null, text).config_sha256, text };
}

/** The rendered pairs among some nodes of a config, as indexes into `sides`. */
export interface RenderedPeers {
  sides: readonly RenderSide[];
  indexOf: ReadonlyMap<string, number>;
  /** node index → indexes of the other sides of its rendered pairs. */
  peers: number[][];
  /** node index → hub node_id → addresses routed through that hub (nodes without any are absent). */
  routed: Map<number, Map<string, string[]>>;
}

/**
 * The rendered pairs among `sides` (every node of the config `configId`): each pair visited once
 * ({@link forEachConfigPair}: the stored rows, then the full-mesh policy's pairs, generated from
 * the nodes' creation order), yielding between nodes once the turn has run its step. A pair is
 * rendered when it is enabled and one side can initiate ({@link isPairRendered}); an enabled pair
 * neither side can initiate is routed through the first hub among `sides` paired with both
 * ({@link HubGraph.hubFor}), once all pairs are visited. Memory: two numbers per rendered pair
 * (~16 MB for a 1,000-node full mesh), and, when the config has hubs, two per pair without a
 * public endpoint on either side.
 */
export async function readRenderedPeers(db: Db, configId: string, sides: readonly RenderSide[], turn: Turn): Promise<RenderedPeers> {
  const indexOf = new Map(sides.map((n, i) => [n.node_id, i]));
  const peers: number[][] = sides.map(() => []);
  const hubs = new Map<string, string[]>(sides.filter((n) => n.hub === 1).map((n) => [n.node_id, []]));
  // Enabled pairs of two nodes without a public endpoint: routed once every hub's partners are known.
  const hidden: Array<[number, number]> = [];
  if (sides.length === 0) return { sides, indexOf, peers, routed: new Map() };
  const visit = (aId: string, bId: string, enabled: number): void => {
    const a = indexOf.get(aId);
    const b = indexOf.get(bId);
    if (a === undefined || b === undefined || enabled !== 1) return;
    const [sa, sb] = [sides[a], sides[b]];
    if (sa === undefined || sb === undefined) return;
    hubs.get(aId)?.push(bId);
    hubs.get(bId)?.push(aId);
    if (isPairRendered(sa, sb, true)) {
      peers[a]?.push(b);
      peers[b]?.push(a);
    } else if (hubs.size > 0) hidden.push([a, b]);
  };
  await forEachConfigPair(db, configId, visit, () => yieldIfSpent(turn));
  return { sides, indexOf, peers, routed: routeHidden(sides, hidden, new HubGraph(hubs)) };
}

/** The routes through hubs of the given pairs (indexes into `sides`), both ways. */
function routeHidden(sides: readonly RenderSide[], hidden: ReadonlyArray<readonly [number, number]>, hubs: HubGraph): Map<number, Map<string, string[]>> {
  const routed = new Map<number, Map<string, string[]>>();
  const add = (from: number, hub: string, address: string): void => {
    const byHub = routed.get(from) ?? new Map<string, string[]>();
    byHub.set(hub, [...(byHub.get(hub) ?? []), address]);
    routed.set(from, byHub);
  };
  for (const [a, b] of hidden) {
    const [sa, sb] = [sides[a], sides[b]];
    if (sa === undefined || sb === undefined) continue;
    const hub = hubs.hubFor(sa.node_id, sb.node_id);
    if (hub === null) continue;
    add(a, hub, sb.address);
    add(b, hub, sa.address);
  }
  return routed;
}

/** A node's addresses routed through hubs: hub node_id → addresses (empty for a node routing none). */
export function routedOf(graph: RenderedPeers, nodeId: string): ReadonlyMap<string, readonly string[]> {
  const own = graph.indexOf.get(nodeId);
  return (own === undefined ? undefined : graph.routed.get(own)) ?? new Map();
}

/** The node_ids of a node's peers (empty for a node not among the sides). */
export function peerIdsOf(graph: RenderedPeers, nodeId: string): Set<string> {
  const own = graph.indexOf.get(nodeId);
  const ids = new Set<string>();
  for (const i of own === undefined ? [] : (graph.peers[own] ?? [])) {
    const side = graph.sides[i];
    if (side !== undefined) ids.add(side.node_id);
  }
  return ids;
}
