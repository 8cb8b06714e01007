import { useVirtualizer } from "@tanstack/react-virtual";
import { useEffect, useRef, type RefObject } from "react";
import { Link } from "react-router";
import type { NodeTransitionView, NodeView } from "../../api/types.js";
import { NO_AGENT, NodePresence } from "../../components/presence-badge.js";
import { RelativeTime } from "../../components/relative-time.js";
import { lastTransitionText, regionState, stateTone, WatchChip, type WatchRegion } from "./watch.js";

/** Height of one table row in px (fixed: the virtualiser needs no measuring). */
export const ROW_HEIGHT = 44;

interface NodesTableProps {
  configId: string;
  nodes: NodeView[];
  watch?: WatchRegion | null;
  latest?: ReadonlyMap<string, NodeTransitionView> | undefined;
  total: number;
  selected: ReadonlySet<string>;
  onToggle: (nodeId: string) => void;
  onToggleAll: (select: boolean) => void;
  /** The server has more rows after `nodes`; `onLoadMore` fetches the next page. */
  hasMore?: boolean;
  loadingMore?: boolean;
  onLoadMore?: () => void;
}

/**
 * The nodes table of the mesh page: virtualised with `@tanstack/react-virtual`, so only
 * the rows in view (plus a few) are in the DOM and a 1,000-node config stays fast. A real
 * `<table>`: spacer rows above and below keep the scroll height; `aria-rowcount` says how many
 * rows there are in all. Every value is the backend's (spec §6.5 rule 7): presence, runtime,
 * sync state and version as the node view carries them.
 * With `watch` set, each row is coloured by that region's state (with the state
 * written in a chip); the node's last recorded transition (`latest`) is the name link's
 * description, shown as a tooltip on hover and keyboard focus.
 * `nodes` are the pages loaded so far and `total` the server's count of matching
 * nodes (`aria-rowcount`); when the rows in view come near the last loaded one, `onLoadMore`
 * fetches the next page (a "Load more nodes" button does the same for keyboard users).
 * At narrow widths each row is a stacked card (`stack-table`, every value labelled); rows are
 * measured as drawn, so cards taller than a desktop row keep the scroll height right.
 */
