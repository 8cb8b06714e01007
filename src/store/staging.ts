/**
 * Staging of node configs (DESIGN §3 Config versions; issue 14 "mesh writes cost what they change").
 *
 * Lazy staging: a mesh write does not render anything for static nodes. It works out, from the
 * write alone, exactly which nodes' rendered text changes (a node reaches another's config only
 * through a rendered pair) and bumps their `staged_config_version` with one UPDATE, clearing
 * `staged_config_sha256`/`_text`. A row with `staged_config_version >= 1` and a NULL sha is
 * "staged but not rendered yet": its text is, by construction, the rendering of the current
 * inputs, and {@link materializeStaged} renders, hashes and stores it on demand (downloads,
 * pushes, bulk packages, snapshots). Dynamic nodes are rendered in the write itself, so their
 * actors learn the new `(version, sha)` as before (spec §3.5, §3.8: the agent receives the text
 * whose SHA-256 is the staged sha). `test/store/incremental-render.test.ts` proves this gives
 * byte-for-byte the versions, texts and shas of {@link restageConfig} after every write.
 */
import { performance } from "node:perf_hooks";
import PQueue from "p-queue";
// The next turn of a background task: one background step per loop iteration (issue 14 item 2).
import { backgroundTurn as nextTurn } from "../lib/background-turn.js";
import type { AwgParams } from "../domain/awg.js";
import { checkPairIntegrity, ConfigRenderer, renderNodeConfig, stageConfig, type RenderCommon, type RenderInput, type RenderPeer } from "../domain/render.js";
import { findConfig } from "./configs.repository.js";
import type { Db } from "./db.js";
import { listPairs, listPairsOfNode, type PairOfNode } from "./mesh-pairs.repository.js";
import {
  bumpStagedVersions,
  findNodeById,
  findStagedText,
  listDynamicNodeIdsAmong,
  listNodes,
  listNodesAmong,
  putStagedText,
  storeStagedRendering,
  updateNode,
} from "./nodes.repository.js";
import { listPortForwards, listPortForwardsOfConfig } from "./port-forwards.repository.js";
import { listPairsWithNodeA, listPortForwardsAmong, listRenderSides, listRenderSidesAmong, type RenderSideRow } from "./render-inputs.repository.js";
import type { ConfigRow, NodeRow, PortForwardRow } from "./schema.js";

/** A node whose staged config changed. */
export interface StagedChange {
  nodeId: string;
  version: number;
  sha: string;
}

/** The render fields of a node (its own and as a peer). */
type RenderSide = Pick<NodeRow, "node_id" | "public_key" | "address" | "public_address" | "listen_port">;
type SelfSide = RenderSide & Pick<NodeRow, "private_key">;

/** True when the pair `(a, b)` is rendered in both configs: enabled and not broken. */
export function isPairRendered(a: RenderSide, b: RenderSide, enabled: boolean): boolean {
  return checkPairIntegrity(a, b, enabled).status === "ok";
}

function renderPeer(other: RenderSide): RenderPeer {
  return {
    node_id: other.node_id,
    public_key: other.public_key,
    address: other.address,
    public_address: other.public_address,
    listen_port: other.listen_port,
  };
}

/** The renderer's input for one node, from stored rows (peers already selected). */
function renderInput(config: ConfigRow, node: SelfSide, peers: RenderPeer[], forwards: readonly PortForwardRow[]): RenderInput {
  return { ...renderCommon(config), node: nodeInput(node), peers, port_forwards: enabledForwards(forwards) };
}

/** Renders `self` against its pairs as given (lets a caller render a node before and after a patch). */
function renderWith(config: ConfigRow, self: SelfSide, pairs: readonly PairOfNode[], forwards: readonly PortForwardRow[]): string {
  const peers = pairs.filter((p) => isPairRendered(self, p.peer, p.enabled === 1)).map((p) => renderPeer(p.peer));
  return renderNodeConfig(renderInput(config, self, peers, forwards));
}

/**
 * The config text of one node from the current stored inputs: O(pairs of the node).
 * @throws AppError `NOT_FOUND` never; `VALIDATION_FAILED` from the renderer on bad stored input
 */
export async function renderCurrentConfig(db: Db, node: NodeRow): Promise<string | null> {
  const config = await findConfig(db, node.config_id);
  if (!config) return null;
  const [pairs, forwards] = await Promise.all([listPairsOfNode(db, node.node_id), listPortForwards(db, node.node_id)]);
  return renderWith(config, node, pairs, forwards);
}

