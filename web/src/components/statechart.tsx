import dagre from "@dagrejs/dagre";
import { Handle, MarkerType, Position, ReactFlow, type Edge, type Node, type NodeProps } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useEffect, useMemo, useState } from "react";
import type { MachineGraph, MachineState, MachineTransition } from "../api/types.js";
import { shortStateId, transitionLabel } from "../machine-mermaid.js";
import { EDGE_TYPES, LABEL_LINE, LABEL_PAD, routedEdge, type Point, type Route } from "./statechart-edges.js";

const LEAF_W = 132;
const LEAF_H = 46;
const PAD = 14;
const HEAD = 30;
const REGION_GAP = 28;
/** Height of one "from any state" line under a region's states. */
const ANY_LINE = 17;
/** Width of a character of an edge label (11 px font) and of a "from any state" line (11.5 px), px. */
const LABEL_CHAR = 6.4;
const ANY_CHAR = 6.6;
/** Room around the drawing inside its scrolling frame, px. */
const MARGIN = 16;
/** Regions are laid out in rows at most this wide, px. */
const ROW_W = 2000;
const ROW_W_NARROW = 700;

interface StateData extends Record<string, unknown> {
  label: string;
  active: boolean;
  /** Transitions a compound state defines for all its children, as text ("any → offline: mqtt.will"). */
  any: string[];
  /** A region of the root: always active, so its box carries no "active" tag. */
  region: boolean;
}
type StateNode = Node<StateData, "state">;

/** A state box: its key, "active" in text (colour is never the only signal), and for a compound state its "from any state" transitions. */
function StateBox({ data }: NodeProps<StateNode>) {
  return (
    <div className="sc-box">
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <span className="sc-label">{data.label}</span>
      {data.active && !data.region && <span className="sc-active-tag">● active</span>}
      {data.any.length > 0 && (
        <ul className="sc-any">
          {data.any.map((line) => (
            <li key={line}>{line}</li>
          ))}
        </ul>
      )}
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </div>
  );
}
const NODE_TYPES = { state: StateBox };

/**
 * The node statechart, drawn with the console's graph library (xyflow, laid
 * out by dagre): the root's parallel regions side by side, compound states as groups holding
 * their children, transitions as labelled arrows (timers as `after <delay>`), a region's own
 * transitions ("from any state") listed as text in its box. `active` ids are highlighted, with
 * the word "active" in the box and in its accessible name (`presence.online (active)`).
 * Transitions that change no state (no target, or re-entering the source) are not drawn.
 * Its own chunk: the node page loads it with `React.lazy` when the tab is opened.
 */
export default function Statechart({ graph, active }: { graph: MachineGraph; active: ReadonlySet<string> }) {
  const narrow = useNarrow();
  const layout = useMemo(() => layoutGraph(graph, narrow ? ROW_W_NARROW : ROW_W), [graph, narrow]);
  const nodes = useMemo(
    () =>
      layout.nodes.map((n) => {
        const on = active.has(n.id);
        return {
          ...n,
          data: { ...n.data, active: on },
          ariaLabel: `${shortStateId(n.id, graph.machine_id)}${on ? " (active)" : ""}`,
          className: `${n.className ?? ""}${on ? " sc-active" : ""}`,
        } satisfies StateNode;
      }),
    [layout, active, graph.machine_id],
  );
  const size = useMemo(() => drawingSize(layout.nodes), [layout]);
  // Drawn at scale 1 in a frame that scrolls: fitting the whole chart into the card shrank its
  // text to 4–6 px, unreadable. At scale 1 state names are 12.8 px and edge labels 11 px.
  return (
    <div className="statechart-canvas statechart-scroll" tabIndex={0} role="group" aria-label="Statechart drawing at full size; scroll to see all of it">
      <div style={{ width: size.w + 2 * MARGIN, height: size.h + 2 * MARGIN }}>
        <ReactFlow
          nodes={nodes}
          edges={layout.edges}
          nodeTypes={NODE_TYPES}
          edgeTypes={EDGE_TYPES}
          defaultViewport={{ x: MARGIN, y: MARGIN, zoom: 1 }}
          minZoom={1}
          maxZoom={1}
          panOnDrag={false}
          zoomOnScroll={false}
          zoomOnPinch={false}
          zoomOnDoubleClick={false}
          preventScrolling={false}
          nodesDraggable={false}
          nodesConnectable={false}
          elementsSelectable={false}
          nodesFocusable={false}
          edgesFocusable={false}
          proOptions={{ hideAttribution: true }}
        />
      </div>
    </div>
  );
}

