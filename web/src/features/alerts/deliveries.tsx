import { useId, useState } from "react";
import { DELIVERY_STATUSES } from "../../../../src/protocol/alerts.schema.js";
import type { ChannelView, DeliveryStatus, DeliveryView } from "../../api/types.js";
import { RelativeTime } from "../../components/relative-time.js";
import { Empty, ErrorState, Loading } from "../../components/states.js";
import { useUrlState } from "../../url-state.js";
import { useAlertDeliveries, type DeliveryFilters } from "./queries.js";
import { TableHead } from "../../components/table-head.js";

/** A delivery's status as the API says it, as a badge with its word (never colour alone). */
export function DeliveryStatusBadge({ status }: { status: DeliveryStatus }) {
  return <span className={`badge delivery-${status}`}>{status}</span>;
}

/**
 * The delivery log (docs/alerts.md "Visible"): newest first, filtered by channel and status (both
 * in the URL), each delivery's attempts, last HTTP status and error, next attempt, and its attempt
 * history on demand; older pages by "Load older deliveries". Live: every `alert.delivery.updated`
 * reads the pages again.
 */
export function DeliveryLog({ channels }: { channels: ChannelView[] }) {
  const [channelId, setChannelId] = useUrlState("channel");
  const [status, setStatus] = useUrlState("status");
  const filters: DeliveryFilters = { channel_id: channelId, status };
  return (
    <section className="card" aria-labelledby="delivery-log-title">
      <h2 id="delivery-log-title">Delivery log</h2>
      <form className="form-row delivery-filters" role="search" aria-label="Filter the delivery log" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label htmlFor="delivery-channel">Channel</label>
          <select id="delivery-channel" value={channelId} onChange={(e) => setChannelId(e.target.value)}>
            <option value="">any</option>
            {channels.map((c) => (
              <option key={c.channel_id} value={c.channel_id}>
                {c.name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="delivery-status">Status</label>
          <select id="delivery-status" value={status} onChange={(e) => setStatus(e.target.value)}>
            <option value="">any</option>
            {DELIVERY_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
      </form>
      <DeliveryTable filters={filters} names={new Map(channels.map((c) => [c.channel_id, c.name]))} />
    </section>
  );
}

function DeliveryTable({ filters, names }: { filters: DeliveryFilters; names: Map<string, string> }) {
  const query = useAlertDeliveries(filters, true);
  if (query.isPending) return <Loading label="Loading deliveries…" />;
  if (query.isError) return <ErrorState error={query.error} onRetry={() => void query.refetch()} />;
  const items = query.data.pages.flatMap((p) => p.items);
  if (items.length === 0) return <Empty>No deliveries{filters.channel_id !== "" || filters.status !== "" ? " match these filters" : " yet: press Test on a channel"}.</Empty>;
  return (
    <>
      <div className="table-wrap">
        <table className="table stack-table delivery-table">
          <caption className="visually-hidden">Alert deliveries, newest first</caption>
          <TableHead columns={["Created", "Channel", "Alert", "Status", "Attempts", "Last HTTP status", "Last error", "Next attempt"]} hidden="History" />
          {items.map((d) => (
            <DeliveryRow key={d.delivery_id} delivery={d} channel={names.get(d.channel_id) ?? d.channel_id} />
          ))}
        </table>
      </div>
      {query.hasNextPage && (
        <button type="button" onClick={() => void query.fetchNextPage()} disabled={query.isFetchingNextPage}>
          {query.isFetchingNextPage ? "Loading…" : "Load older deliveries"}
        </button>
      )}
    </>
  );
}

/** One delivery (its own `<tbody>`: the row and, when opened, its attempts). */
function DeliveryRow({ delivery: d, channel }: { delivery: DeliveryView; channel: string }) {
  const [open, setOpen] = useState(false);
  const historyId = useId();
  return (
    <tbody>
      <tr>
        <td data-label="Created">
          <RelativeTime iso={d.created_at} />
        </td>
        <td data-label="Channel">{channel}</td>
        <td data-label="Alert" className="mono">
          {d.type}
        </td>
        <td data-label="Status">
          <DeliveryStatusBadge status={d.status} />
        </td>
        <td data-label="Attempts">{d.attempts}</td>
        <td data-label="Last HTTP status">{d.last_http_status ?? <span className="muted">—</span>}</td>
        <td data-label="Last error" className="break delivery-error">
          {d.last_error ?? <span className="muted">—</span>}
        </td>
        <td data-label="Next attempt">{d.next_attempt_at === null ? <span className="muted">—</span> : <RelativeTime iso={d.next_attempt_at} />}</td>
        <td className="actions">
          {d.history.length > 0 && (
            <button type="button" aria-expanded={open} {...(open ? { "aria-controls": historyId } : {})} aria-label={`Attempt history of ${d.type} to ${channel}, ${d.delivery_id}`} onClick={() => setOpen(!open)}>
              {open ? "Hide attempts" : `Attempts (${d.history.length})`}
            </button>
          )}
        </td>
      </tr>
      {open && (
        <tr className="delivery-history" id={historyId}>
          <td colSpan={9}>
            <ol className="attempt-list" aria-label={`Attempts of ${d.delivery_id}`}>
              {d.history.map((a) => (
                <li key={a.attempt}>
                  <strong>#{a.attempt}</strong> <RelativeTime iso={a.at} /> · {a.http_status === null ? "no HTTP answer" : `HTTP ${a.http_status}`} · {a.duration_ms} ms
                  {a.error !== null && <span className="break"> · {a.error}</span>}
                </li>
              ))}
            </ol>
            <p className="muted small">
              Delivery <code>{d.delivery_id}</code>: every attempt carries this id (a webhook’s <code>webhook-id</code>, the receiver’s idempotency key).
            </p>
          </td>
        </tr>
      )}
    </tbody>
  );
}