/**
 * The staged config of a node, rendered and stored on demand (`node_staged_texts` is the cache,
 * keyed by the node's `staged_config_version` and sha: a write that changes the text clears the
 * sha, and the stale text is not served).
 * @returns null when the node was never staged (`staged_config_version` 0) or its config is gone
 */
export async function materializeStaged(
  db: Db,
  node: NodeRow,
): Promise<{ config_version: number; config_sha256: string; config_text: string } | null> {
  let row: NodeRow | undefined = node;
  for (let attempt = 0; row !== undefined && attempt < 3; attempt++) {
    if (row.staged_config_sha256 !== null) {
      const stored = await findStagedText(db, row.node_id, row.staged_config_version, row.staged_config_sha256);
      if (stored !== undefined) return { config_version: row.staged_config_version, config_sha256: row.staged_config_sha256, config_text: stored };
    }
    if (row.staged_config_version < 1) return null;
    const text = await renderCurrentConfig(db, row);
    if (text === null) return null;
    const sha = stageConfig(null, text).config_sha256;
    // Not the version: the text of this version was unknown, not different. Stored only if no
    // write bumped the node between the read and now (else read again and render again).
    if (await storeStagedRendering(db, row.node_id, row.staged_config_version, sha, text)) {
      return { config_version: row.staged_config_version, config_sha256: sha, config_text: text };
    }
    row = await findNodeById(db, row.node_id);
  }
  return null;
}

/** Ids of the nodes whose configs list `node` as a peer (rendered pairs only). */
export async function renderedPeerIds(db: Db, node: RenderSide): Promise<string[]> {
  const pairs = await listPairsOfNode(db, node.node_id);
  return pairs.filter((p) => isPairRendered(node, p.peer, p.enabled === 1)).map((p) => p.peer.node_id);
}

/**
 * Nodes whose text changes when `node` is created with its pairs already inserted: the node
 * itself (first staging) and every peer whose pair with it is rendered.
 */
export async function changedByNodeCreated(db: Db, node: RenderSide): Promise<string[]> {
  return [node.node_id, ...(await renderedPeerIds(db, node))];
}

/** The part of a node's `[Peer]` block in other configs that depends on the node (keepalive does not). */
function peerBlockKey(n: RenderSide): string {
  const endpoint = n.public_address !== null && n.public_address !== "" && n.listen_port !== null ? `${n.public_address}:${n.listen_port}` : "";
  return `${n.public_key}|${n.address}|${endpoint}`;
}

/**
 * Nodes whose text changes when a node's row changes from `before` to `after` (pairs and port
 * forwards unchanged): the node itself when its own rendering differs, and each peer whose pair
 * starts or stops being rendered, or that keeps it while the node's peer block changed.
 */
export async function changedByNodeUpdated(db: Db, before: NodeRow, after: NodeRow): Promise<string[]> {
  const config = await findConfig(db, after.config_id);
  if (!config) return [];
  const [pairs, forwards] = await Promise.all([listPairsOfNode(db, after.node_id), listPortForwards(db, after.node_id)]);
  const changed: string[] = [];
  if (before.staged_config_version < 1 || renderWith(config, before, pairs, forwards) !== renderWith(config, after, pairs, forwards)) {
    changed.push(after.node_id);
  }
  const blockChanged = peerBlockKey(before) !== peerBlockKey(after);
  for (const p of pairs) {
    const was = isPairRendered(before, p.peer, p.enabled === 1);
    const is = isPairRendered(after, p.peer, p.enabled === 1);
    if (was !== is || (is && blockChanged)) changed.push(p.peer.node_id);
  }
  return changed;
}

/** Nodes whose text changes when a pair's enabled state goes from `before` to `after` (null: no pair). */
export function changedByPair(a: RenderSide, b: RenderSide, before: boolean | null, after: boolean | null): string[] {
  const was = before !== null && isPairRendered(a, b, before);
  const is = after !== null && isPairRendered(a, b, after);
  return was === is ? [] : [a.node_id, b.node_id];
}

/**
 * Applies a write's changed set: bumps the versions (one UPDATE per 500 nodes). A small write
 * (`changed × configSize <= eagerPeerBudget` peer lines) renders every node it changed right
 * away, as before; a larger one leaves the static ones lazy and hands back the dynamic ones, for
 * rendering after the commit in small steps ({@link renderDeferred}): their actors push them.
 * `render`: further nodes to render (not bump) when dynamic, e.g. a node just made dynamic.
 * @returns `staged`: the changes rendered now, for the node actors (DESIGN §3 Config versions);
 *   `deferred`: ids of dynamic nodes still to render
 */
