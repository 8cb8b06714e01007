import { useState } from "react";
import type { LogRow } from "../../api/patches.js";
import { useGate } from "../../api/roles.js";
import type { ControlAction, EndpointStatusView, NodeView } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { PresenceBadge } from "../../components/presence-badge.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { useMakeStatic, useResetClient, useSendControl } from "./mutations.js";
import { useEndpointStatus, useLiveControlLog } from "./queries.js";
import { PeersSection } from "./peers.js";
import { FormError } from "../../components/form-error.js";

/**
 * The control page of a dynamic node with `client_initialized=true` (spec §3.2): presence
 * (§3.1), runtime (§3.3), sync state with version and SHA-256 prefix (§3.5), client version
 * (§9 rule 3), last reachable; push config, start, stop, `wg_show` with its output; the control
 * log live; reset client and mode change with confirmations. Every value is the backend's
 * (`endpoint.status.updated` replaces the status, log events add and update rows, through the SSE
 * cache table; spec §6.5 rule 7).
 */
export function NodeControlView({ node }: { node: NodeView }) {
  const { config_id: configId, node_id: nodeId } = node;
  const status = useEndpointStatus(configId, nodeId);
  const log = useLiveControlLog(configId, nodeId);

  return (
    <div className="node-control">
      <section className="card" aria-labelledby="endpoint-title">
        <h2 id="endpoint-title">Endpoint</h2>
        <QueryView query={status} loadingLabel="Loading the endpoint status…">
          {(s) => <StatusFacts status={s} />}
        </QueryView>
      </section>
      <PeersSection configId={configId} nodeId={nodeId} />
      <Controls node={node} rows={log.rows} />
      <WgShowPanel rows={log.rows} />
      <ControlLogTable rows={log.rows} error={log.error} loading={log.loading} />
      <DangerZone node={node} />
    </div>
  );
}

function shortSha(sha: string | null): string {
  return sha === null ? "—" : sha.slice(0, 12);
}

function StatusFacts({ status: s }: { status: EndpointStatusView }) {
  return (
    <dl className="facts facts-grid">
      <div>
        <dt>Presence</dt>
        <dd>
          <PresenceBadge presence={s.client_presence_state} />
        </dd>
      </div>
      <div>
        <dt>Runtime</dt>
        <dd data-runtime={s.runtime_state}>{s.runtime_state}</dd>
      </div>
      <div>
        <dt>Sync</dt>
        <dd>
          <strong>{s.config_version_state ?? "—"}</strong>{" "}
          <span className="muted">
            staged v{s.staged_config.config_version} ({shortSha(s.staged_config.config_sha256)}), confirmed{" "}
            {s.confirmed_config.config_version === null ? "none" : `v${s.confirmed_config.config_version} (${shortSha(s.confirmed_config.config_sha256)})`}
          </span>
        </dd>
      </div>
      <div>
        <dt>Client version</dt>
        <dd>{s.client_version ?? "—"}</dd>
      </div>
      <div>
        <dt>Last reachable</dt>
        <dd>
          <RelativeTime iso={s.last_reachable_at} />
        </dd>
      </div>
    </dl>
  );
}

const ACTIONS: Array<{ action: ControlAction; label: string; primary?: boolean }> = [
  { action: "push_config", label: "Push config", primary: true },
  { action: "start", label: "Start" },
  { action: "stop", label: "Stop" },
  { action: "wg_show", label: "Run wg show" },
];

/**
 * A start the backend holds until the host has confirmed a config (spec §3.5, §3.8): its row is
 * `pending` with the backend's message saying what it waits for ("waiting for the first config…");
 * a start sent at once has no message until its ACK.
 */
function heldStart(rows: LogRow[]): LogRow | undefined {
  return rows.find((r) => r.kind === "command" && r.action === "start" && r.status === "pending" && (r.message ?? "") !== "");
}

function Controls({ node, rows }: { node: NodeView; rows: LogRow[] }) {
  const send = useSendControl(node.config_id, node.node_id);
  const held = heldStart(rows);
  const gate = useGate("sendControlCommand");
  return (
    <section className="card" aria-labelledby="controls-title">
      <h2 id="controls-title">Control</h2>
      <div className="actions">
        {ACTIONS.map((a) => (
          <button key={a.action} type="button" className={a.primary ? "primary" : undefined} {...gate.props} onClick={() => send.mutate(a.action)} disabled={gate.disabled || send.isPending}>
            {a.label}
          </button>
        ))}
        {gate.reason}
      </div>
      {held !== undefined && (
        <p className="muted" role="status">
          Start is {held.message}.
        </p>
      )}
      <FormError error={send.error} />
    </section>
  );
}