/** The drawing's extent: the regions (the only nodes placed absolutely) and their sizes. */
function drawingSize(nodes: readonly StateNode[]): Size {
  let w = 0;
  let h = 0;
  for (const n of nodes) {
    if (n.parentId !== undefined) continue;
    w = Math.max(w, n.position.x + Number(n.style?.width ?? 0));
    h = Math.max(h, n.position.y + Number(n.style?.height ?? 0));
  }
  return { w, h };
}

/** True on a narrow screen (≤ 600 px): the regions are stacked in fewer columns. */
function useNarrow(): boolean {
  const query = "(max-width: 600px)";
  const [narrow, setNarrow] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const list = window.matchMedia(query);
    const on = () => setNarrow(list.matches);
    list.addEventListener("change", on);
    return () => list.removeEventListener("change", on);
  }, []);
  return narrow;
}

interface Size {
  w: number;
  h: number;
}

type Arrow = { source: string; target: string; t: MachineTransition };

/** What the layout steps share: the state tree, the transitions sorted into arrows and "from any state" lines, and the sizes and offsets found so far. */
interface LayoutCtx {
  byId: Map<string, MachineState>;
  children: Map<string, MachineState[]>;
  anyLines: Map<string, string[]>;
  arrows: Arrow[];
  sizes: Map<string, Size>;
  offsets: Map<string, { x: number; y: number }>;
  /** dagre's routes of the arrows, keyed `from>to` (siblings in the compound that holds both ends). */
  routes: Map<string, Route>;
  /** Arrows drawn along a route (the others, across regions, get a plain curve). */
  routed: Set<Arrow>;
}

/** Positions every state (children relative to their parent, as xyflow wants) and the edges. */
function layoutGraph(graph: MachineGraph, rowWidth: number): { nodes: StateNode[]; edges: Edge[] } {
  const byId = new Map(graph.states.map((s) => [s.id, s]));
  const children = new Map<string, MachineState[]>();
  for (const s of graph.states) if (s.parent !== null) children.set(s.parent, [...(children.get(s.parent) ?? []), s]);
  const ctx: LayoutCtx = { byId, children, ...sortTransitions(graph, byId), sizes: new Map(), offsets: new Map(), routes: new Map(), routed: new Set() };
  const root = graph.states.find((s) => s.parent === null);
  if (root === undefined) return { nodes: [], edges: [] };
  placeRegions(ctx, children.get(root.id) ?? [], rowWidth);
  const nodes: StateNode[] = [];
  for (const region of children.get(root.id) ?? []) pushState(ctx, root.id, region, nodes);
  const routedEdges = [...ctx.routes.values()].map((r) => routedEdge(r, absolute(ctx, r.parent)));
  const plain = arrowEdges(
    ctx.arrows.filter((a) => !ctx.routed.has(a)),
    graph.machine_id,
  );
  return { nodes, edges: [...routedEdges, ...plain] };
}

/** Where a state's box sits in the drawing: its offset plus its parents' (regions' offsets are absolute). */
function absolute(ctx: LayoutCtx, id: string): Point {
  const own = ctx.offsets.get(id) ?? { x: 0, y: 0 };
  const parent = ctx.byId.get(id)?.parent;
  if (parent === null || parent === undefined || !ctx.offsets.has(parent)) return own;
  const base = absolute(ctx, parent);
  return { x: own.x + base.x, y: own.y + base.y };
}

/**
 * Sorts the transitions that change state: a compound state's transitions into its own children
 * are "from any state" lines listed in its box; every other one is an arrow.
 */
function sortTransitions(graph: MachineGraph, byId: Map<string, MachineState>): { anyLines: Map<string, string[]>; arrows: Arrow[] } {
  const drawn = graph.transitions.filter((t) => t.targets.some((x) => x !== t.source));
  const anyLines = new Map<string, string[]>();
  const arrows: Arrow[] = [];
  for (const t of drawn) {
    for (const target of t.targets) {
      if (target === t.source) continue;
      if (target.startsWith(`${t.source}.`)) {
        const line = `any → ${byId.get(target)?.key ?? target}: ${transitionLabel(t)}`;
        anyLines.set(t.source, [...(anyLines.get(t.source) ?? []), line]);
      } else arrows.push({ source: t.source, target, t });
    }
  }
  return { anyLines, arrows };
}

