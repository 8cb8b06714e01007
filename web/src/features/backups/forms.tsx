/** The create and import forms of the backups page (DESIGN §5 snapshots; docs/backups.md). */
import { useId, useRef, useState, type FormEvent } from "react";
import { errorMessage } from "../../api/client.js";
import { useGate } from "../../api/roles.js";
import { useCreateSnapshot, useImportSnapshot } from "./mutations.js";
import { FormError } from "../../components/form-error.js";

/** The shortest passphrase the service accepts for a new encrypted snapshot. */
const MIN_PASSPHRASE = 12;

/**
 * "Create a snapshot": two passphrase fields (optional; when filled they must agree and the
 * snapshot is encrypted) and the create button, whose name says which kind it makes. The
 * passphrase lives in the form until the create answers and is cleared then.
 */
export function CreateForm() {
  const passId = useId();
  const repeatId = useId();
  const [passphrase, setPassphrase] = useState("");
  const [repeat, setRepeat] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  const create = useCreateSnapshot();
  const encrypted = passphrase !== "";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (encrypted && passphrase.length < MIN_PASSPHRASE) return setProblem(`A passphrase needs at least ${MIN_PASSPHRASE} characters.`);
    if (encrypted && passphrase !== repeat) return setProblem("The passphrases do not match.");
    setProblem(null);
    create.mutate(encrypted ? passphrase : undefined, {
      onSuccess: () => {
        setPassphrase("");
        setRepeat("");
      },
    });
  };
  const failure = problem ?? (create.isError ? errorMessage(create.error) : null);
  const gate = useGate("createSnapshot");
  return (
    <form className="card form backup-form" onSubmit={submit} aria-labelledby="create-title">
      <h2 id="create-title">Create a snapshot</h2>
      <p className="muted small">With a passphrase the file is encrypted; without one it is a plain zip that anyone holding it can read.</p>
      <fieldset disabled={gate.disabled}>
      <div className="passphrase-fields">
        <div>
          <label htmlFor={passId}>Passphrase (optional)</label>
          <input id={passId} type="password" autoComplete="new-password" value={passphrase} onChange={(e) => setPassphrase(e.target.value)} />
        </div>
        <div>
          <label htmlFor={repeatId}>Repeat the passphrase</label>
          <input id={repeatId} type="password" autoComplete="new-password" value={repeat} onChange={(e) => setRepeat(e.target.value)} disabled={!encrypted} />
        </div>
      </div>
      <div className="form-actions">
        <button type="submit" className="primary" {...gate.props} disabled={gate.disabled || create.isPending}>
          {create.isPending ? "Creating…" : encrypted ? "Create encrypted snapshot" : "Create snapshot"}
        </button>
        {gate.reason}
      </div>
      </fieldset>
      {failure !== null && (
        <p className="form-error" role="alert">
          {failure}
        </p>
      )}
      {create.isSuccess && problem === null && (
        <p className="form-ok" role="status">
          Created {create.data.snapshot_id}
          {create.data.encrypted ? ", encrypted. Keep the passphrase: without it the snapshot cannot be restored." : "."}
        </p>
      )}
    </form>
  );
}

/** "Import a snapshot": the file (a zip or an encrypted zip) and, for an encrypted one, its passphrase. */
export function ImportForm() {
  const inputId = useId();
  const passId = useId();
  const input = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<File | null>(null);
  const [passphrase, setPassphrase] = useState("");
  const upload = useImportSnapshot();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (file === null) return;
    upload.mutate(
      { file, passphrase: passphrase === "" ? undefined : passphrase },
      {
        onSuccess: () => {
          setFile(null);
          setPassphrase("");
          if (input.current !== null) input.current.value = "";
        },
      },
    );
  };
  const gate = useGate("importSnapshot");
  return (
    <form className="card form import-form" onSubmit={submit} aria-labelledby="import-title">
      <h2 id="import-title">Import a snapshot</h2>
      <fieldset disabled={gate.disabled}>
      <label htmlFor={inputId}>Snapshot file (.zip or .zip.enc)</label>
      <input id={inputId} ref={input} type="file" accept=".zip,.enc,application/zip,application/octet-stream" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
      <label htmlFor={passId}>Passphrase (for an encrypted file)</label>
      <input id={passId} type="password" autoComplete="off" value={passphrase} onChange={(e) => setPassphrase(e.target.value)} />
      <div className="form-actions">
        <button type="submit" {...gate.props} disabled={gate.disabled || file === null || upload.isPending}>
          {upload.isPending ? "Importing…" : "Import snapshot"}
        </button>
        {gate.reason}
      </div>
      </fieldset>
      <FormError error={upload.error} />
      {upload.isSuccess && (
        <p className="form-ok" role="status">
          Imported as {upload.data.snapshot_id}. Restore it from the list.
        </p>
      )}
    </form>
  );
}
