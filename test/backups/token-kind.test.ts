import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { api } from "../control/agent-harness.js";
import { startSseServer } from "../events/sse-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/** spec §2.1: the stored kind of a snapshot's file token, read back from `download_tokens`. */

test("spec §2.1 row kind: a snapshot download grant stores one token of kind snapshot_export bound to the snapshot_id, hashed, expiring with the grant", async (t) => {
  const s = await startSseServer(t);
  const snap = await api(s, "POST", "/api/v1/backups");
  assert.equal(snap.status, 201);
  const grant = await api(s, "POST", `/api/v1/backups/${snap.json.snapshot_id}/download-token`);
  assert.equal(grant.status, 200, JSON.stringify(grant.json));
  const rows = sqliteOf(s.server.store).prepare("SELECT token_hash, kind, resource_id, expires_at FROM download_tokens").all() as Array<{
    token_hash: string;
    kind: string;
    resource_id: string;
    expires_at: number;
  }>;
  assert.equal(rows.length, 1);
  const row = rows[0]!;
  assert.equal(row.kind, "snapshot_export");
  assert.equal(row.resource_id, snap.json.snapshot_id);
  assert.equal(row.token_hash, createHash("sha256").update(grant.json.download_token).digest("hex"), "stored as its SHA-256 only");
  assert.equal(new Date(row.expires_at).toISOString(), grant.json.download_token_expires_at);
  // The token opens exactly that export.
  const res = await fetch(`${s.baseUrl}/api/v1/backups/export/${snap.json.snapshot_id}?download_token=${grant.json.download_token}`);
  assert.equal(res.status, 200);
  await res.arrayBuffer();
});
