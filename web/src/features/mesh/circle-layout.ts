/**
 * The mesh topology's placement: every node on one circle, in name order, with its label running
 * outward along its radius; hubs (which forward between nodes that cannot reach each other) sit
 * inside the circle. In a full mesh every node is paired with every other, so a circle is the one
 * placement where no pair's line runs behind a third node; radial labels keep neighbours apart by
 * the arc between them, so the circle grows with the node count instead of the labels colliding.
 * Deterministic: the same nodes give the same drawing (stable screenshots and tests).
 */

/** Drawn at most this many nodes; above it the page summarises the links and points to the table. */
export const TOPOLOGY_MAX_NODES = 64;
/** Arc between two neighbours on the circle, px: more than a label's line height (11 px text). */
export const ARC_PER_NODE = 17;
/** Smallest circle radius, px (a few nodes still leave room for the hubs inside). */
const MIN_RADIUS = 80;
/** Gap between a node's dot and the start of its label, px. */
export const LABEL_GAP = 9;
/** Width of one label character, px, for sizing the drawing (11 px system sans, a little generous). */
export const CHAR_W = 6.6;
/** Longest label drawn, characters; the full name is in the node's accessible name and title. */
export const LABEL_MAX = 22;
/** At most this many hubs sit inside the circle; more take their place on it like any node. */
const MAX_INNER_HUBS = 6;

export interface PlacedNode {
  id: string;
  x: number;
  y: number;
  /** Direction of the label from the centre, degrees (0: to the right, clockwise); null: a hub inside, label below. */
  angle: number | null;
  label: string;
}

export interface CircleLayout {
  nodes: PlacedNode[];
  radius: number;
  /** Half the drawing's side, px: the circle, the gap and the longest label. */
  half: number;
}

/** The label drawn for a name: at most {@link LABEL_MAX} characters, an ellipsis when cut. */
export function labelOf(name: string, note: string | null = null): string {
  const shown = name.length <= LABEL_MAX ? name : `${name.slice(0, LABEL_MAX - 1)}…`;
  return note === null ? shown : `${shown} (${note})`;
}

/**
 * Places `nodes` (id, name, hub, and a note written after the name) around a circle centred on (0, 0), starting at the top and going
 * clockwise in name order; up to {@link MAX_INNER_HUBS} hubs inside (one at the centre, more on a
 * small inner ring). Coordinates are px.
 */
export function circleLayout(nodes: ReadonlyArray<{ id: string; name: string; hub: boolean; note?: string | null }>): CircleLayout {
  const byName = [...nodes].sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  const hubs = byName.filter((n) => n.hub);
  const inner = hubs.length <= MAX_INNER_HUBS && hubs.length < byName.length ? hubs : [];
  const ring = byName.filter((n) => !inner.includes(n));
  const radius = Math.max(MIN_RADIUS, (ring.length * ARC_PER_NODE) / (2 * Math.PI));
  const placed: PlacedNode[] = ring.map((n, i) => {
    const angle = -90 + (360 * i) / ring.length;
    const rad = (angle * Math.PI) / 180;
    return { id: n.id, x: radius * Math.cos(rad), y: radius * Math.sin(rad), angle, label: labelOf(n.name, n.note ?? null) };
  });
  const innerRadius = inner.length <= 1 ? 0 : radius * 0.35;
  inner.forEach((n, i) => {
    const rad = ((-90 + (360 * i) / inner.length) * Math.PI) / 180;
    placed.push({ id: n.id, x: innerRadius * Math.cos(rad), y: innerRadius * Math.sin(rad), angle: null, label: labelOf(n.name, n.note ?? null) });
  });
  const longest = Math.max(0, ...ring.map((n) => labelOf(n.name, n.note ?? null).length));
  return { nodes: placed, radius, half: Math.ceil(radius + LABEL_GAP + longest * CHAR_W + 12) };
}
