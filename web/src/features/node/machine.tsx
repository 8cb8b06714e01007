import { lazy, Suspense, useMemo, useState } from "react";
import type { NodeTransitionView, RegionValues } from "../../api/types.js";
import { Loading, QueryView } from "../../components/states.js";
import { activeIdsOf, machineToMermaid } from "../../machine-mermaid.js";
import { useMachineGraph, useNodeMachine, useNodeTimeline } from "./queries.js";
import { FormError } from "../../components/form-error.js";

const Statechart = lazy(() => import("../../components/statechart.js"));

/**
 * The "State machine" tab of a dynamic node: the statechart with the node's
 * active states highlighted (from `GET …/machine`, refetched on `endpoint.status.updated`; never
 * derived here), "Copy as Mermaid", and the flight recorder below it (`GET …/timeline`, newest
 * first, "Older" pages back). Choosing a row shows the states as they were after it, from the
 * row's stored `after` value.
 */
export function NodeMachineView({ configId, nodeId }: { configId: string; nodeId: string }) {
  const [chosen, setChosen] = useState<NodeTransitionView | null>(null);
  return (
    <div className="node-machine">
      <StatechartCard configId={configId} nodeId={nodeId} chosen={chosen} onLive={() => setChosen(null)} />
      <TimelineCard configId={configId} nodeId={nodeId} chosen={chosen} onChoose={setChosen} />
    </div>
  );
}

/** The statechart with the node's active states (live, or after the `chosen` row), the regions' values and "Copy as Mermaid". */
function StatechartCard({ configId, nodeId, chosen, onLive }: { configId: string; nodeId: string; chosen: NodeTransitionView | null; onLive: () => void }) {
  const graph = useMachineGraph();
  const machine = useNodeMachine(configId, nodeId);
  const machineId = graph.data?.machine_id ?? "node";
  const shown: RegionValues | undefined = chosen !== null ? chosen.after : machine.data?.regions;
  const active = useMemo(
    () => new Set(chosen !== null ? activeIdsOf(chosen.after, machineId) : (machine.data?.active_states ?? [])),
    [chosen, machine.data, machineId],
  );
  return (
    <section className="card" aria-labelledby="statechart-title">
      <div className="card-head">
        <h2 id="statechart-title">Statechart</h2>
        {graph.data !== undefined && <MermaidButton text={machineToMermaid(graph.data)} />}
      </div>
      <Showing chosen={chosen} noMachine={machine.data?.origin === "none"} onLive={onLive} />
      {shown !== undefined && (
        <dl className="facts sc-regions" aria-label={chosen === null ? "Active states" : "States after the chosen row"}>
          {Object.entries(shown).map(([region, value]) => (
            <div key={region}>
              <dt>{region}</dt>
              <dd>{value}</dd>
            </div>
          ))}
        </dl>
      )}
      <FormError error={machine.error} />
      <QueryView query={graph} loadingLabel="Loading the statechart…">
        {(g) => (
          <figure className="statechart" aria-label="Node statechart">
            <Suspense fallback={<Loading label="Loading the drawing…" />}>
              <Statechart graph={g} active={active} />
            </Suspense>
            <figcaption className="muted">
              Drawn at full size: scroll the frame to see every region. Regions side by side; a box inside another is a child state; “● active” marks the states{" "}
              {chosen === null ? "the node is in now" : "after the chosen row"}. Each arrow&apos;s label lists its events, one per line; timers are labelled with their delay.
            </figcaption>
          </figure>
        )}
      </QueryView>
    </section>
  );
}

/** What the statechart shows: the live state, or the states after the chosen row with a way back to live. */
function Showing({ chosen, noMachine, onLive }: { chosen: NodeTransitionView | null; noMachine: boolean; onLive: () => void }) {
  return (
    <p className="sc-showing" role="status">
      {chosen === null ? (
        noMachine ? (
          "This node has no machine (quarantined at start)."
        ) : (
          "Showing the live state."
        )
      ) : (
        <>
          Showing the states after <time dateTime={chosen.at}>{clock(chosen.at)}</time> ({chosen.event}).{" "}
          <button type="button" onClick={onLive}>
            Show the live state
          </button>
        </>
      )}
    </p>
  );
}

/** The flight recorder, newest first, "Older" pages back; choosing a row again goes back to live. */
function TimelineCard({ configId, nodeId, chosen, onChoose }: {
  configId: string;
  nodeId: string;
  chosen: NodeTransitionView | null;
  onChoose: (row: NodeTransitionView | null) => void;
}) {
  const timeline = useNodeTimeline(configId, nodeId);
  const rows = useMemo(() => timeline.data?.pages.flatMap((p) => p.transitions) ?? [], [timeline.data]);
  return (
    <section className="card" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Timeline</h2>
      <FormError error={timeline.error} />
      {timeline.isPending ? (
        <Loading label="Loading the timeline…" />
      ) : rows.length === 0 ? (
        <p className="muted">No transitions recorded yet.</p>
      ) : (
        <ol className="timeline" aria-label="Transitions, newest first">
          {rows.map((r) => (
            <li key={r.transition_id}>
              <button type="button" className="timeline-row" aria-pressed={chosen?.transition_id === r.transition_id} onClick={() => onChoose(chosen?.transition_id === r.transition_id ? null : r)}>
                <time dateTime={r.at}>{clock(r.at)}</time> {describe(r)}
              </button>
            </li>
          ))}
        </ol>
      )}
      {timeline.hasNextPage && (
        <button type="button" onClick={() => void timeline.fetchNextPage()} disabled={timeline.isFetchingNextPage}>
          {timeline.isFetchingNextPage ? "Loading…" : "Older"}
        </button>
      )}
    </section>
  );
}

/** `03:12:04` (24-hour local time). */
function clock(iso: string): string {
  return new Date(iso).toLocaleTimeString([], { hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function show(v: unknown): string {
  return v === null || v === undefined ? "—" : typeof v === "string" ? (/^[0-9a-f]{64}$/.test(v) ? v.slice(0, 12) : v) : JSON.stringify(v);
}

/** `presence online.fresh → dropped: detect.timed_out (detect)`; the changed fields when no region moved. */
export function describe(r: NodeTransitionView): string {
  let what: string;
  if (r.before === null) what = "initial state";
  else {
    const moved = Object.keys(r.after).filter((k) => r.before?.[k] !== r.after[k]);
    what =
      moved.length > 0
        ? moved.map((k) => `${k} ${r.before?.[k] ?? "—"} → ${r.after[k]}`).join("; ")
        : Object.entries(r.changes)
            .map(([f, [a, b]]) => `${f} ${show(a)} → ${show(b)}`)
            .join("; ") || "no change shown";
  }
  const event = r.event.startsWith("xstate.after.") ? `timer ${r.event.split(".")[2] ?? ""}` : r.event;
  const source = r.request_id !== null ? `${r.source} ${r.request_id}` : r.route !== null ? `${r.source} ${r.route}` : r.source;
  return `${what}: ${event} (${source})`;
}

/** "Copy as Mermaid": the chart as `stateDiagram-v2` text on the clipboard; says "Copied" for 2 s. */
function MermaidButton({ text }: { text: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState("copied");
    } catch {
      setState("failed");
    }
    setTimeout(() => setState("idle"), 2_000);
  };
  return (
    <button type="button" onClick={() => void copy()}>
      {state === "copied" ? "Copied as Mermaid" : state === "failed" ? "Copy failed" : "Copy as Mermaid"}
      <span className="visually-hidden" role="status">
        {state === "copied" ? "Statechart copied as Mermaid text" : ""}
      </span>
    </button>
  );
}
