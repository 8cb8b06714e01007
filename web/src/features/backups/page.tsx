import { useState } from "react";
import { RoleNote, useCan } from "../../api/roles.js";
import type { RestoreAnswer, SnapshotEntry } from "../../api/types.js";
import { Countdown } from "../../components/countdown.js";
import { useFocusOnArrival } from "../../components/focus-on-arrival.js";
import { QueryView } from "../../components/states.js";
import { contentsText, restoredText, SnapshotConfirms, type Confirming } from "./confirms.js";
import { CreateForm, ImportForm } from "./forms.js";
import { useDeleteSnapshot, useRestoreSnapshot, useSnapshotDownload } from "./mutations.js";
import { useBackups } from "./queries.js";
import { FormError } from "../../components/form-error.js";

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
 * Backups (DESIGN §5 snapshots, spec §2.4; docs/backups.md): what a snapshot holds and how to
 * keep it safe, create (optionally encrypted with a passphrase), download through a 5-minute
 * `snapshot_export` token link, import a file, restore (confirmation naming the dynamic nodes
 * that must bind again; every view is read again; a success report), delete (confirmation). The
 * list is replaced by every `snapshot.list.updated` (sse/cache-effects.ts).
 */
export function BackupsPage() {
  const query = useBackups();
  const [restored, setRestored] = useState<RestoreAnswer | null>(null);
  return (
    <section aria-labelledby="backups-title">
      <h1 id="backups-title">Backups</h1>
      <SnapshotSafety />
      <div className="backup-forms">
        <CreateForm />
        <ImportForm />
      </div>
      <RoleNote can={useCan("restoreSnapshot")} what="snapshots are downloaded, restored and deleted by admins" />
      {restored !== null && (
        <p className="form-ok" role="status">
          {restoredText(restored)}
        </p>
      )}
      <QueryView query={query} isEmpty={(d) => d.snapshots.length === 0} empty={<p>No snapshots yet. Create one, or import a snapshot file.</p>}>
        {(d) => <SnapshotTable snapshots={d.snapshots} onRestored={setRestored} />}
      </QueryView>
    </section>
  );
}

/** What a snapshot holds and does not hold (`src/store/snapshots.repository.ts` SCRUBBED_TABLES), and how to keep one safe. */
function SnapshotSafety() {
  return (
    <div className="cards snapshot-safety">
      <section className="card" aria-labelledby="holds-title">
        <h2 id="holds-title">What a snapshot holds</h2>
        <p className="small">
          A consistent copy of the database, including <strong>every node's WireGuard private key</strong>: whoever has the file can impersonate any
          node of your meshes.
        </p>
        <ul className="small">
          <li>configs, their networks and AmneziaWG parameters;</li>
          <li>nodes: names, addresses, endpoints, ports, tags, private and public keys, rendered configs;</li>
          <li>mesh pairs and port forwards;</li>
          <li>what agents reported (host names, platforms, versions) and the SHA-256 of their broker passwords;</li>
          <li>control logs, with command output.</li>
        </ul>
      </section>
      <section className="card" aria-labelledby="not-held-title">
        <h2 id="not-held-title">Not in a snapshot</h2>
        <p className="small">
          The admin password and sessions; access, download and bind tokens; MQTT settings, broker passwords and the service's other secrets; the
          nodes' state-machine history. A restore keeps this server's own.
        </p>
      </section>
      <section className="card" aria-labelledby="safe-title">
        <h2 id="safe-title">Keep it safe</h2>
        <ul className="small">
          <li>Give a passphrase when you create a snapshot: the file is then encrypted (AES-256-GCM, key from scrypt).</li>
          <li>Keep the passphrase apart from the file, in a password manager. The service does not keep it: without it the snapshot cannot be restored.</li>
          <li>Store files where only operators can read them, and delete copies you no longer need. Treat an unencrypted file like the keys themselves.</li>
        </ul>
      </section>
    </div>
  );
}

