import dagre from "@dagrejs/dagre";
import { Position, type Edge, type Node } from "@xyflow/react";
import { useMemo } from "react";
import { Link } from "react-router";
import type { MeshPairView, NodeTransitionView, NodeView } from "../../api/types.js";
import { IntegrityBadge } from "../../components/integrity-badge.js";
import { ReadOnlyFlow } from "../../components/read-only-flow.js";
import { lastTransitionText, regionState, stateTone, type WatchRegion } from "./watch.js";

/** Above this many nodes the drawing is skipped (the table and filters serve better). */
export const TOPOLOGY_MAX_NODES = 300;
const NODE_W = 170;
const NODE_H = 54;

/**
 * The mesh topology: nodes and pairs laid out by dagre and drawn by xyflow, read-only.
 * Each pair is coloured by the integrity the backend computed (`ok` solid, `broken` dashed red
 * with its reason, `disabled` dotted grey; spec §6.5: broken-link indicators shown from
 * `connections[*]` directly, never re-derived). Each node is a link to its node page (click, tap
 * or Enter), named `Node <name> (…)`; edges are named `Pair <a> – <b>: <status>`, and the broken
 * pairs are listed as text below.
 * Its own chunk: the mesh page loads it with `React.lazy` only when the view is opened.
 * With `watch` set, each node is coloured by that region's state and the state
 * is written in it; its last recorded transition (`latest`) is its `title` and in its name.
 */
export default function Topology({ nodes, pairs, watch = null, latest }: {
  nodes: NodeView[];
  pairs: MeshPairView[];
  watch?: WatchRegion | null;
  latest?: ReadonlyMap<string, NodeTransitionView> | undefined;
}) {
  const names = useMemo(() => new Map(nodes.map((n) => [n.node_id, n.name])), [nodes]);
  const tooMany = nodes.length > TOPOLOGY_MAX_NODES;
  const graph = useMemo(() => (tooMany ? null : layout(nodes, pairs, names, watch, latest)), [nodes, pairs, names, tooMany, watch, latest]);
  const broken = pairs.filter((p) => p.integrity.status === "broken");
  const counts = { ok: 0, broken: 0, disabled: 0 };
  for (const p of pairs) counts[p.integrity.status]++;

  return (
    <figure className="topology" aria-label="Topology">
      {graph === null ? (
        <p className="state state-empty">
          The topology is drawn for up to {TOPOLOGY_MAX_NODES} nodes; this config has {nodes.length}. Use the table and its filters.
        </p>
      ) : nodes.length === 0 ? (
        <p className="state state-empty">No nodes to draw.</p>
      ) : (
        <ReadOnlyFlow className="topology-canvas" nodes={graph.nodes} edges={graph.edges} />
      )}
      <figcaption>
        <ul className="legend" aria-label="Legend">
          <li>
            <span className="legend-line legend-ok" aria-hidden="true" /> ok ({counts.ok})
          </li>
          <li>
            <span className="legend-line legend-broken" aria-hidden="true" /> broken ({counts.broken})
          </li>
          <li>
            <span className="legend-line legend-disabled" aria-hidden="true" /> disabled ({counts.disabled})
          </li>
        </ul>
        {broken.length > 0 && (
          <ul className="broken-list" aria-label="Broken pairs">
            {broken.slice(0, 50).map((p) => (
              <li key={p.pair_id}>
                {names.get(p.node_a) ?? p.node_a} ↔ {names.get(p.node_b) ?? p.node_b} <IntegrityBadge integrity={p.integrity} />
              </li>
            ))}
          </ul>
        )}
      </figcaption>
    </figure>
  );
}

/** The drawing: node boxes placed by {@link placeNodes}, one edge per pair between drawn nodes. */
function layout(
  nodes: NodeView[],
  pairs: MeshPairView[],
  names: Map<string, string>,
  watch: WatchRegion | null,
  latest: ReadonlyMap<string, NodeTransitionView> | undefined,
): { nodes: Node[]; edges: Edge[] } {
  const centre = placeNodes(nodes, pairs, names);
  const flowNodes: Node[] = nodes.map((n) => flowNode(n, centre(n.node_id), watch, latest));
  return { nodes: flowNodes, edges: pairEdges(pairs, names) };
}

