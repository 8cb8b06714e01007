import { BaseEdge, EdgeLabelRenderer, MarkerType, type Edge, type EdgeProps } from "@xyflow/react";

/** A point of the drawing, px. */
export interface Point {
  x: number;
  y: number;
}

/**
 * An arrow as dagre routed it inside the compound state that holds both ends: its bends and the
 * centre of the room it kept for the label, relative to that compound's box.
 */
export interface Route {
  parent: string;
  from: string;
  to: string;
  points: Point[];
  label: Point;
  lines: string[];
  timer: boolean;
  /** Accessible name: `from → to: events`. */
  name: string;
}

interface RoutedData extends Record<string, unknown> {
  points: Point[];
  label: Point;
  lines: string[];
}
export type RoutedEdgeType = Edge<RoutedData, "routed">;

/**
 * An arrow drawn along dagre's route, its label (one line per transition) in the room dagre kept
 * for it, so no label lands on a state's name or on another label.
 */
function RoutedEdge({ id, data, markerEnd, style }: EdgeProps<RoutedEdgeType>) {
  if (data === undefined) return null;
  const path = data.points.map((p, i) => `${i === 0 ? "M" : "L"} ${p.x} ${p.y}`).join(" ");
  return (
    <>
      <BaseEdge id={id} path={path} {...(markerEnd === undefined ? {} : { markerEnd })} {...(style === undefined ? {} : { style })} />
      <EdgeLabelRenderer>
        <div className="sc-edge-label" style={{ transform: `translate(-50%, -50%) translate(${data.label.x}px, ${data.label.y}px)` }}>
          {data.lines.map((line) => (
            <div key={line}>{line}</div>
          ))}
        </div>
      </EdgeLabelRenderer>
    </>
  );
}
export const EDGE_TYPES = { routed: RoutedEdge };

/** Height of one line of an edge label (11 px text), and the label's padding, px. */
export const LABEL_LINE = 15;
export const LABEL_PAD = 8;

/** The xyflow edge of a route, its points moved by the absolute position of its compound (`origin`). */
export function routedEdge(route: Route, origin: Point): RoutedEdgeType {
  const move = (p: Point) => ({ x: p.x + origin.x, y: p.y + origin.y });
  return {
    id: `${route.from}>${route.to}`,
    type: "routed",
    source: route.from,
    target: route.to,
    data: { points: route.points.map(move), label: move(route.label), lines: route.lines },
    ariaLabel: route.name,
    className: route.timer ? "sc-edge sc-edge-timer" : "sc-edge",
    markerEnd: { type: MarkerType.ArrowClosed },
    zIndex: 20,
  };
}
