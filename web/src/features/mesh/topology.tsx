import { useEffect, useMemo, useRef, useState, type MouseEvent } from "react";
import { useNavigate } from "react-router";
import type { LinkState, LinkView, MeshPairView, NodeTransitionView, NodeView } from "../../api/types.js";
import { IntegrityBadge } from "../../components/integrity-badge.js";
import { useServerOffset } from "../../sse/provider.js";
import { circleLayout, LABEL_GAP, TOPOLOGY_MAX_NODES, type PlacedNode } from "./circle-layout.js";
import { directionSentence, LINK_STATE_TEXT, linkSentence } from "./link-text.js";
import { lastTransitionText, regionState, stateTone, type WatchRegion } from "./watch.js";

export { TOPOLOGY_MAX_NODES };

/**
 * How an edge is drawn: the measured link state when the hosts reported it; before that, the
 * configured integrity (`broken` dashed red, spec §6.5: shown from `connections[*]` directly);
 * a configured `disabled` pair stays faint whatever was measured.
 */
type EdgeKind = Exclude<LinkState, "unknown"> | "unmeasured" | "broken" | "disabled";
const EDGE_KINDS: ReadonlyArray<{ kind: EdgeKind; text: string }> = [
  { kind: "up", text: LINK_STATE_TEXT.up },
  { kind: "stale", text: LINK_STATE_TEXT.stale },
  { kind: "down", text: LINK_STATE_TEXT.down },
  { kind: "unmeasured", text: LINK_STATE_TEXT.unknown },
  { kind: "broken", text: "configured broken" },
  { kind: "disabled", text: "configured disabled" },
];

/** The link matrix entry of each pair, under the pair's two node ids in either order. */
function pairKey(a: string, b: string): string {
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}

function edgeKind(pair: MeshPairView, link: LinkView | undefined): EdgeKind {
  if (pair.integrity.status === "disabled") return "disabled";
  if (link !== undefined && link.link !== "unknown") return link.link;
  return pair.integrity.status === "broken" ? "broken" : "unmeasured";
}

interface DrawnPair {
  pair: MeshPairView;
  link: LinkView | undefined;
  kind: EdgeKind;
  /** "a ↔ b: up, handshake 12 s ago; configured ok" */
  name: string;
}

/**
 * The mesh topology, read-only: every node on a circle (hubs inside, {@link circleLayout}), one
 * line per pair drawn by its measured link state with a pattern per state and a legend with
 * counts, so no state rests on colour alone. Each node is a link to its node page (click, tap or
 * Enter), named `Node <name> (…)`; each pair's line is named `a ↔ b: <state>, handshake … ago;
 * configured <integrity>`. Hovering or tapping a line, or focusing or hovering a node, shows both
 * directions' handshake age and transfer below the drawing. Above {@link TOPOLOGY_MAX_NODES} nodes
 * the drawing gives way to a summary with the counts. `links` is the measured matrix
 * (`GET …/links`), absent until it loaded. With `watch` set, each node is coloured by that
 * region's state and the state is written after its name; its last recorded transition (`latest`)
 * is its title and in its name. Its own chunk: the mesh page loads it with `React.lazy`.
 */
