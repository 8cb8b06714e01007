import { lazy, Suspense, useCallback, useEffect, useMemo, useState } from "react";
import { Link, useLocation, useParams, useSearchParams } from "react-router";
import { errorMessage } from "../../api/client.js";
import { useGate } from "../../api/roles.js";
import type { ConfigDetailView, NodeCountsAnswer, NodeFilterQuery, NodeTransitionView, NodeView } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { Loading, QueryView } from "../../components/states.js";
import { useUrlState } from "../../url-state.js";
import type { NetworkNormalised } from "../configs/page.js";
import { AddNodeForm, PackageDownload, ProtocolSwitch } from "./forms.js";
import { useDeleteNodes, usePushConfigToNodes } from "./mutations.js";
import { NodesTable } from "./nodes-table.js";
import { PairsSection, TagsSection } from "./pairs.js";
import { CheckLinks, useLinkPolling } from "./links.js";
import { useConfigDetail, useConfigLinks, useLatestTransitions, useMeshPairs, useNodeCounts, useNodePages } from "./queries.js";
import { WatchSelect, watchRegion, type WatchRegion } from "./watch.js";

/** The topology (an SVG circle, `circle-layout.ts`) is its own chunk, loaded when the view is opened. */
const Topology = lazy(() => import("./topology.js"));

const PRESENCE = ["online", "dropped", "offline"] as const;
const MODES = ["static", "dynamic"] as const;
const SYNCS = ["latest", "pending", "static"] as const;

/**
 * Mesh page of a config, `/configs/:configId`: the nodes table (virtualised) with
 * search and filters in the URL (`q`, `presence`, `mode`, `sync`, `view`), row selection with
 * bulk actions after the rows (keyboard order follows reading order: select, then act), the
 * topology, add node, pairs, tags, the protocol switch and the bulk config package. Live through the SSE cache table (`sse/cache-effects.ts`; spec §6.5 rule 7).
 * "Colour nodes by" (`watch`) colours table rows and topology nodes by a
 * region's state, and each node's last recorded transition shows on hover and focus.
 * The table's rows come from the server page by page (`GET …/nodes` with
 * `limit` and the answer's cursor, loaded as the table scrolls); the filters and the search are
 * sent to the server, and the counts shown are `GET …/node-counts`.
 */
export function MeshPage() {
  const { configId = "" } = useParams();
  const detail = useConfigDetail(configId);
  return (
    <section aria-labelledby="mesh-title">
      <p className="breadcrumb">
        <Link to="/configs">Configs</Link> /
      </p>
      {!detail.isSuccess && <h1 id="mesh-title">Config</h1>}
      <QueryView query={detail} loadingLabel="Loading the config…">
        {(config) => <MeshBody config={config} />}
      </QueryView>
    </section>
  );
}

function MeshBody({ config }: { config: ConfigDetailView }) {
  const url = useMeshParams();
  const [watchValue, setWatch] = useUrlState("watch");
  const watch = watchRegion(watchValue);
  const latest = useLatestTransitions(config.config_id).data;
  const rows = useNodeRows(config.config_id, url);
  const selection = useSelection(config, rows.shown);

  return (
    <>
      <MeshHead config={config} />
      <AddNodeForm config={config} />

      <section className="card" aria-labelledby="nodes-title">
        <div className="toolbar">
          <h2 id="nodes-title">Nodes</h2>
          <WatchSelect value={watchValue} onChange={setWatch} />
          <ViewSwitch view={url.view} onChange={(v) => url.setParam("view", v === "table" ? "" : v)} />
        </div>
        {url.view === "table" ? (
          <>
            <NodeFilters text={url.text} presence={url.presence} mode={url.mode} sync={url.sync} onText={url.setText} onFilter={url.setParam} />
            <NodeCounts counts={rows.counts} />
            {config.nodes.length === 0 ? (
              <p className="state state-empty">No nodes yet. Add the first one above.</p>
            ) : rows.pages.isError ? (
              <p className="state state-error" role="alert">Could not load the nodes: {errorMessage(rows.pages.error)}</p>
            ) : (
              <NodesTable configId={config.config_id} nodes={rows.shown} watch={watch} latest={latest} total={rows.counts?.matching ?? rows.shown.length} selected={selection.live}
                onToggle={selection.toggle} onToggleAll={selection.toggleAll} hasMore={rows.pages.hasNextPage} loadingMore={rows.pages.isFetchingNextPage} onLoadMore={rows.loadMore} />
            )}
            {config.nodes.length > 0 && <BulkActions config={config} selected={selection.live} onDone={selection.clear} />}
          </>
        ) : (
          <TopologyView config={config} watch={watch} latest={latest} />
        )}
      </section>

      <PairsSection config={config} />
      <TagsSection config={config} />
    </>
  );
}

