/** Snapshot create, import, download link, restore and delete (DESIGN §5 snapshots). */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

function useRefreshList() {
  const queryClient = useQueryClient();
  return () => void queryClient.invalidateQueries({ queryKey: keys.backups, exact: true });
}

/** `POST /api/v1/backups`, encrypted when a passphrase is given; the list reads again. */
export function useCreateSnapshot() {
  const refresh = useRefreshList();
  return useMutation({
    mutationFn: (passphrase: string | undefined) => api.createSnapshot({ body: passphrase === undefined ? undefined : { passphrase } }),
    onSuccess: refresh,
  });
}

/**
 * `POST /api/v1/backups/import` with the file as the raw body and, for an encrypted file, its
 * passphrase in `x-snapshot-passphrase`; the list reads again.
 */
export function useImportSnapshot() {
  const refresh = useRefreshList();
  return useMutation({
    mutationFn: ({ file, passphrase }: { file: Blob; passphrase: string | undefined }) =>
      api.importSnapshot({ file, headers: { "x-snapshot-passphrase": passphrase } }),
    onSuccess: refresh,
  });
}

/** `POST /api/v1/backups/{snapshot_id}/download-token`: a 5-minute `snapshot_export` link. */
export function useSnapshotDownload(snapshotId: string) {
  return useMutation({ mutationFn: () => api.grantSnapshotDownload({ params: { snapshot_id: snapshotId } }) });
}

/**
 * `POST /api/v1/backups/{snapshot_id}/restore`, with the passphrase of an encrypted snapshot:
 * everything may have changed, so every view reads again.
 */
export function useRestoreSnapshot(snapshotId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (passphrase: string | undefined) =>
      api.restoreSnapshot({ params: { snapshot_id: snapshotId }, body: passphrase === undefined ? undefined : { passphrase } }),
    onSuccess: () => void queryClient.invalidateQueries(),
  });
}

/** `DELETE /api/v1/backups/{snapshot_id}`; the list reads again. */
export function useDeleteSnapshot(snapshotId: string) {
  const refresh = useRefreshList();
  return useMutation({ mutationFn: () => api.deleteSnapshot({ params: { snapshot_id: snapshotId } }), onSuccess: refresh });
}
