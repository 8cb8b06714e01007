import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { apiFetch, errorMessage } from "../api/client.js";
import { nodeKeys, nodePath, useControlLogs, useEndpointStatus } from "../api/node-queries.js";
import type { CommandStatus, ControlAction, ControlAnswer, ControlLogView, EndpointStatusView, NodeView } from "../api/types.js";
import { ConfirmDialog } from "../components/confirm-dialog.js";
import { PresenceBadge } from "../components/presence-badge.js";
import { RelativeTime } from "../components/relative-time.js";
import { QueryView } from "../components/states.js";
import { useSseEvent } from "../sse/provider.js";

/**
 * The control page of a dynamic node with `client_initialized=true` (spec §3.2): presence
 * (§3.1), runtime (§3.3), sync state with version and SHA-256 prefix (§3.5), client version
 * (§9 rule 3), last reachable; push config, start, stop, `wg_show` with its output; the control
 * log live; reset client and mode change with confirmations. Every value is the backend's
 * (`endpoint.status.updated` patches the status, log events add and update rows; spec §6.5 rule 7).
 */
export function NodeControlView({ node }: { node: NodeView }) {
  const { config_id: configId, node_id: nodeId } = node;
  const status = useEndpointStatus(configId, nodeId);
  const queryClient = useQueryClient();
  useSseEvent("endpoint.status.updated", (payload) => {
    if (payload.config_id === configId && payload.node_id === nodeId) queryClient.setQueryData(nodeKeys.endpointStatus(configId, nodeId), payload.status);
  });
  const log = useLiveControlLog(configId, nodeId);

  return (
    <div className="node-control">
      <section className="card" aria-labelledby="endpoint-title">
        <h2 id="endpoint-title">Endpoint</h2>
        <QueryView query={status} loadingLabel="Loading the endpoint status…">
          {(s) => <StatusFacts status={s} />}
        </QueryView>
      </section>
      <Controls node={node} onIssued={log.add} />
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

function Controls({ node, onIssued }: { node: NodeView; onIssued: (log: ControlLogView) => void }) {
  const send = useMutation({
    mutationFn: (action: ControlAction) => apiFetch<ControlAnswer>(`${nodePath(node.config_id, node.node_id)}/control`, { method: "POST", body: { action } }),
    onSuccess: (answer) => onIssued(answer.log),
  });
  return (
    <section className="card" aria-labelledby="controls-title">
      <h2 id="controls-title">Control</h2>
      <div className="actions">
        {ACTIONS.map((a) => (
          <button key={a.action} type="button" className={a.primary ? "primary" : undefined} onClick={() => send.mutate(a.action)} disabled={send.isPending}>
            {a.label}
          </button>
        ))}
      </div>
      {send.isError && (
        <p className="form-error" role="alert">
          {errorMessage(send.error)}
        </p>
      )}
    </section>
  );
}

/** A control log row with the statuses this page saw it take (e.g. accepted → applied). */
export interface LogRow extends ControlLogView {
  history: Array<CommandStatus>;
}

/** pending < accepted < a final status (spec §3.4: only an ACK closes a command). */
function rank(status: CommandStatus | null): number {
  if (status === null) return 0;
  if (status === "pending") return 0;
  if (status === "accepted") return 1;
  return 2;
}

function withStatus(prev: LogRow | undefined, log: ControlLogView): LogRow {
  const history = prev?.history ?? [];
  const next = log.status === null || history[history.length - 1] === log.status ? history : [...history, log.status];
  return { ...log, history: next };
}

/**
 * The control log of a node: the REST snapshot (taken once the stream is live) merged with the
 * rows `control.log.created` / `control.log.updated` carry, one row per `log_id` (no duplicates,
 * none lost across a reload: issue 12 test 5). Of two reports of a row, the further-advanced
 * status wins (an event may arrive before or after the snapshot that already holds it).
 */
function useLiveControlLog(configId: string, nodeId: string) {
  const query = useControlLogs(configId, nodeId);
  const [live, setLive] = useState<ReadonlyMap<number, LogRow>>(new Map());
  const add = (log: ControlLogView) =>
    setLive((m) => {
      const prev = m.get(log.log_id);
      if (prev !== undefined && rank(prev.status) > rank(log.status)) return m;
      const next = new Map(m);
      next.set(log.log_id, withStatus(prev, log));
      return next;
    });
  const onLog = (payload: { config_id: string; node_id: string; log: ControlLogView }) => {
    if (payload.config_id === configId && payload.node_id === nodeId) add(payload.log);
  };
  useSseEvent("control.log.created", onLog);
  useSseEvent("control.log.updated", onLog);

  const rows = useMemo(() => {
    const merged = new Map<number, LogRow>();
    for (const log of query.data?.logs ?? []) merged.set(log.log_id, { ...log, history: log.status === null ? [] : [log.status] });
    for (const [id, row] of live) {
      const snap = merged.get(id);
      if (snap !== undefined && rank(snap.status) > rank(row.status)) continue;
      // Statuses the snapshot saw before the first one an event brought (a reload mid-command).
      const first = rank(row.history[0] ?? null);
      const before = snap?.history.filter((st) => rank(st) < first) ?? [];
      merged.set(id, { ...row, history: [...before, ...row.history] });
    }
    return [...merged.values()].sort((a, b) => b.log_id - a.log_id);
  }, [query.data, live]);

  return { rows, add, error: query.isError ? query.error : null, loading: query.isPending };
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
      {error !== null && (
        <p className="form-error" role="alert">
          {errorMessage(error)}
        </p>
      )}
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
  const queryClient = useQueryClient();
  const [confirm, setConfirm] = useState<"reset" | "static" | null>(null);
  const path = nodePath(node.config_id, node.node_id);
  const reset = useMutation({
    mutationFn: () => apiFetch<EndpointStatusView>(`${path}/reset-client`, { method: "POST" }),
    onSuccess: () => {
      setConfirm(null);
      void queryClient.invalidateQueries({ queryKey: nodeKeys.node(node.config_id, node.node_id), exact: true });
    },
  });
  const makeStatic = useMutation({
    mutationFn: () => apiFetch<NodeView>(path, { method: "PATCH", body: { mode: "static" } }),
    onSuccess: (view) => {
      setConfirm(null);
      queryClient.setQueryData(nodeKeys.node(node.config_id, node.node_id), view);
    },
  });
  const failed = reset.error ?? makeStatic.error;
  return (
    <section className="card" aria-labelledby="danger-title">
      <h2 id="danger-title">Client and mode</h2>
      <div className="actions">
        <button type="button" className="danger" onClick={() => setConfirm("reset")}>
          Reset client
        </button>
        <button type="button" onClick={() => setConfirm("static")}>
          Change to static
        </button>
      </div>
      {failed !== null && (
        <p className="form-error" role="alert">
          {errorMessage(failed)}
        </p>
      )}
      <ConfirmDialog
        open={confirm === "reset"}
        title={`Reset the client of ${node.name}?`}
        confirmLabel="Reset the client"
        danger
        busy={reset.isPending}
        onConfirm={() => reset.mutate()}
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
        onConfirm={() => makeStatic.mutate()}
        onCancel={() => setConfirm(null)}
      >
        <p>The bound client is dropped: its binding is cleared, its broker user removed, and the node's config is then downloaded by hand.</p>
      </ConfirmDialog>
    </section>
  );
}