/** Output of the newest `wg_show` command: its `command_output` rows in order (spec §6.5 diagnostics flow). */
function WgShowPanel({ rows }: { rows: LogRow[] }) {
  const command = rows.find((r) => r.kind === "command" && r.action === "wg_show");
  const output =
    command === undefined
      ? []
      : rows
          .filter((r) => r.kind === "output" && r.request_id !== null && r.request_id === command.request_id)
          .sort((a, b) => a.log_id - b.log_id);
  const text = output.map((r) => r.output ?? r.message ?? "").join("\n");
  return (
    <section className="card" aria-labelledby="wg-show-title">
      <h2 id="wg-show-title">wg show</h2>
      {command === undefined ? (
        <p className="muted">Run wg show to see the interface as the client reports it (diagnostic only, spec §3.3).</p>
      ) : (
        <>
          <p className="muted">
            Request {command.request_id}: {command.history.join(" → ") || command.status}
          </p>
          <pre className="output" aria-label="wg show output" aria-live="polite" tabIndex={0}>
            {text === "" ? "(no output yet)" : text}
          </pre>
        </>
      )}
    </section>
  );
}

function ControlLogTable({ rows, error, loading }: { rows: LogRow[]; error: unknown; loading: boolean }) {
  return (
    <section className="card" aria-labelledby="control-log-title">
      <h2 id="control-log-title">Control log</h2>
      <FormError error={error} />
      {loading && rows.length === 0 ? (
        <p className="muted" role="status">
          Loading the control log…
        </p>
      ) : rows.length === 0 ? (
        <p className="muted">No commands or client events yet.</p>
      ) : (
        <div className="table-wrap" tabIndex={0} role="region" aria-labelledby="control-log-title">
          <table className="log-table stack-table" aria-labelledby="control-log-title">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Kind</th>
                <th scope="col">What</th>
                <th scope="col">Status</th>
                <th scope="col">Message</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.log_id} data-log-id={r.log_id}>
                  <td data-label="Time">
                    <time dateTime={r.created_at}>{new Date(r.created_at).toLocaleTimeString()}</time>
                  </td>
                  <td data-label="Kind">{r.kind}</td>
                  <td data-label="What">{r.kind === "command" ? r.action : r.event ?? r.action ?? "—"}</td>
                  <td data-label="Status">{r.history.length > 0 ? r.history.join(" → ") : r.level ?? "—"}</td>
                  <td data-label="Message" className="log-message">{r.kind === "output" ? r.output ?? r.message : r.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** Reset client (spec §4 rule 12) and dynamic → static (spec §3.1), each behind a confirmation. */
function DangerZone({ node }: { node: NodeView }) {
  const [confirm, setConfirm] = useState<"reset" | "static" | null>(null);
  const reset = useResetClient(node.config_id, node.node_id);
  const makeStatic = useMakeStatic(node.config_id, node.node_id);
  const closeDialog = { onSuccess: () => setConfirm(null) };
  const failed = reset.error ?? makeStatic.error;
  const resetGate = useGate("resetClient");
  const modeGate = useGate("updateNode");
  // Both need the same role today: then one reason serves both buttons.
  const sameReason = modeGate.can.reason === resetGate.can.reason;
  const modeDescribedBy = sameReason ? { "aria-describedby": resetGate.props["aria-describedby"] } : {};
  return (
    <section className="card" aria-labelledby="danger-title">
      <h2 id="danger-title">Client and mode</h2>
      <div className="actions">
        <button type="button" className="danger" {...resetGate.props} disabled={resetGate.disabled} onClick={() => setConfirm("reset")}>
          Reset client
        </button>
        <button type="button" {...modeGate.props} {...modeDescribedBy} disabled={modeGate.disabled} onClick={() => setConfirm("static")}>
          Change to static
        </button>
        {resetGate.reason}
        {!sameReason && modeGate.reason}
      </div>
      <FormError error={failed} />
      <ConfirmDialog
        open={confirm === "reset"}
        title={`Reset the client of ${node.name}?`}
        confirmLabel="Reset the client"
        danger
        busy={reset.isPending}
        onConfirm={() => reset.mutate(undefined, closeDialog)}
        onCancel={() => setConfirm(null)}
      >
        <p>Its MQTT credentials stop working, its runtime state is cleared and the node goes back to the initialization page. The host needs a new bind.</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={confirm === "static"}
        title={`Change ${node.name} to static?`}
        confirmLabel="Change to static"
        danger
        busy={makeStatic.isPending}
        onConfirm={() => makeStatic.mutate(undefined, closeDialog)}
        onCancel={() => setConfirm(null)}
      >
        <p>The bound client is dropped: its binding is cleared, its broker user removed, and the node's config is then downloaded by hand.</p>
      </ConfirmDialog>
    </section>
  );
}
