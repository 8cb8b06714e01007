import { createHash } from "node:crypto";
import type { AuditRow } from "../store/schema.js";

/**
 * The audit log's hash chain (README "Audit log"; after CloudTrail's log-file integrity
 * validation): row n's `hash` is SHA-256 (hex) of row n−1's hash, a newline, and row n's
 * canonical content; the row before the first is {@link GENESIS_HASH}, or after retention the
 * boundary it recorded. Editing any column of a stored row changes its canonical content, so its
 * stored hash no longer matches; deleting or inserting a row breaks its successor's link.
 */

/** The predecessor of audit entry 1: 64 zeros. */
export const GENESIS_HASH = "0".repeat(64);

/**
 * The canonical content of a row: the JSON array of every column but the hash, in a fixed order,
 * times as integer milliseconds and `changes` as its stored JSON text. Anyone with an export
 * (`GET /api/v1/audit/export`) can rebuild it from an entry and check the chain.
 */
export function canonicalAuditContent(row: Omit<AuditRow, "hash">): string {
  return JSON.stringify([
    row.audit_id,
    row.at,
    row.actor_kind,
    row.actor_id,
    row.actor_name,
    row.action,
    row.target_type,
    row.target_id,
    row.target_config_id,
    row.outcome,
    row.source_ip,
    row.request_id,
    row.changes,
  ]);
}

/** SHA-256 (hex) of `previousHash`, "\n" and the row's canonical content. */
export function auditRowHash(previousHash: string, row: Omit<AuditRow, "hash">): string {
  return createHash("sha256").update(previousHash).update("\n").update(canonicalAuditContent(row)).digest("hex");
}

/** What a walk over part of the chain found. */
export interface ChainCheck {
  /** The first row whose id, link or hash does not match; undefined when all matched. */
  brokenAt?: number;
  /** The last row checked (id and hash), to continue from. */
  last: { id: number; hash: string };
  checked: number;
}

/**
 * Checks consecutive rows (oldest first) continuing from `from`: each must have the next id and
 * the hash of its predecessor's hash and its own content.
 */
export function checkAuditRows(from: { id: number; hash: string }, rows: readonly AuditRow[]): ChainCheck {
  let last = from;
  let checked = 0;
  for (const row of rows) {
    checked++;
    if (row.audit_id !== last.id + 1 || auditRowHash(last.hash, row) !== row.hash) return { brokenAt: row.audit_id, last, checked };
    last = { id: row.audit_id, hash: row.hash };
  }
  return { last, checked };
}