/**
 * The config's name, network, protocol and node count, with the protocol switch and the config
 * package; after a create whose network the service normalised (the configs page says so in the
 * navigation's state), what was typed and what was saved.
 */
function MeshHead({ config }: { config: ConfigDetailView }) {
  const arrival = useLocation().state as Partial<NetworkNormalised> | null;
  return (
    <div className="page-head">
      <div>
        <h1 id="mesh-title">{config.name}</h1>
        <p className="muted">
          <span className="mono">{config.network_cidr}</span> · protocol <strong>{config.tunnel_protocol}</strong> · {config.nodes.length}{" "}
          {config.nodes.length === 1 ? "node" : "nodes"}
        </p>
        {arrival?.networkSaved === config.network_cidr && arrival.networkAsked !== undefined && (
          <p className="notice" role="status">
            The network <span className="mono">{arrival.networkAsked}</span> was saved as <span className="mono">{config.network_cidr}</span>: a config takes a
            whole network, so the host part of the address was set to zero. Nodes get addresses inside it.
          </p>
        )}
      </div>
      <div className="page-actions">
        <ProtocolSwitch config={config} />
        <PackageDownload configId={config.config_id} />
      </div>
    </div>
  );
}

/** The view, search and filters of the mesh page, as kept in the URL; `q` is the search sent to the server. */
interface MeshParams {
  view: "table" | "topology";
  /** The search box as typed. */
  text: string;
  setText: (text: string) => void;
  /** The search text, trimmed, once typing has paused for 200 ms. */
  q: string;
  presence: string;
  mode: string;
  sync: string;
  /** Sets (or, with "", removes) one URL parameter, replacing the history entry. */
  setParam: (key: string, value: string) => void;
}

/**
 * The URL's view, search and filters. The search box keeps its own state (typing stays
 * immediate whatever the router does) and writes the URL; the server is asked 200 ms after the
 * last keystroke.
 */
function useMeshParams(): MeshParams {
  const [params, setParams] = useSearchParams();
  const [text, setTextState] = useState(() => params.get("q") ?? "");
  const q = useDebounced(text.trim(), 200);
  const setParam = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value === "") next.delete(key);
    else next.set(key, value);
    setParams(next, { replace: true });
  };
  const setText = (v: string) => {
    setTextState(v);
    setParam("q", v);
  };
  const view = params.get("view") === "topology" ? "topology" : "table";
  return { view, text, setText, q, presence: params.get("presence") ?? "", mode: params.get("mode") ?? "", sync: params.get("sync") ?? "", setParam };
}

/** The server filters, counts and pages; the table loads pages as it scrolls (`loadMore`). */
function useNodeRows(configId: string, url: MeshParams) {
  const { q, presence, mode, sync } = url;
  const filters = useMemo(() => nodeFilters({ q, presence, mode, sync }), [q, presence, mode, sync]);
  const pages = useNodePages(configId, filters);
  const counts = useNodeCounts(configId, filters).data;
  const shown = useMemo(() => pages.data?.pages.flatMap((p) => p.nodes) ?? [], [pages.data]);
  const { fetchNextPage } = pages;
  const loadMore = useCallback(() => void fetchNextPage({ cancelRefetch: false }), [fetchNextPage]);
  return { pages, counts, shown, loadMore };
}