export default function Topology({ nodes, pairs, links, watch = null, latest }: {
  nodes: NodeView[];
  pairs: MeshPairView[];
  links?: LinkView[] | undefined;
  watch?: WatchRegion | null;
  latest?: ReadonlyMap<string, NodeTransitionView> | undefined;
}) {
  const offset = useServerOffset();
  const names = useMemo(() => new Map(nodes.map((n) => [n.node_id, n.name])), [nodes]);
  const drawn = useMemo(() => drawnPairs(pairs, links, names, Date.now() + offset), [pairs, links, names, offset]);
  const counts = new Map<EdgeKind, number>(EDGE_KINDS.map((k) => [k.kind, 0]));
  for (const d of drawn) counts.set(d.kind, (counts.get(d.kind) ?? 0) + 1);
  const broken = pairs.filter((p) => p.integrity.status === "broken");
  const tooMany = nodes.length > TOPOLOGY_MAX_NODES;

  return (
    <figure className="topology" aria-label="Topology">
      {tooMany ? (
        <p className="state state-empty topo-summary">
          {nodes.length} nodes: too many to draw (the drawing holds up to {TOPOLOGY_MAX_NODES}) — see the table. {drawn.length} pairs:{" "}
          {EDGE_KINDS.map((k) => `${counts.get(k.kind) ?? 0} ${k.text}`).join(", ")}.
        </p>
      ) : nodes.length === 0 ? (
        <p className="state state-empty">No nodes to draw.</p>
      ) : (
        <Drawing nodes={nodes} drawn={drawn} names={names} watch={watch} latest={latest} now={Date.now() + offset} />
      )}
      <figcaption>
        <ul className="legend" aria-label="Legend">
          {EDGE_KINDS.map((k) => (
            <li key={k.kind}>
              <svg className="legend-sample" width="28" height="10" aria-hidden="true">
                <line x1="1" y1="5" x2="27" y2="5" className={`topo-line topo-kind-${k.kind}`} />
              </svg>{" "}
              {k.text} ({counts.get(k.kind) ?? 0})
            </li>
          ))}
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

/** Each pair whose two nodes are in the config, with its measured link and its sentence. */
function drawnPairs(pairs: MeshPairView[], links: LinkView[] | undefined, names: Map<string, string>, now: number): DrawnPair[] {
  const byKey = new Map((links ?? []).map((l) => [pairKey(l.node_a, l.node_b), l]));
  return pairs
    .filter((p) => names.has(p.node_a) && names.has(p.node_b))
    .map((pair) => {
      const link = byKey.get(pairKey(pair.node_a, pair.node_b));
      const [a, b] = [names.get(pair.node_a) ?? pair.node_a, names.get(pair.node_b) ?? pair.node_b].sort((x, y) => x.localeCompare(y));
      const reason = pair.integrity.status === "broken" && pair.integrity.reason !== null ? ` (${pair.integrity.reason})` : "";
      return { pair, link, kind: edgeKind(pair, link), name: `${linkSentence(a ?? "", b ?? "", link, now)}; configured ${pair.integrity.status}${reason}` };
    });
}

type Focus = { kind: "pair"; id: string } | { kind: "node"; id: string } | null;

/** The circle: lines under the nodes, then the details of what the pointer or the focus is on. */
function Drawing({ nodes, drawn, names, watch, latest, now }: {
  nodes: NodeView[];
  drawn: DrawnPair[];
  names: Map<string, string>;
  watch: WatchRegion | null;
  latest: ReadonlyMap<string, NodeTransitionView> | undefined;
  now: number;
}) {
  const [focus, setFocus] = useState<Focus>(null);
  const layout = useMemo(
    () => circleLayout(nodes.map((n) => ({ id: n.node_id, name: n.name, hub: n.hub, note: watch === null ? null : regionState(n, watch) }))),
    [nodes, watch],
  );
  const at = useMemo(() => new Map(layout.nodes.map((p) => [p.id, p])), [layout]);
  const side = layout.half * 2;
  const canvas = useRef<HTMLDivElement>(null);
  // A circle wider than the screen (a phone) opens centred in its scrolling frame, and is centred again when the frame changes width.
  useEffect(() => {
    const el = canvas.current;
    if (el === null) return;
    const centre = () => void (el.scrollLeft = (el.scrollWidth - el.clientWidth) / 2);
    centre();
    const watcher = new ResizeObserver(centre);
    watcher.observe(el);
    return () => watcher.disconnect();
  }, [side]);
  return (
    <>
      <div className="topology-canvas" ref={canvas}>
        <svg className="topo-svg" viewBox={`${-layout.half} ${-layout.half} ${side} ${side}`} width={side} height={side} role="group" aria-label={`Mesh drawing: ${nodes.length} nodes, ${drawn.length} pairs`}>
          <g className="topo-edges">
            {drawn.map((d) => (
              <PairLine key={d.pair.pair_id} d={d} from={at.get(d.pair.node_a)} to={at.get(d.pair.node_b)} onFocus={setFocus} active={focusTouches(focus, d)} />
            ))}
          </g>
          <g className="topo-nodes">
            {nodes.map((n) => (
              <NodeMark key={n.node_id} n={n} at={at.get(n.node_id)} watch={watch} latest={latest} onFocus={setFocus} />
            ))}
          </g>
        </svg>
      </div>
      <LinkDetails focus={focus} drawn={drawn} names={names} now={now} />
    </>
  );
}

function focusTouches(focus: Focus, d: DrawnPair): boolean {
  if (focus === null) return false;
  if (focus.kind === "pair") return focus.id === d.pair.pair_id;
  return d.pair.node_a === focus.id || d.pair.node_b === focus.id;
}

/** One pair's line: a wide transparent stroke takes the pointer, the drawn stroke carries the state's pattern. */
function PairLine({ d, from, to, onFocus, active }: { d: DrawnPair; from: PlacedNode | undefined; to: PlacedNode | undefined; onFocus: (f: Focus) => void; active: boolean }) {
  if (from === undefined || to === undefined) return null;
  const show = () => onFocus({ kind: "pair", id: d.pair.pair_id });
  return (
    <g role="img" aria-label={d.name} className={`topo-edge${active ? " topo-edge-active" : ""}`} onMouseEnter={show} onClick={show}>
      <line x1={from.x} y1={from.y} x2={to.x} y2={to.y} className="topo-hit" />
      <line x1={from.x} y1={from.y} x2={to.x} y2={to.y} className={`topo-line topo-kind-${d.kind}`} />
    </g>
  );
}

/**
 * A node: its dot and its label, together a link to the node page. The label runs outward along
 * the node's radius (turned over on the left half so it never reads upside down); a hub inside the
 * circle has its label below its dot.
 */
function NodeMark({ n, at, watch, latest, onFocus }: {
  n: NodeView;
  at: PlacedNode | undefined;
  watch: WatchRegion | null;
  latest: ReadonlyMap<string, NodeTransitionView> | undefined;
  onFocus: (f: Focus) => void;
}) {
  const navigate = useNavigate();
  if (at === undefined) return null;
  const state = watch === null ? null : regionState(n, watch);
  const last = latest === undefined ? null : lastTransitionText(latest.get(n.node_id));
  const name = `Node ${n.name} (${n.address}, ${n.client.client_presence_state}${state === null || watch === "presence" ? "" : `, ${watch} ${state}`}${n.hub ? ", hub" : ""})${last === null ? "" : `. ${last}`}`;
  const to = `/configs/${encodeURIComponent(n.config_id)}/nodes/${encodeURIComponent(n.node_id)}`;
  const open = (e: MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    void navigate(to);
  };
  const show = () => onFocus({ kind: "node", id: n.node_id });
  const tone = state === null ? "" : ` topo-watch-${stateTone(state)}`;
  const flip = at.angle !== null && at.angle > 90 && at.angle < 270;
  const text =
    at.angle === null ? (
      <text className="topo-label" x={at.x} y={at.y + 16} textAnchor="middle">{at.label}</text>
    ) : (
      <text className="topo-label" transform={`translate(${at.x} ${at.y}) rotate(${flip ? at.angle - 180 : at.angle})`} x={flip ? -LABEL_GAP : LABEL_GAP} textAnchor={flip ? "end" : "start"} dominantBaseline="central">
        {at.label}
      </text>
    );
  return (
    <a href={to} onClick={open} onFocus={show} onMouseEnter={show} aria-label={name} className={`topo-node topo-node-${n.client.client_presence_state}${n.hub ? " topo-hub" : ""}${tone}`}>
      {last !== null && <title>{last}</title>}
      <circle cx={at.x} cy={at.y} r={n.hub ? 7 : 5} className="topo-dot" />
      {text}
    </a>
  );
}

/** Below the drawing: the measurements of the line or the node last hovered, tapped or focused (text, read aloud politely). */
function LinkDetails({ focus, drawn, names, now }: { focus: Focus; drawn: DrawnPair[]; names: Map<string, string>; now: number }) {
  const shown = focus === null ? [] : drawn.filter((d) => focusTouches(focus, d));
  return (
    <div className="topo-details" aria-live="polite" aria-label="Link details">
      {focus === null ? (
        <p className="muted">Hover or tap a line, or hover or focus a node, for both sides' handshake and transfer.</p>
      ) : (
        <ul>
          {shown.slice(0, 12).map((d) => {
            const a = names.get(d.link?.node_a ?? d.pair.node_a) ?? "";
            const b = names.get(d.link?.node_b ?? d.pair.node_b) ?? "";
            return (
              <li key={d.pair.pair_id}>
                <strong>{d.name}</strong>
                {d.link !== undefined && (
                  <>
                    <br />
                    {directionSentence(a, b, d.link.a_to_b, now)}
                    <br />
                    {directionSentence(b, a, d.link.b_to_a, now)}
                  </>
                )}
              </li>
            );
          })}
          {shown.length > 12 && <li className="muted">and {shown.length - 12} more pairs of this node</li>}
        </ul>
      )}
    </div>
  );
}
