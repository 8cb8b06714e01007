/**
 * Backups of a big mesh (a benchmark helper, not a test): on a server that holds a built mesh,
 * times the four steps of a snapshot's round trip over the real HTTP stack, one after another:
 * create (`POST /api/v1/backups`), export (the zip downloaded over HTTP with a download token),
 * import (the same bytes uploaded as a new snapshot) and restore of the imported snapshot. Also
 * reports the snapshot file's size and the database + WAL right after the restore.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

export interface BackupRow {
  createS: number;
  exportS: number;
  importS: number;
  restoreS: number;
  /** The exported snapshot zip, MB. */
  snapshotMb: number;
  /** Database file + WAL right after the restore, MB. */
  dbAfterRestoreMb: number;
}

/**
 * Times create, export, import and restore of one snapshot of everything `base` serves.
 * `auth` holds an admin's bearer header; `dataDir` is the server's data directory.
 * @throws Error when a step answers with an HTTP error
 */
export async function measureBackups(base: string, auth: Record<string, string>, dataDir: string): Promise<BackupRow> {
  const call = async (method: string, path: string, init: RequestInit = {}) => {
    const res = await fetch(`${base}${path}`, { method, ...init, headers: { ...auth, ...init.headers } });
    const body = await res.arrayBuffer();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${Buffer.from(body).toString().slice(0, 200)}`);
    return body;
  };
  const json = (bytes: ArrayBuffer) => JSON.parse(Buffer.from(bytes).toString());
  const seconds = (t0: number) => (performance.now() - t0) / 1000;

  let t0 = performance.now();
  const created = json(await call("POST", "/api/v1/backups"));
  const createS = seconds(t0);

  const grant = json(await call("POST", `/api/v1/backups/${created.snapshot_id}/download-token`));
  t0 = performance.now();
  const zip = await (await fetch(`${base}${grant.download_path}`)).arrayBuffer();
  const exportS = seconds(t0);

  t0 = performance.now();
  const imported = json(await call("POST", "/api/v1/backups/import", { headers: { "content-type": "application/zip" }, body: zip }));
  const importS = seconds(t0);

  t0 = performance.now();
  await call("POST", `/api/v1/backups/${imported.snapshot_id}/restore`, { headers: { "content-type": "application/json" }, body: "{}" });
  const restoreS = seconds(t0);

  const size = (file: string) => {
    try {
      return statSync(join(dataDir, file)).size;
    } catch {
      return 0;
    }
  };
  return { createS, exportS, importS, restoreS, snapshotMb: zip.byteLength / 1e6, dbAfterRestoreMb: (size("svc.db") + size("svc.db-wal")) / 1e6 };
}

/** The table of {@link measureBackups}' rows, one per mesh size. */
export function printBackups(rows: readonly (BackupRow & { nodes: number })[]): void {
  const f = (n: number, d = 1) => n.toFixed(d);
  console.log("\nSnapshot of the full mesh over HTTP: create, export (download), import (upload of the same zip), restore of the imported one\n");
  console.log("| nodes | create (s) | export (s) | import (s) | restore (s) | snapshot file (MB) | database + WAL after restore (MB) |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    console.log(`| ${r.nodes} | ${f(r.createS, 2)} | ${f(r.exportS, 2)} | ${f(r.importS, 2)} | ${f(r.restoreS, 2)} | ${f(r.snapshotMb, 2)} | ${f(r.dbAfterRestoreMb)} |`);
  }
}