/** The selected rows (`live`: rows deleted meanwhile leave the selection); "select all" takes the rows shown. */
function useSelection(config: ConfigDetailView, shown: NodeView[]) {
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const live = useMemo(() => new Set([...selected].filter((id) => config.nodes.some((n) => n.node_id === id))), [selected, config.nodes]);
  const toggle = (id: string) =>
    setSelected((s) => {
      const next = new Set(s);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const toggleAll = (on: boolean) => setSelected(on ? new Set(shown.map((n) => n.node_id)) : new Set());
  const clear = () => setSelected(new Set());
  return { live, toggle, toggleAll, clear };
}

/** The filters that filter (empty ones left out), as the node list and counts take them. */
function nodeFilters(f: { q: string; presence: string; mode: string; sync: string }): NodeFilterQuery {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(f)) if (value !== "") out[key] = value;
  return out as NodeFilterQuery;
}

/** `value`, once it has not changed for `ms`. */
function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

/**
 * How many nodes match, and the config's nodes by presence and sync state: the server's counts
 * (spec §6.5 rule 7); "offline" counts dynamic nodes only, static nodes are counted apart.
 */
function NodeCounts({ counts }: { counts: NodeCountsAnswer | undefined }) {
  if (counts === undefined) return <p className="muted table-count">Counting nodes…</p>;
  const { total, matching, presence, sync, mode } = counts;
  // A static node has no agent: the backend's presence says offline (spec §3.1), the console says "static (no agent)".
  const offlineAgents = presence.offline - mode.static;
  return (
    <div className="table-count">
      <p className="muted" role="status">
        {matching === total ? `${total} ${total === 1 ? "node" : "nodes"}` : `${matching} of ${total} nodes match`}
      </p>
      <p className="muted state-counts" aria-label="Nodes by state">
        online {presence.online} · dropped {presence.dropped} · offline {offlineAgents} · static (no agent) {mode.static} · latest {sync.latest} · pending {sync.pending}
      </p>
    </div>
  );
}

function FilterSelect({ id, label, value, options, onChange }: { id: string; label: string; value: string; options: readonly string[]; onChange: (v: string) => void }) {
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)}>
        <option value="">any</option>
        {options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    </div>
  );
}

/** The topology with the measured links (drawn as they arrive; the pairs alone until then), "Check links", and a refresh while it is on screen. */
function TopologyView({ config, watch, latest }: { config: ConfigDetailView; watch: WatchRegion | null; latest: ReadonlyMap<string, NodeTransitionView> | undefined }) {
  const pairs = useMeshPairs(config.config_id);
  const links = useConfigLinks(config.config_id);
  useLinkPolling(config.config_id);
  const names = useMemo(() => new Map(config.nodes.map((n) => [n.node_id, n.name])), [config.nodes]);
  return (
    <>
      <CheckLinks configId={config.config_id} names={names} />
      {links.isError && <p role="alert">The measured links could not be read: {links.error.message}</p>}
      <QueryView query={pairs} loadingLabel="Loading pairs…">
        {(data) => (
          <Suspense fallback={<Loading label="Loading the topology…" />}>
            <Topology nodes={config.nodes} pairs={data.mesh_pairs} links={links.data?.links} watch={watch} latest={latest} />
          </Suspense>
        )}
      </QueryView>
    </>
  );
}

/** The search box and the presence, mode and sync filters of the nodes table (each kept in the URL by the caller). */
function NodeFilters(props: { text: string; presence: string; mode: string; sync: string; onText: (v: string) => void; onFilter: (key: string, v: string) => void }) {
  const { onFilter } = props;
  return (
    <div className="filters">
      <div>
        <label htmlFor="node-search">Search nodes</label>
        <input id="node-search" type="search" placeholder="Name, address or tag" value={props.text} onChange={(e) => props.onText(e.target.value)} />
      </div>
      <FilterSelect id="filter-presence" label="Presence" value={props.presence} options={PRESENCE} onChange={(v) => onFilter("presence", v)} />
      <FilterSelect id="filter-mode" label="Mode" value={props.mode} options={MODES} onChange={(v) => onFilter("mode", v)} />
      <FilterSelect id="filter-sync" label="Sync" value={props.sync} options={SYNCS} onChange={(v) => onFilter("sync", v)} />
    </div>
  );
}