export function NodesTable({
  configId,
  nodes,
  total,
  selected,
  onToggle,
  onToggleAll,
  watch = null,
  latest,
  hasMore = false,
  loadingMore = false,
  onLoadMore,
}: NodesTableProps) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const { items, top, bottom, measure } = useVirtualRows(scrollRef, nodes.length, hasMore && !loadingMore ? onLoadMore : undefined);
  const allSelected = nodes.length > 0 && nodes.every((n) => selected.has(n.node_id));

  return (
    <div className="table-wrap nodes-scroll" ref={scrollRef} tabIndex={0} aria-label="Nodes table, scrollable">
      <table className="table nodes-table stack-table" aria-rowcount={Math.max(total, nodes.length) + 1} aria-busy={loadingMore}>
        <caption className="visually-hidden">
          Nodes ({nodes.length} loaded of {total})
        </caption>
        <NodesHeader allSelected={allSelected} onToggleAll={onToggleAll} />
        <tbody>
          <SpacerRow height={top} />
          {items.map((item) => {
            const n = nodes[item.index];
            if (n === undefined) return null;
            return (
              <NodeRow key={n.node_id} measure={measure} configId={configId} node={n} index={item.index} checked={selected.has(n.node_id)} onToggle={onToggle}
                watch={watch} last={latest === undefined ? null : lastTransitionText(latest.get(n.node_id))} />
            );
          })}
          <SpacerRow height={bottom} />
          {hasMore && (
            <tr className="load-more">
              <td colSpan={COLUMNS}>
                <button type="button" disabled={loadingMore} onClick={onLoadMore}>
                  {loadingMore ? "Loading more nodes…" : "Load more nodes"}
                </button>
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

/** How many columns the table has (the spacer and "load more" rows span them all). */
const COLUMNS = 10;

/**
 * The rows in view (plus a few) of a `count`-row table scrolled inside `scrollRef`, with the
 * heights of the spacers above (`top`) and below (`bottom`) them, in px. `loadMore` (set only
 * while another page can be fetched) is called when the rows in view come within a screen of
 * the last loaded row. `measure` goes on each row (with `data-index`): rows are measured as
 * drawn (a stacked card on a phone is taller than {@link ROW_HEIGHT}).
 */
function useVirtualRows(scrollRef: RefObject<HTMLDivElement | null>, count: number, loadMore: (() => void) | undefined) {
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 8,
    initialRect: { width: 1200, height: 600 },
  });
  const items = virtualizer.getVirtualItems();
  const lastInView = items[items.length - 1]?.index ?? -1;
  useEffect(() => {
    if (loadMore !== undefined && lastInView >= count - 1 - 15) loadMore();
  }, [loadMore, lastInView, count]);
  const top = items[0]?.start ?? 0;
  const bottom = virtualizer.getTotalSize() - (items[items.length - 1]?.end ?? 0);
  return { items, top, bottom, measure: virtualizer.measureElement };
}

/** Keeps the scroll height of the rows not in the DOM; nothing when `height` is 0. */
function SpacerRow({ height }: { height: number }) {
  if (height <= 0) return null;
  return (
    <tr aria-hidden="true" className="spacer">
      <td colSpan={COLUMNS} style={{ height }} />
    </tr>
  );
}

function NodesHeader({ allSelected, onToggleAll }: { allSelected: boolean; onToggleAll: (select: boolean) => void }) {
  return (
    <thead>
      <tr aria-rowindex={1}>
        <th scope="col" className="col-select">
          <label className="select-all">
            <input type="checkbox" aria-label="Select all shown nodes" checked={allSelected} onChange={(e) => onToggleAll(e.target.checked)} />
            <span className="select-all-text" aria-hidden="true">
              Select all shown
            </span>
          </label>
        </th>
        <th scope="col">Name</th>
        <th scope="col">Mode</th>
        <th scope="col">Tunnel address</th>
        <th scope="col">Endpoint</th>
        <th scope="col">Presence</th>
        <th scope="col">Runtime</th>
        <th scope="col">Sync</th>
        <th scope="col">Client</th>
        <th scope="col">Last reachable</th>
      </tr>
    </thead>
  );
}

function NodeRow({ measure, configId, node: n, index, checked, onToggle, watch, last }: {
  measure: (row: HTMLTableRowElement | null) => void;
  configId: string;
  node: NodeView;
  index: number;
  checked: boolean;
  onToggle: (id: string) => void;
  watch: WatchRegion | null;
  /** The last transition's text; null while it loads. */
  last: string | null;
}) {
  const sync = n.client.config_version_state;
  const tipId = `last-${n.node_id}`;
  const rowClass = [checked ? "selected" : "", watch === null ? "" : `watch-row watch-row-${stateTone(regionState(n, watch))}`].filter(Boolean).join(" ");
  return (
    <tr ref={measure} data-index={index} aria-rowindex={index + 2} className={rowClass === "" ? undefined : rowClass} style={{ height: ROW_HEIGHT }}>
      <td className="col-select">
        <input type="checkbox" aria-label={`Select ${n.name}`} checked={checked} onChange={() => onToggle(n.node_id)} />
      </td>
      <th scope="row" className="node-name-cell">
        <Link to={`/configs/${encodeURIComponent(configId)}/nodes/${encodeURIComponent(n.node_id)}`} aria-describedby={last === null ? undefined : tipId} title={last ?? undefined}>
          {n.name}
        </Link>
        {watch !== null && <> <WatchChip node={n} region={watch} /></>}
        {last !== null && (
          <span role="tooltip" id={tipId} className="last-transition-tip">
            {last}
          </span>
        )}
      </th>
      <td data-label="Mode">{n.effective_mode === n.mode ? n.mode : `${n.mode} (as ${n.effective_mode})`}</td>
      <td data-label="Tunnel address" className="mono">{n.address}</td>
      <td data-label="Endpoint" className="mono">
        <Endpoint node={n} />
      </td>
      <td data-label="Presence">
        <NodePresence node={n} />
      </td>
      <td data-label="Runtime">{n.effective_mode === "static" ? <span className="muted">{NO_AGENT}</span> : n.client.runtime_state}</td>
      <td data-label="Sync">
        <span className={`sync sync-${sync ?? "static"}`}>{sync ?? "static"}</span> <span className="muted">v{n.staged_config.config_version}</span>
      </td>
      <td data-label="Client">{n.client.client_version ?? <span className="muted">—</span>}</td>
      <td data-label="Last reachable">
        {n.effective_mode === "static" ? <span className="muted">—</span> : <RelativeTime iso={n.client.last_reachable_at} />}
      </td>
    </tr>
  );
}

/**
 * `host:port`; without a public address, `none`, and the listen port when one is stored (peers
 * cannot dial the node, but its interface listens there).
 */
function Endpoint({ node: n }: { node: NodeView }) {
  if (n.public_address !== null) return <>{`${n.public_address}:${n.listen_port ?? "?"}`}</>;
  return (
    <>
      <span className="muted">none</span>
      {n.listen_port !== null && ` · port ${n.listen_port}`}
    </>
  );
}