function SnapshotTable({ snapshots, onRestored }: { snapshots: SnapshotEntry[]; onRestored: (answer: RestoreAnswer) => void }) {
  return (
    <div className="table-wrap" tabIndex={0} role="region" aria-label="Snapshots">
      <table className="stack-table" aria-label="Snapshots">
        <thead>
          <tr>
            <th scope="col">Snapshot</th>
            <th scope="col">Created</th>
            <th scope="col">Holds</th>
            <th scope="col">Encryption</th>
            <th scope="col">Size</th>
            <th scope="col">SHA-256</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {snapshots.map((s) => (
            <SnapshotRow key={s.snapshot_id} snapshot={s} onRestored={onRestored} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function SnapshotRow({ snapshot: s, onRestored }: { snapshot: SnapshotEntry; onRestored: (answer: RestoreAnswer) => void }) {
  const [confirm, setConfirm] = useState<Confirming>(null);
  const grant = useSnapshotDownload(s.snapshot_id);
  const restore = useRestoreSnapshot(s.snapshot_id);
  const remove = useDeleteSnapshot(s.snapshot_id);
  // Download, restore and delete are all the admin's: one check hides the three (a note above the table says why).
  const canRows = [useCan("restoreSnapshot"), useCan("grantSnapshotDownload"), useCan("deleteSnapshot")];
  const canWrite = canRows.every((c) => c.allowed);
  // A refused restore is shown inside its dialog.
  const failed = grant.error ?? remove.error;
  return (
    <tr>
      <th scope="row">{s.snapshot_id}</th>
      <td data-label="Created">
        <time dateTime={s.created_at}>{new Date(s.created_at).toLocaleString()}</time>
      </td>
      <td data-label="Holds">{s.contents === null ? "not counted" : contentsText(s.contents)}</td>
      <td data-label="Encryption">{s.encrypted ? <span className="badge badge-online snapshot-badge">Encrypted</span> : <span className="badge badge-offline snapshot-badge">Not encrypted</span>}</td>
      <td data-label="Size">{formatBytes(s.size_bytes)}</td>
      <td data-label="SHA-256">
        <code title={s.sha256}>{s.sha256.slice(0, 12)}</code>
      </td>
      <td data-label="Actions">
        {canWrite && (
          <div className="actions">
            <SnapshotDownload snapshotId={s.snapshot_id} grant={grant} />
            <button type="button" data-op="restoreSnapshot" onClick={() => setConfirm("restore")} aria-label={`Restore ${s.snapshot_id}`}>
              Restore
            </button>
            <button type="button" className="danger" data-op="deleteSnapshot" onClick={() => setConfirm("delete")} aria-label={`Delete ${s.snapshot_id}`}>
              Delete
            </button>
          </div>
        )}
        <FormError error={failed} />
        <SnapshotConfirms snapshot={s} confirm={confirm} restore={restore} remove={remove} onClose={() => setConfirm(null)} onRestored={onRestored} />
      </td>
    </tr>
  );
}

/**
 * "Download link" asks for a short-lived link; once granted, the link with its countdown, focused
 * (the button that had the focus is gone: a keyboard user lands on what replaced it).
 */
function SnapshotDownload({ snapshotId, grant }: { snapshotId: string; grant: ReturnType<typeof useSnapshotDownload> }) {
  const linkRef = useFocusOnArrival<HTMLAnchorElement>(grant.data);
  if (!grant.data) {
    return (
      <button type="button" data-op="grantSnapshotDownload" onClick={() => grant.mutate()} disabled={grant.isPending} aria-label={`Get a download link for ${snapshotId}`}>
        Download link
      </button>
    );
  }
  return (
    <span>
      <a ref={linkRef} href={grant.data.download_path} download={grant.data.filename} aria-label={`Download ${snapshotId}`}>
        Download
      </a>{" "}
      <span className="muted">
        (<Countdown iso={grant.data.download_token_expires_at} />)
      </span>
    </span>
  );
}