/** Table or topology (`?view=topology`). */
function ViewSwitch({ view, onChange }: { view: "table" | "topology"; onChange: (view: "table" | "topology") => void }) {
  return (
    <div className="view-switch" role="group" aria-label="View">
      <button type="button" aria-pressed={view === "table"} onClick={() => onChange("table")}>
        Table
      </button>
      <button type="button" aria-pressed={view === "topology"} onClick={() => onChange("topology")}>
        Topology
      </button>
    </div>
  );
}

/**
 * Push config / delete for the selected rows, after the table; one request per node, failures
 * listed by node name. Push is offered only when the selection holds dynamic nodes (a static
 * node has no agent to push to) and says how many static ones it leaves out. The delete
 * confirmation keeps the nodes it was opened for, and the result counts what was asked and
 * answered: a live update may take a node out of the selection meanwhile.
 */
function BulkActions({ config, selected, onDone }: { config: ConfigDetailView; selected: ReadonlySet<string>; onDone: () => void }) {
  const [asked, setAsked] = useState<readonly NodeView[] | null>(null);
  const [result, setResult] = useState<string | null>(null);
  const nodes = config.nodes.filter((n) => selected.has(n.node_id));
  const dynamic = nodes.filter((n) => n.mode === "dynamic");
  const skipped = nodes.length - dynamic.length;
  const push = usePushConfigToNodes(config.config_id);
  const remove = useDeleteNodes(config.config_id);
  const pushAll = () =>
    push.mutate(dynamic, { onSuccess: (failures, sent) => setResult(failures.length === 0 ? `Config push sent to ${counted(sent.length)}.` : failures.join("; ")) });
  const deleteAll = (list: readonly NodeView[]) =>
    remove.mutate(list, {
      onSuccess: (failures, sent) => {
        setAsked(null);
        setResult(failures.length === 0 ? `Deleted ${counted(sent.length)}.` : `Deleted ${counted(sent.length - failures.length)}. ${failures.join("; ")}`);
        onDone();
      },
    });
  const none = nodes.length === 0;
  const pushGate = useGate("sendControlCommand");
  const deleteGate = useGate("deleteNode");
  return (
    <div className="bulk" role="group" aria-label="Bulk actions">
      <span className="muted">{none ? "No node selected" : `${nodes.length} selected`}</span>
      {dynamic.length > 0 && (
        <button type="button" {...pushGate.props} disabled={pushGate.disabled || push.isPending} onClick={() => { setResult(null); pushAll(); }}>
          Push config to {dynamic.length} dynamic {dynamic.length === 1 ? "node" : "nodes"}
        </button>
      )}
      {dynamic.length > 0 && pushGate.reason}
      {dynamic.length > 0 && skipped > 0 && (
        <span className="muted">
          ({counted(skipped, "static node")} skipped: static nodes take their config file)
        </span>
      )}
      <button type="button" className="danger-outline" {...deleteGate.props} disabled={deleteGate.disabled || none} onClick={() => { setResult(null); setAsked(nodes); }}>
        Delete selected
      </button>
      {deleteGate.reason}
      {result !== null && (
        <span className="bulk-result" role="status">
          {result}
        </span>
      )}
      <ConfirmDialog
        open={asked !== null}
        title={`Delete ${counted(asked?.length ?? 0)}?`}
        confirmLabel="Delete nodes"
        danger
        busy={remove.isPending}
        onConfirm={() => asked !== null && deleteAll(asked)}
        onCancel={() => setAsked(null)}
      >
        <p>{(asked ?? []).map((n) => n.name).slice(0, 10).join(", ") + ((asked?.length ?? 0) > 10 ? ` and ${(asked?.length ?? 0) - 10} more` : "")} will be deleted with their pairs and port forwards.</p>
      </ConfirmDialog>
    </div>
  );
}

/** `1 node`, `3 nodes` (or of another `noun`). */
function counted(n: number, noun = "node"): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
