import { useState } from "react";
import type { AuditEntry, AuditVerifyAnswer } from "../../api/types.js";
import { errorMessage } from "../../api/client.js";
import { RelativeTime } from "../../components/relative-time.js";
import { ErrorState, Loading, Empty } from "../../components/states.js";
import { useUrlState } from "../../url-state.js";
import { downloadAuditExport, useAuditEntries, useVerifyAudit, type AuditFilters } from "./queries.js";

/**
 * The audit log (README "Audit log"; admins and owners): who did what, to what, with which
 * outcome, from where, newest first. Filters live in the URL (a view can be shared); the table
 * reads again on every `audit.appended` event; Export downloads the filtered entries as NDJSON;
 * Verify recomputes the hash chain on the server and says whether any entry was altered.
 */
export function AuditPage() {
  const filters = useAuditFilters();
  return (
    <section aria-labelledby="audit-title">
      <div className="page-head">
        <h1 id="audit-title">Audit log</h1>
        <div className="page-actions">
          <VerifyButton />
          <ExportButton filters={filters.values} />
        </div>
      </div>
      <p className="small muted">
        Every change, command, sign-in and refused attempt, newest first. Entries are chained by SHA-256: an edited or removed entry is found by
        Verify. Secrets (passwords, tokens, keys, passphrases) are never recorded.
      </p>
      <FilterForm filters={filters} />
      <AuditTable filters={filters.values} />
    </section>
  );
}

type FilterKey = keyof AuditFilters;

/** The six filters, each a query-string parameter of the page (useUrlState). */
function useAuditFilters(): { values: AuditFilters; set: Record<FilterKey, (v: string) => void> } {
  const [actor, setActor] = useUrlState("actor");
  const [action, setAction] = useUrlState("action");
  const [targetId, setTargetId] = useUrlState("target_id");
  const [outcome, setOutcome] = useUrlState("outcome");
  const [since, setSince] = useUrlState("since");
  const [until, setUntil] = useUrlState("until");
  return {
    values: { actor, action, target_id: targetId, outcome, since, until },
    set: { actor: setActor, action: setAction, target_id: setTargetId, outcome: setOutcome, since: setSince, until: setUntil },
  };
}

function FilterForm({ filters }: { filters: ReturnType<typeof useAuditFilters> }) {
  const { values, set } = filters;
  const text = (key: FilterKey, label: string, hint: string) => (
    <label>
      {label}
      <input type="search" value={values[key]} placeholder={hint} onChange={(e) => set[key](e.target.value)} />
    </label>
  );
  return (
    <form className="form-row audit-filters" role="search" aria-label="Filter the audit log" onSubmit={(e) => e.preventDefault()}>
      {text("actor", "Actor", "username or id")}
      {text("action", "Action", "node.create, or node.")}
      {text("target_id", "Target", "id")}
      <label>
        Outcome
        <select value={values.outcome} onChange={(e) => set.outcome(e.target.value)}>
          <option value="">any</option>
          <option value="ok">ok</option>
          <option value="denied">denied</option>
          <option value="failed">failed</option>
        </select>
      </label>
      <label>
        Since
        <input type="date" value={values.since} onChange={(e) => set.since(e.target.value)} />
      </label>
      <label>
        Until
        <input type="date" value={values.until} onChange={(e) => set.until(e.target.value)} />
      </label>
    </form>
  );
}

function AuditTable({ filters }: { filters: AuditFilters }) {
  const query = useAuditEntries(filters);
  if (query.isPending) return <Loading />;
  if (query.isError) return <ErrorState error={query.error} onRetry={() => void query.refetch()} />;
  const items = query.data.pages.flatMap((p) => p.items);
  if (items.length === 0) return <Empty>No audit entries match these filters.</Empty>;
  return (
    <>
      <div className="table-wrap">
        <table className="table audit-table stack-table">
          <caption className="visually-hidden">Audit entries, newest first</caption>
          <thead>
            <tr>
              {["#", "When", "Actor", "Action", "Target", "Outcome", "Source", "Changes"].map((h) => (
                <th key={h} scope="col">
                  {h}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {items.map((e) => (
              <AuditRow key={e.audit_id} entry={e} />
            ))}
          </tbody>
        </table>
      </div>
      {query.hasNextPage && (
        <button type="button" onClick={() => void query.fetchNextPage()} disabled={query.isFetchingNextPage}>
          {query.isFetchingNextPage ? "Loading…" : "Load older entries"}
        </button>
      )}
    </>
  );
}

function AuditRow({ entry: e }: { entry: AuditEntry }) {
  const actor = e.actor.name ?? (e.actor.kind === "anonymous" ? "anonymous" : (e.actor.id ?? "—"));
  return (
    <tr>
      <td data-label="#">{e.audit_id}</td>
      <td data-label="When" title={e.at}>
        <RelativeTime iso={e.at} />
      </td>
      <td data-label="Actor">
        {actor} <span className="muted small">({e.actor.kind})</span>
      </td>
      <th scope="row" data-label="Action">
        {e.action}
      </th>
      <td data-label="Target" className="break">
        {e.target.id === null ? "—" : `${e.target.type ?? ""} ${e.target.id}`}
      </td>
      <td data-label="Outcome">
        <span className={`badge audit-${e.outcome}`}>{e.outcome}</span>
      </td>
      <td data-label="Source">{e.source_ip ?? "—"}</td>
      <td data-label="Changes" className="small break">
        {changesText(e.changes)}
      </td>
    </tr>
  );
}

/** `{fields, values}` as "name=web-1, role=admin, +password" (a field without a kept value by name). */
export function changesText(changes: Record<string, unknown> | null): string {
  if (changes === null) return "—";
  const fields = Array.isArray(changes["fields"]) ? (changes["fields"] as string[]) : null;
  const values = (changes["values"] ?? {}) as Record<string, unknown>;
  if (fields === null) return Object.entries(changes).map(([k, v]) => `${k}=${String(v)}`).join(", ");
  return fields.map((f) => (f in values ? `${f}=${String(values[f])}` : `+${f}`)).join(", ");
}

function VerifyButton() {
  const verify = useVerifyAudit();
  return (
    <div className="audit-verify">
      <button type="button" onClick={() => verify.mutate()} disabled={verify.isPending}>
        {verify.isPending ? "Verifying…" : "Verify chain"}
      </button>
      {verify.isError && (
        <span className="form-error" role="alert">
          {errorMessage(verify.error)}
        </span>
      )}
      {verify.data !== undefined && <VerifyResult result={verify.data} />}
    </div>
  );
}

function VerifyResult({ result }: { result: AuditVerifyAnswer }) {
  const pruned = result.pruned_through_audit_id === null ? "" : ` (entries up to #${result.pruned_through_audit_id} removed by retention)`;
  return result.ok ? (
    <span className="form-ok" role="status">
      Chain intact: {result.rows_checked} entries checked{pruned}.
    </span>
  ) : (
    <span className="form-error" role="alert">
      Chain broken at entry #{result.first_broken_audit_id}: it was altered, removed or inserted ({result.rows_checked} checked).
    </span>
  );
}

function ExportButton({ filters }: { filters: AuditFilters }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      await downloadAuditExport(filters);
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" onClick={() => void run()} disabled={busy}>
        Export NDJSON
      </button>
      {error !== null && (
        <span className="form-error" role="alert">
          {error}
        </span>
      )}
    </>
  );
}
