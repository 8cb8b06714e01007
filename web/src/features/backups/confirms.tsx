/** The restore and delete confirmations of a snapshot, and the words for what a restore does. */
import { useId, useState } from "react";
import type { RestoreAnswer, SnapshotEntry } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import type { useDeleteSnapshot, useRestoreSnapshot } from "./mutations.js";
import { FormError } from "../../components/form-error.js";

/** "1 node", "3 nodes". */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** "1 config, 3 nodes (2 dynamic)": what a snapshot holds, for its row. */
export function contentsText(contents: NonNullable<SnapshotEntry["contents"]>): string {
  const dynamic = contents.dynamic_nodes > 0 ? ` (${contents.dynamic_nodes} dynamic)` : "";
  return `${counted(contents.configs, "config")}, ${counted(contents.nodes, "node")}${dynamic}`;
}

/**
 * What a restore means for agents (restore clears every broker account: docs/backups.md), with
 * the number of dynamic nodes that must bind again when the snapshot's counts are known.
 */
function bindAgainText(contents: SnapshotEntry["contents"]): string {
  const how = "a restore clears every agent's broker credentials, so agents bound now are disconnected. Run each node's bind command (svcctl bind, from its node page) on its host.";
  if (contents === null) return `Every dynamic node in it must bind again: ${how}`;
  if (contents.dynamic_nodes === 0) return "It holds no dynamic node: no agent needs to bind again. Agents bound now are disconnected.";
  const n = contents.dynamic_nodes;
  return `Its ${counted(n, "dynamic node")} must bind again: ${how}`;
}

/** Which of a snapshot's confirmations is open. */
export type Confirming = "restore" | "delete" | null;

/** The restore and delete confirmations of a snapshot; each closes once its write succeeds. */
export function SnapshotConfirms({ snapshot: s, confirm, restore, remove, onClose, onRestored }: {
  snapshot: SnapshotEntry;
  confirm: Confirming;
  restore: ReturnType<typeof useRestoreSnapshot>;
  remove: ReturnType<typeof useDeleteSnapshot>;
  onClose: () => void;
  onRestored: (answer: RestoreAnswer) => void;
}) {
  return (
    <>
      <RestoreConfirm snapshot={s} open={confirm === "restore"} restore={restore} onClose={onClose} onRestored={onRestored} />
      <ConfirmDialog
        open={confirm === "delete"}
        title={`Delete ${s.snapshot_id}?`}
        confirmLabel="Delete this snapshot"
        danger
        busy={remove.isPending}
        onConfirm={() => remove.mutate(undefined, { onSuccess: onClose })}
        onCancel={onClose}
      >
        <p>The snapshot file and its download links are removed.</p>
      </ConfirmDialog>
    </>
  );
}

/**
 * The restore confirmation: what is replaced, which dynamic nodes must bind again, the passphrase
 * of an encrypted snapshot, and a refusal inside the dialog. The passphrase is dropped when the
 * dialog closes; a success is handed to `onRestored`.
 */
function RestoreConfirm({ snapshot: s, open, restore, onClose, onRestored }: {
  snapshot: SnapshotEntry;
  open: boolean;
  restore: ReturnType<typeof useRestoreSnapshot>;
  onClose: () => void;
  onRestored: (answer: RestoreAnswer) => void;
}) {
  const passId = useId();
  const [passphrase, setPassphrase] = useState("");
  const close = () => {
    setPassphrase("");
    restore.reset();
    onClose();
  };
  const doRestore = () =>
    restore.mutate(s.encrypted ? passphrase : undefined, {
      onSuccess: (answer) => {
        onRestored(answer);
        close();
      },
    });
  const passphraseField = (
    <>
      <label htmlFor={passId}>Passphrase</label>
      <input id={passId} type="password" autoComplete="off" value={passphrase} onChange={(e) => setPassphrase(e.target.value)}
        onKeyDown={(e) => e.key === "Enter" && passphrase !== "" && doRestore()} />
    </>
  );
  return (
    <ConfirmDialog
      open={open}
      title={`Restore ${s.snapshot_id}?`}
      confirmLabel="Restore this snapshot"
      danger
      busy={restore.isPending || (s.encrypted && passphrase === "")}
      onConfirm={doRestore}
      onCancel={close}
    >
      <p>
        Configs, nodes, pairs, port forwards, client state and logs are replaced by the snapshot's.
        {s.contents === null ? "" : ` It holds ${contentsText(s.contents)}.`} This cannot be undone; create a snapshot first to keep the current state.
      </p>
      <p>
        <strong>{bindAgainText(s.contents)}</strong>
      </p>
      {s.encrypted && passphraseField}
      <FormError error={restore.error} />
    </ConfirmDialog>
  );
}

/** The page's report of a finished restore: what came back, and who must bind again. */
export function restoredText(a: RestoreAnswer): string {
  const bind =
    a.dynamic_nodes === 0
      ? "No node must bind again."
      : `${counted(a.dynamic_nodes, "dynamic node")} must bind again: open each one and run its bind command on its host.`;
  return `Restored ${a.restored}: ${counted(a.configs, "config")}, ${counted(a.nodes, "node")}. ${bind}`;
}
