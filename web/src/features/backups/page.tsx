import { useId, useRef, useState, type FormEvent } from "react";
import { errorMessage } from "../../api/client.js";
import type { SnapshotEntry } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { Countdown } from "../../components/countdown.js";
import { QueryView } from "../../components/states.js";
import { useCreateSnapshot, useDeleteSnapshot, useImportSnapshot, useRestoreSnapshot, useSnapshotDownload } from "./mutations.js";
import { useBackups } from "./queries.js";

/** Bytes as "12.3 KB" (1 KB = 1024 bytes). */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB"];
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/**
 * Backups (DESIGN §5 snapshots, spec §2.4): list, create, download through a
 * 5-minute `snapshot_export` token link, import a zip, restore (confirmation; every view is read
 * again), delete (confirmation). The list is replaced by every `snapshot.list.updated` (sse/cache-effects.ts).
 */
export function BackupsPage() {
  const query = useBackups();
  const create = useCreateSnapshot();
  return (
    <section aria-labelledby="backups-title">
      <h1 id="backups-title">Backups</h1>
      <p className="muted">A snapshot is a consistent copy of the database without secrets, sessions or tokens.</p>
      <div className="actions">
        <button type="button" className="primary" onClick={() => create.mutate()} disabled={create.isPending}>
          {create.isPending ? "Creating…" : "Create snapshot"}
        </button>
      </div>
      {create.isError && (
        <p className="form-error" role="alert">
          {errorMessage(create.error)}
        </p>
      )}
      <ImportForm />
      <QueryView query={query} isEmpty={(d) => d.snapshots.length === 0} empty={<p>No snapshots yet. Create one, or import a snapshot file.</p>}>
        {(d) => <SnapshotTable snapshots={d.snapshots} />}
      </QueryView>
    </section>
  );
}

function ImportForm() {
  const inputId = useId();
  const input = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<File | null>(null);
  const upload = useImportSnapshot();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (file === null) return;
    upload.mutate(file, {
      onSuccess: () => {
        setFile(null);
        if (input.current !== null) input.current.value = "";
      },
    });
  };
  return (
    <form className="card form import-form" onSubmit={submit} aria-labelledby="import-title">
      <h2 id="import-title">Import a snapshot</h2>
      <label htmlFor={inputId}>Snapshot file (.zip)</label>
      <input id={inputId} ref={input} type="file" accept=".zip,application/zip" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
      <div className="form-actions">
        <button type="submit" disabled={file === null || upload.isPending}>
          {upload.isPending ? "Importing…" : "Import snapshot"}
        </button>
      </div>
      {upload.isError && (
        <p className="form-error" role="alert">
          {errorMessage(upload.error)}
        </p>
      )}
      {upload.isSuccess && (
        <p className="form-ok" role="status">
          Imported as {upload.data.snapshot_id}. Restore it from the list.
        </p>
      )}
    </form>
  );
}

function SnapshotTable({ snapshots }: { snapshots: SnapshotEntry[] }) {
  return (
    <div className="table-wrap" tabIndex={0} role="region" aria-label="Snapshots">
      <table className="stack-table" aria-label="Snapshots">
        <thead>
          <tr>
            <th scope="col">Snapshot</th>
            <th scope="col">Created</th>
            <th scope="col">Size</th>
            <th scope="col">SHA-256</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {snapshots.map((s) => (
            <SnapshotRow key={s.snapshot_id} snapshot={s} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function SnapshotRow({ snapshot: s }: { snapshot: SnapshotEntry }) {
  const [confirm, setConfirm] = useState<Confirming>(null);
  const grant = useSnapshotDownload(s.snapshot_id);
  const restore = useRestoreSnapshot(s.snapshot_id);
  const remove = useDeleteSnapshot(s.snapshot_id);
  const failed = grant.error ?? restore.error ?? remove.error;
  return (
    <tr>
      <th scope="row">{s.snapshot_id}</th>
      <td data-label="Created">
        <time dateTime={s.created_at}>{new Date(s.created_at).toLocaleString()}</time>
      </td>
      <td data-label="Size">{formatBytes(s.size_bytes)}</td>
      <td data-label="SHA-256">
        <code title={s.sha256}>{s.sha256.slice(0, 12)}</code>
      </td>
      <td data-label="Actions">
        <div className="actions">
          <SnapshotDownload snapshotId={s.snapshot_id} grant={grant} />
          <button type="button" onClick={() => setConfirm("restore")} aria-label={`Restore ${s.snapshot_id}`}>
            Restore
          </button>
          <button type="button" className="danger" onClick={() => setConfirm("delete")} aria-label={`Delete ${s.snapshot_id}`}>
            Delete
          </button>
        </div>
        {failed !== null && (
          <p className="form-error" role="alert">
            {errorMessage(failed)}
          </p>
        )}
        <SnapshotConfirms snapshotId={s.snapshot_id} confirm={confirm} restore={restore} remove={remove} onClose={() => setConfirm(null)} />
      </td>
    </tr>
  );
}

/** Which of a snapshot's confirmations is open. */
type Confirming = "restore" | "delete" | null;

/** "Download link" asks for a short-lived link; once granted, the link with its countdown. */
function SnapshotDownload({ snapshotId, grant }: { snapshotId: string; grant: ReturnType<typeof useSnapshotDownload> }) {
  if (!grant.data) {
    return (
      <button type="button" onClick={() => grant.mutate()} disabled={grant.isPending} aria-label={`Get a download link for ${snapshotId}`}>
        Download link
      </button>
    );
  }
  return (
    <span>
      <a href={grant.data.download_path} download={grant.data.filename} aria-label={`Download ${snapshotId}`}>
        Download
      </a>{" "}
      <span className="muted">
        (<Countdown iso={grant.data.download_token_expires_at} />)
      </span>
    </span>
  );
}

/** The restore and delete confirmations of a snapshot; each closes once its write succeeds. */
function SnapshotConfirms({ snapshotId, confirm, restore, remove, onClose }: {
  snapshotId: string;
  confirm: Confirming;
  restore: ReturnType<typeof useRestoreSnapshot>;
  remove: ReturnType<typeof useDeleteSnapshot>;
  onClose: () => void;
}) {
  const closeDialog = { onSuccess: onClose };
  return (
    <>
      <ConfirmDialog
        open={confirm === "restore"}
        title={`Restore ${snapshotId}?`}
        confirmLabel="Restore this snapshot"
        danger
        busy={restore.isPending}
        onConfirm={() => restore.mutate(undefined, closeDialog)}
        onCancel={onClose}
      >
        <p>Configs, nodes, pairs, port forwards, client state and logs are replaced by the snapshot's. This cannot be undone; create a snapshot first to keep the current state.</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={confirm === "delete"}
        title={`Delete ${snapshotId}?`}
        confirmLabel="Delete this snapshot"
        danger
        busy={remove.isPending}
        onConfirm={() => remove.mutate(undefined, closeDialog)}
        onCancel={onClose}
      >
        <p>The snapshot file and its download links are removed.</p>
      </ConfirmDialog>
    </>
  );
}