export async function stageChanged(
  db: Db,
  nodeIds: readonly string[],
  now: number,
  opts: { render?: readonly string[]; eagerPeerBudget?: number; configSize?: number } = {},
): Promise<{ staged: StagedChange[]; deferred: string[] }> {
  const unique = [...new Set(nodeIds)];
  if (unique.length > 0) await bumpStagedVersions(db, unique, now);
  const eager = unique.length * (opts.configSize ?? Infinity) <= (opts.eagerPeerBudget ?? 0);
  const toRender = [...new Set([...unique, ...(opts.render ?? [])])];
  if (!eager) return { staged: [], deferred: await listDynamicNodeIdsAmong(db, toRender) };
  const staged: StagedChange[] = [];
  for (const node of await listNodesAmong(db, toRender)) {
    const s = await materializeStaged(db, node);
    if (s) staged.push({ nodeId: node.node_id, version: s.config_version, sha: s.config_sha256 });
  }
  return { staged, deferred: [] };
}

/** A stretch of the event loop: when it started (`performance.now()`, ms) and how long it may run (ms). */
export interface Turn {
  start: number;
  stepMs: number;
}

/** Yields to the event loop when the turn has run its step, and starts a new turn. */
async function yieldIfSpent(turn: Turn): Promise<void> {
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

/** Render jobs run in this thread ({@link openRenderJob}), yielding whenever a turn has run `stepMs` ms. */
export function inThreadJobs(db: Db, stepMs = 10): ChunkSource {
  return { ahead: 0, open: (configId, ids) => openRenderJob(db, configId, ids, { start: performance.now(), stepMs }) };
}

/**
 * Renders the staged configs of nodes of one config outside any transaction, in steps of `chunk`
 * nodes, and reports them in batches of up to `batch` nodes (or every `sliceMs` ms) to
 * `onStaged`. The renderings come from a {@link RenderJob} of `opts.source` (inputs read once
 * per job, each peer checked once: {@link openRenderJob}); this function stores them and reports
 * them. With the store worker as source, the next step is rendered on another thread while this
 * one stores (issue 14 items 2–3). A rendering is stored only if its node is still at the
 * version read before the inputs (`storeStagedRendering`); a node a write bumped meanwhile is
 * rendered again from fresh inputs ({@link materializeStaged}). Yields to the event loop before
 * each step and whenever a turn has run `stepMs` ms (issue 14 item 2: no turn blocks long).
 * A node deleted, of another config or never staged is skipped; one already rendered is reported
 * with its stored rendering.
 * @throws AppError `VALIDATION_FAILED` from the renderer on bad stored input (the rest of the
 *   nodes are then not rendered)
 */
export async function renderDeferred(
  db: Db,
  configId: string,
  nodeIds: readonly string[],
  onStaged: (batch: StagedChange[]) => Promise<unknown> | void,
  opts: { batch?: number; sliceMs?: number; chunk?: number; stepMs?: number; source?: ChunkSource } = {},
): Promise<void> {
  const { batch = 50, sliceMs = 20, chunk = 16, stepMs = 10 } = opts;
  const source = opts.source ?? inThreadJobs(db, stepMs);
  let pending: StagedChange[] = [];
  let since = performance.now();
  const report = async (force: boolean): Promise<void> => {
    if (pending.length === 0 || (!force && pending.length < batch && performance.now() - since < sliceMs)) return;
    const out = pending;
    pending = [];
    await onStaged(out);
    since = performance.now();
  };
  const onNode = async (s: StagedChange): Promise<void> => {
    pending.push(s);
    await report(false);
  };
  const job = source.open(configId, nodeIds);
  // Steps asked and not yet stored, in order: up to `source.ahead` beyond the current one.
  const inFlight: Array<Promise<RenderedChunk | null>> = [];
  const turn: Turn = { start: performance.now(), stepMs };
  try {
    for (;;) {
      while (inFlight.length <= source.ahead) inFlight.push(job.next(chunk));
      await nextTurn();
      turn.start = performance.now();
      const step = await inFlight.shift();
      if (!step) break;
      await storeChunk(db, step, turn, onNode);
    }
  } finally {
    // A step asked ahead of the end or of a failure is dropped, never left unhandled.
    for (const p of inFlight) p.catch(() => undefined);
    job.close();
  }
  await report(true);
}

/**
 * Stores one step's renderings and reports each node, yielding whenever the turn has run its
 * step. A node a write bumped after its version was read is rendered again from fresh inputs.
 */
async function storeChunk(db: Db, chunk: RenderedChunk, turn: Turn, onNode: (s: StagedChange) => Promise<void>): Promise<void> {
  for (const s of chunk.stored) await onNode(s);
  for (const r of chunk.rendered) {
    await yieldIfSpent(turn);
    if (await storeStagedRendering(db, r.nodeId, r.version, r.sha, r.text)) {
      await onNode({ nodeId: r.nodeId, version: r.version, sha: r.sha });
      continue;
    }
    const fresh = await findNodeById(db, r.nodeId);
    const s = fresh ? await materializeStaged(db, fresh) : null;
    if (s) await onNode({ nodeId: r.nodeId, version: s.config_version, sha: s.config_sha256 });
  }
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
  const peers = await readRenderedPeers(db, toRender.length === 0 ? [] : sides, turn);
  return { stored, toRender, renderer: new ConfigRenderer(renderCommon(config), sides.map(renderPeer)), forwards, peers };
}

/** One node of a job rendered and hashed. */
function renderJobNode(job: JobInputs, row: RenderSideRow): ChunkRendering {
  const text = job.renderer.render(nodeInput(row), peerIdsOf(job.peers, row.node_id), enabledForwards(job.forwards.get(row.node_id) ?? []));
  return { nodeId: row.node_id, version: row.staged_config_version, sha: stageConfig(null, text).config_sha256, text };
}

/** The rendered pairs among some nodes of a config, as indexes into `sides`. */
interface RenderedPeers {
  sides: readonly RenderSide[];
  indexOf: ReadonlyMap<string, number>;
  /** node index → indexes of the other sides of its rendered pairs. */
  peers: number[][];
}

/**
 * Nodes whose pairs (as `node_a`) one statement reads: a 1,000-node full mesh's node is `node_a`
 * of ~500 pairs on average, and one statement is one uninterrupted stretch of the event loop
 * (~1–3 µs a row).
 */
const PAIR_READ_NODES = 4;

/**
 * The rendered pairs among `sides` (every node of a config): each pair read once, asked by its
 * `node_a` ({@link listPairsWithNodeA}, {@link PAIR_READ_NODES} nodes per statement), yielding
 * between statements once the turn has run its step. A pair is rendered when it is enabled and
 * its connection integrity is not broken ({@link isPairRendered}). Memory: two numbers per
 * rendered pair (~16 MB for a 1,000-node full mesh).
 */
async function readRenderedPeers(db: Db, sides: readonly RenderSide[], turn: Turn): Promise<RenderedPeers> {
  const indexOf = new Map(sides.map((n, i) => [n.node_id, i]));
  const peers: number[][] = sides.map(() => []);
  for (let i = 0; i < sides.length; i += PAIR_READ_NODES) {
    await yieldIfSpent(turn);
    for (const [aId, bId, enabled] of await listPairsWithNodeA(db, sides.slice(i, i + PAIR_READ_NODES).map((n) => n.node_id))) {
      const a = indexOf.get(aId);
      const b = indexOf.get(bId);
      if (a === undefined || b === undefined) continue;
      const [sa, sb] = [sides[a], sides[b]];
      if (sa === undefined || sb === undefined || !isPairRendered(sa, sb, enabled === 1)) continue;
      peers[a]?.push(b);
      peers[b]?.push(a);
    }
  }
  return { sides, indexOf, peers };
}

/** The node_ids of a node's peers (empty for a node not among the sides). */
function peerIdsOf(graph: RenderedPeers, nodeId: string): Set<string> {
  const own = graph.indexOf.get(nodeId);
  const ids = new Set<string>();
  for (const i of own === undefined ? [] : (graph.peers[own] ?? [])) {
    const side = graph.sides[i];
    if (side !== undefined) ids.add(side.node_id);
  }
  return ids;
}

/** The config-wide render inputs of a config row. */
function renderCommon(config: ConfigRow): RenderCommon {
  return {
    config_id: config.config_id,
    tunnel_protocol: config.tunnel_protocol,
    network_cidr: config.network_cidr,
    awg: config.awg_params === null ? null : (JSON.parse(config.awg_params) as AwgParams),
  };
}

/** The rendered node's own fields. */
function nodeInput(node: SelfSide): RenderInput["node"] {
  return {
    node_id: node.node_id,
    private_key: node.private_key,
    public_key: node.public_key,
    address: node.address,
    listen_port: node.listen_port,
    public_address: node.public_address,
  };
}

/** The enabled port forwards as the renderer takes them. */
function enabledForwards(forwards: readonly PortForwardRow[]): RenderInput["port_forwards"] {
  return forwards
    .filter((f) => f.enabled === 1)
    .map((f) => ({ protocol: f.protocol, listen_port: f.listen_port, target_address: f.target_address, target_port: f.target_port }));
}

/**
 * Re-renders the config of every node of one config and stores the staged
 * `(config_version, config_sha256, config_text)` (DESIGN §3 Config versions): the version
 * increments only for nodes whose rendered text changed. A node staged lazily (version >= 1,
 * no sha) keeps its version: its text is the rendering of the current inputs. Used by snapshot
 * restore (on its private copy). O(n²) peer lines in a full mesh, rendered in chunks of `chunk`
 * nodes after one read of the config's pairs ({@link readRenderedPeers}), each peer checked once
 * ({@link ConfigRenderer}),
 * yielding to the event loop before each chunk and whenever a turn has run `stepMs` ms (issue 14
 * item 2: a restore of a 1,000-node mesh blocks no turn for long). The reference the lazy path
 * is proven against stays {@link renderConfigTexts} (`renderNodeConfig` per node).
 *
 * Peers of a node are the other sides of its enabled mesh pairs whose connection integrity is
 * not broken (a pair no side can initiate is left out rather than rendered half-way).
 *
 * @returns the nodes whose staged config changed, with their new version and sha
 */
export async function restageConfig(db: Db, configId: string, now: number, opts: { chunk?: number; stepMs?: number } = {}): Promise<StagedChange[]> {
  const { chunk = 16, stepMs = 10 } = opts;
  const config = await findConfig(db, configId);
  if (!config) return [];
  const nodes = await listRenderSides(db, configId);
  if (nodes.length === 0) return [];
  // Every node of the config is a candidate peer: each is checked and its [Peer] block built once.
  const renderer = new ConfigRenderer(renderCommon(config), nodes.map(renderPeer));
  const changed: StagedChange[] = [];
  const turn: Turn = { start: performance.now(), stepMs };
  const peers = await readRenderedPeers(db, nodes, turn);
  for (let i = 0; i < nodes.length; i += chunk) {
    await nextTurn();
    turn.start = performance.now();
    const part = nodes.slice(i, i + chunk);
    const forwards = await listPortForwardsAmong(db, part.map((n) => n.node_id));
    for (const node of part) {
      await yieldIfSpent(turn);
      const text = renderer.render(nodeInput(node), peerIdsOf(peers, node.node_id), enabledForwards(forwards.get(node.node_id) ?? []));
      const lazy = node.staged_config_sha256 === null && node.staged_config_version >= 1;
      const previous = node.staged_config_sha256 === null ? null : { config_version: node.staged_config_version, config_sha256: node.staged_config_sha256 };
      const staged = lazy ? { ...stageConfig(null, text), config_version: node.staged_config_version } : stageConfig(previous, text);
      if (staged.config_sha256 === node.staged_config_sha256) continue;
      await putStagedText(db, node.node_id, staged.config_version, staged.config_sha256, staged.config_text);
      await updateNode(db, node.node_id, {
        staged_config_version: staged.config_version,
        staged_config_sha256: staged.config_sha256,
        ...(lazy ? {} : { updated_at: now }),
      });
      if (!lazy) changed.push({ nodeId: node.node_id, version: staged.config_version, sha: staged.config_sha256 });
    }
  }
  return changed;
}

/**
 * The full re-render of every node of a config from the stored inputs, writing nothing: the
 * reference the lazy path is proven against. O(n²) in a full mesh.
 * @returns one entry per node, in `listNodes` order; empty when the config does not exist
 */
export async function renderConfigTexts(db: Db, configId: string): Promise<Array<{ node: NodeRow; text: string }>> {
  const config = await findConfig(db, configId);
  if (!config) return [];
  const [nodes, pairs, forwards] = await Promise.all([listNodes(db, configId), listPairs(db, configId), listPortForwardsOfConfig(db, configId)]);
  const byId = new Map(nodes.map((n) => [n.node_id, n]));
  const peersOf = new Map<string, RenderPeer[]>();
  for (const pair of pairs) {
    const a = byId.get(pair.node_a);
    const b = byId.get(pair.node_b);
    if (!a || !b || !isPairRendered(a, b, pair.enabled === 1)) continue;
    for (const [self, other] of [[a, b], [b, a]] as const) {
      const list = peersOf.get(self.node_id) ?? [];
      list.push(renderPeer(other));
      peersOf.set(self.node_id, list);
    }
  }
  return nodes.map((node) => ({
    node,
    text: renderNodeConfig(renderInput(config, node, peersOf.get(node.node_id) ?? [], forwards.get(node.node_id) ?? [])),
  }));
}