/**
 * Node placement by dagre: the centre of each node's box, px. Ranks come from a breadth-first spanning tree of the pairs: a full
 * mesh laid out with every pair would be one long chain whose far links run behind the nodes in
 * between.
 */
function placeNodes(nodes: NodeView[], pairs: MeshPairView[], names: Map<string, string>): (nodeId: string) => { x: number; y: number } | undefined {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 40, ranksep: 90 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.node_id, { width: NODE_W, height: NODE_H });
  const adjacent = new Map<string, string[]>();
  for (const p of pairs) {
    if (!names.has(p.node_a) || !names.has(p.node_b)) continue;
    adjacent.set(p.node_a, [...(adjacent.get(p.node_a) ?? []), p.node_b]);
    adjacent.set(p.node_b, [...(adjacent.get(p.node_b) ?? []), p.node_a]);
  }
  const seen = new Set<string>();
  for (const root of nodes) {
    if (seen.has(root.node_id)) continue;
    seen.add(root.node_id);
    const queue = [root.node_id];
    for (let at = queue.shift(); at !== undefined; at = queue.shift()) {
      for (const next of adjacent.get(at) ?? []) {
        if (seen.has(next)) continue;
        seen.add(next);
        g.setEdge(at, next);
        queue.push(next);
      }
    }
  }
  dagre.layout(g);
  return (nodeId) => g.node(nodeId);
}

/**
 * A node's box at its dagre centre `pos`: a link to the node page holding name and address, the
 * watched region's state, the last transition as its title. The link takes pointer events
 * (xyflow gives a node that is neither draggable nor selectable none) and `nopan`, so a press
 * on it opens the node instead of panning the drawing.
 */
function flowNode(
  n: NodeView,
  pos: { x: number; y: number } | undefined,
  watch: WatchRegion | null,
  latest: ReadonlyMap<string, NodeTransitionView> | undefined,
): Node {
  const state = watch === null ? null : regionState(n, watch);
  const last = latest === undefined ? null : lastTransitionText(latest.get(n.node_id));
  const text = `${n.name}\n${n.address}${state === null ? "" : `\n${watch}: ${state}`}`;
  const name = `Node ${n.name} (${n.address}, ${n.client.client_presence_state}${state === null || watch === "presence" ? "" : `, ${watch} ${state}`})${last === null ? "" : `. ${last}`}`;
  const to = `/configs/${encodeURIComponent(n.config_id)}/nodes/${encodeURIComponent(n.node_id)}`;
  return {
    id: n.node_id,
    position: { x: (pos?.x ?? 0) - NODE_W / 2, y: (pos?.y ?? 0) - NODE_H / 2 },
    data: {
      label: (
        <Link to={to} className="topo-link nopan" aria-label={name} title={last ?? undefined}>
          {text}
        </Link>
      ),
    },
    // The wrapper carries xyflow's aria-roledescription, which needs a role; the link inside names it.
    ariaRole: "group",
    className: `topo-node topo-node-${n.client.client_presence_state}${state === null ? "" : ` topo-watch-${stateTone(state)}`}`,
    sourcePosition: Position.Right,
    targetPosition: Position.Left,
    style: { width: NODE_W },
  } satisfies Node;
}

/** One edge per pair whose nodes are both drawn, styled and named by the pair's integrity. */
function pairEdges(pairs: MeshPairView[], names: Map<string, string>): Edge[] {
  return pairs
    .filter((p) => names.has(p.node_a) && names.has(p.node_b))
    .map((p) => {
      const [a, b] = [names.get(p.node_a) ?? p.node_a, names.get(p.node_b) ?? p.node_b].sort((x, y) => x.localeCompare(y));
      const reason = p.integrity.status === "broken" && p.integrity.reason !== null ? ` (${p.integrity.reason})` : "";
      return {
        id: p.pair_id,
        source: p.node_a,
        target: p.node_b,
        className: `topo-edge topo-edge-${p.integrity.status}`,
        ariaLabel: `Pair ${a} – ${b}: ${p.integrity.status}${reason}`,
        ...(p.integrity.status === "broken" ? { label: "broken" } : {}),
      } satisfies Edge;
    });
}
