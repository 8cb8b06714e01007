/**
 * Pure helpers of the "State machine" tab: the Mermaid export of the node
 * statechart and the labels the drawing and the timeline share. No React, no DOM: unit-tested
 * in Node over the real `GET /api/v1/machines/node` answer (test/web/machine-mermaid.test.ts).
 */
import type { MachineGraph, MachineState, MachineTransition, RegionValues } from "./api/types.js";

/** `20000` → `"20 s"`, `300000` → `"5 min"`, `90000` → `"90 s"`, `1500` → `"1500 ms"`. */
export function formatDelay(ms: number): string {
  if (ms % 60_000 === 0 && ms >= 60_000) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

/**
 * What a transition is labelled with: its event (`mqtt.signal`), `after <delay>` for a timer
 * (the delay in ms the service would arm now, else its name), `always` for an eventless one,
 * then ` [guard]` when guarded.
 */
export function transitionLabel(t: MachineTransition): string {
  const what =
    t.trigger === "after" ? `after ${t.delay_ms === null ? (t.delay ?? "?") : formatDelay(t.delay_ms)}` : t.trigger === "always" ? "always" : (t.event ?? "?");
  return t.guard === null ? what : `${what} [${t.guard}]`;
}

/** `node.presence.online` → `presence.online` (the id without the machine id). */
export function shortStateId(id: string, machineId: string): string {
  return id.startsWith(`${machineId}.`) ? id.slice(machineId.length + 1) : id;
}

/**
 * The ids of the active states of a stored state value (a timeline row's `after`, spec'd in
 * src/protocol/machine.schema.ts): `{presence: "online.fresh"}` → `node.presence`,
 * `node.presence.online`, `node.presence.online.fresh`. A mapping of the backend's value to
 * ids, not a derivation of state.
 */
export function activeIdsOf(regions: RegionValues, machineId: string): string[] {
  const ids: string[] = [];
  for (const [region, value] of Object.entries(regions)) {
    let id = `${machineId}.${region}`;
    ids.push(id);
    for (const part of value.split(".")) {
      id = `${id}.${part}`;
      ids.push(id);
    }
  }
  return ids;
}

/** A Mermaid state id: the short id with `.` → `_` (`presence_online`); the root keeps its id. */
function mermaidId(id: string, machineId: string): string {
  return id === machineId ? machineId : shortStateId(id, machineId).replace(/[^A-Za-z0-9_]/g, "_");
}

/**
 * The node statechart as Mermaid `stateDiagram-v2` text.
 * Compound states are composite states with `[*] -->` their initial child; the root's parallel
 * regions are concurrent (`--` between them). A transition a region (or compound state) defines
 * applies to each of its direct children: it is written from each child other than its target.
 * Transitions that only run actions (no target) or re-enter their own state are left out: they
 * change no state. Labels are {@link transitionLabel}.
 * @param graph the `GET /api/v1/machines/node` answer
 * @returns the text, lines joined with `\n`, starting with `stateDiagram-v2`
 */
export function machineToMermaid(graph: MachineGraph): string {
  const children = new Map<string | null, MachineState[]>();
  for (const s of graph.states) children.set(s.parent, [...(children.get(s.parent) ?? []), s]);
  const byId = new Map(graph.states.map((s) => [s.id, s]));
  const id = (s: string) => mermaidId(s, graph.machine_id);
  // The transitions written inside each composite: those among its children.
  const edges = new Map<string, string[]>();
  const seen = new Set<string>();
  const add = (from: string, to: string, label: string) => {
    // Written inside the innermost composite holding both ends (Mermaid scopes states by block).
    let parent = byId.get(from)?.parent ?? graph.machine_id;
    for (let up = byId.get(parent)?.parent; !to.startsWith(`${parent}.`) && up != null; up = byId.get(parent)?.parent) parent = up;
    const line = `${id(from)} --> ${id(to)} : ${label}`;
    if (seen.has(`${parent} ${line}`)) return;
    seen.add(`${parent} ${line}`);
    edges.set(parent, [...(edges.get(parent) ?? []), line]);
  };
  for (const t of graph.transitions) {
    const source = byId.get(t.source);
    if (source === undefined) continue;
    for (const target of t.targets) {
      if (target === t.source) continue;
      const own = children.get(t.source) ?? [];
      const isAncestorOfTarget = target.startsWith(`${t.source}.`);
      if (isAncestorOfTarget && own.length > 0) {
        for (const child of own) if (child.id !== target && !target.startsWith(`${child.id}.`)) add(child.id, target, transitionLabel(t));
      } else {
        add(t.source, target, transitionLabel(t));
      }
    }
  }

  const lines = ["stateDiagram-v2"];
  const write = (s: MachineState, indent: string) => {
    const kids = children.get(s.id) ?? [];
    if (kids.length === 0) {
      lines.push(`${indent}state "${s.key}" as ${id(s.id)}`);
      return;
    }
    lines.push(`${indent}state ${id(s.id)} {`);
    const inner = `${indent}  `;
    if (s.kind === "parallel") {
      kids.forEach((k, i) => {
        if (i > 0) lines.push(`${inner}--`);
        write(k, inner);
      });
    } else {
      if (s.initial !== null) lines.push(`${inner}[*] --> ${id(s.initial)}`);
      for (const k of kids) write(k, inner);
    }
    for (const e of edges.get(s.id) ?? []) lines.push(`${inner}${e}`);
    lines.push(`${indent}}`);
  };
  for (const root of children.get(null) ?? []) write(root, "  ");
  return lines.join("\n");
}