/** The child of `ancestor` that holds `id` (or `id` itself), for laying out a compound's children. */
function childOf(byId: Map<string, MachineState>, ancestor: string, id: string): string | undefined {
  let cur = byId.get(id);
  while (cur !== undefined && cur.parent !== ancestor) cur = cur.parent === null ? undefined : byId.get(cur.parent);
  return cur?.id;
}

/** The size of a state's box, its children placed inside it by dagre (offsets recorded in `ctx`). */
function measure(ctx: LayoutCtx, s: MachineState): Size {
  const kids = ctx.children.get(s.id) ?? [];
  if (kids.length === 0) {
    const size = { w: LEAF_W, h: LEAF_H };
    ctx.sizes.set(s.id, size);
    return size;
  }
  const g = new dagre.graphlib.Graph();
  // Wide gaps: an edge's label sits at its middle, which must fall between boxes, not on a name.
  g.setGraph({ rankdir: "TB", nodesep: 48, ranksep: 84, edgesep: 24, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const k of kids) {
    const size = measure(ctx, k);
    g.setNode(k.id, { width: size.w, height: size.h });
  }
  // Edge labels take room in the layout (dagre keeps ranks apart around them), one line per transition.
  const labels = childEdgeLabels(ctx, s.id);
  for (const [k, l] of labels) {
    const [from, to] = k.split(">") as [string, string];
    g.setEdge(from, to, { width: Math.max(...l.lines.map((t) => t.length)) * LABEL_CHAR + LABEL_PAD, height: l.lines.length * LABEL_LINE + LABEL_PAD, labelpos: "c" });
  }
  dagre.layout(g);
  keepRoutes(ctx, s.id, g, labels);
  let w = 0;
  let h = 0;
  for (const k of kids) {
    const pos = g.node(k.id);
    const size = ctx.sizes.get(k.id) ?? { w: LEAF_W, h: LEAF_H };
    const x = PAD + (pos?.x ?? 0) - size.w / 2;
    const y = HEAD + (pos?.y ?? 0) - size.h / 2;
    ctx.offsets.set(k.id, { x, y });
    w = Math.max(w, x + size.w);
    h = Math.max(h, y + size.h);
  }
  // The arrows' labels and bends count too, so none sticks out of its compound's box.
  const drawn = g.graph();
  w = Math.max(w, PAD + (drawn.width ?? 0));
  h = Math.max(h, HEAD + (drawn.height ?? 0));
  const lines = ctx.anyLines.get(s.id) ?? [];
  const anyWidth = Math.max(0, ...lines.map((l) => l.length * ANY_CHAR + 2 * PAD));
  const size = { w: Math.max(w + PAD, LEAF_W + 2 * PAD, anyWidth), h: h + PAD + lines.length * ANY_LINE };
  ctx.sizes.set(s.id, size);
  return size;
}

/** What the arrows between two children of a compound say: one line per transition, whether a timer takes it. */
interface ChildEdge {
  lines: string[];
  timer: boolean;
  arrows: Arrow[];
}

/** The arrows between a compound's children (arrows into deeper states count for the child holding them), keyed `from>to`. */
function childEdgeLabels(ctx: LayoutCtx, parent: string): Map<string, ChildEdge> {
  const labels = new Map<string, ChildEdge>();
  for (const a of ctx.arrows) {
    const from = childOf(ctx.byId, parent, a.source);
    const to = childOf(ctx.byId, parent, a.target);
    if (from === undefined || to === undefined || from === to) continue;
    const k = `${from}>${to}`;
    const e = labels.get(k) ?? { lines: [], timer: false, arrows: [] };
    const deeper = a.target !== to ? `→ ${ctx.byId.get(a.target)?.key ?? a.target}: ` : "";
    const line = `${deeper}${transitionLabel(a.t)}`;
    if (!e.lines.includes(line)) e.lines.push(line);
    e.timer ||= a.t.trigger === "after";
    e.arrows.push(a);
    labels.set(k, e);
  }
  return labels;
}

/** Keeps dagre's route of each arrow between the children of `parent`, in the compound's own coordinates. */
function keepRoutes(ctx: LayoutCtx, parent: string, g: InstanceType<typeof dagre.graphlib.Graph>, labels: Map<string, ChildEdge>): void {
  const local = (p: { x: number; y: number }) => ({ x: PAD + p.x, y: HEAD + p.y });
  for (const [k, l] of labels) {
    const [from, to] = k.split(">") as [string, string];
    const e = g.edge(from, to) as { points?: Point[]; x?: number; y?: number } | undefined;
    if (e?.points === undefined || e.x === undefined || e.y === undefined) continue;
    const name = `${ctx.byId.get(from)?.key ?? from} → ${ctx.byId.get(to)?.key ?? to}: ${l.lines.join(", ")}`;
    ctx.routes.set(k, { parent, from, to, points: e.points.map(local), label: local({ x: e.x, y: e.y }), lines: l.lines, timer: l.timer, name });
    for (const a of l.arrows) ctx.routed.add(a);
  }
}

/**
 * The root's regions side by side (the root itself is not drawn: it is the whole chart), in
 * rows no wider than `rowWidth`, so the chart keeps a readable scale in its frame.
 */
function placeRegions(ctx: LayoutCtx, regions: MachineState[], rowWidth: number): void {
  let x = 0;
  let y = 0;
  let rowH = 0;
  for (const region of regions) {
    const size = measure(ctx, region);
    if (x > 0 && x + size.w > rowWidth) {
      x = 0;
      y += rowH + REGION_GAP;
      rowH = 0;
    }
    ctx.offsets.set(region.id, { x, y });
    x += size.w + REGION_GAP;
    rowH = Math.max(rowH, size.h);
  }
}

/** Appends the xyflow node of `s`, then those of its children (a parent comes before its children, as xyflow wants). */
function pushState(ctx: LayoutCtx, rootId: string, s: MachineState, nodes: StateNode[]): void {
  const size = ctx.sizes.get(s.id) ?? { w: LEAF_W, h: LEAF_H };
  const compound = (ctx.children.get(s.id)?.length ?? 0) > 0;
  nodes.push({
    id: s.id,
    type: "state",
    position: ctx.offsets.get(s.id) ?? { x: 0, y: 0 },
    ...(s.parent !== null && s.parent !== rootId ? { parentId: s.parent, extent: "parent" as const } : {}),
    data: { label: s.key, active: false, any: ctx.anyLines.get(s.id) ?? [], region: s.parent === rootId },
    ariaRole: "img",
    className: `sc-state ${compound ? (s.parent === rootId ? "sc-region" : "sc-compound") : "sc-atomic"}`,
    style: { width: size.w, height: size.h },
    draggable: false,
    zIndex: depth(ctx.byId, s),
  });
  for (const k of ctx.children.get(s.id) ?? []) pushState(ctx, rootId, k, nodes);
}

/** How deep `s` sits under the root (the root is 0), so nested boxes draw above their parents. */
function depth(byId: Map<string, MachineState>, s: MachineState): number {
  const parent = s.parent === null ? undefined : byId.get(s.parent);
  return parent === undefined ? 0 : 1 + depth(byId, parent);
}

/** One arrow per source → target, its label listing every event that takes it (timers dashed). */
function arrowEdges(arrows: Arrow[], machineId: string): Edge[] {
  const merged = new Map<string, { source: string; target: string; labels: string[]; timer: boolean }>();
  for (const a of arrows) {
    const key = `${a.source}>${a.target}`;
    const m = merged.get(key) ?? { source: a.source, target: a.target, labels: [], timer: false };
    m.labels.push(transitionLabel(a.t));
    m.timer ||= a.t.trigger === "after";
    merged.set(key, m);
  }
  return [...merged.values()].map((m) => ({
    id: `${m.source}>${m.target}`,
    source: m.source,
    target: m.target,
    label: m.labels.join(", "),
    ariaLabel: `${shortStateId(m.source, machineId)} → ${shortStateId(m.target, machineId)}: ${m.labels.join(", ")}`,
    className: m.timer ? "sc-edge sc-edge-timer" : "sc-edge",
    // A solid label background keeps the text readable where it crosses a line or a box edge.
    labelShowBg: true,
    labelBgPadding: [4, 2] as [number, number],
    labelBgBorderRadius: 3,
    markerEnd: { type: MarkerType.ArrowClosed },
    zIndex: 20,
  }));
}
