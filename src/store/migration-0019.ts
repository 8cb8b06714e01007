/**
 * Migration 0019 (frozen once released, like every migration): the audit log (README "Audit
 * log"). `audit_log` is append-only: rows are inserted by the service's one writer with
 * consecutive ids and deleted only from the oldest end by retention; an UPDATE is refused by a
 * trigger. Each row's `hash` is SHA-256 of the previous row's hash and the row's canonical
 * content (src/services/audit-chain.ts). `audit_chain` holds the one boundary retention leaves:
 * the id and hash of the last row it removed, from which the kept chain is verified.
 */
import { sql, type Kysely, type Migration } from "kysely";

export const auditLog: Migration = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on today's types
  async up(db: Kysely<any>): Promise<void> {
    const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
    await t`CREATE TABLE audit_log (
      audit_id INTEGER PRIMARY KEY NOT NULL CHECK (audit_id >= 1),
      at INTEGER NOT NULL,
      actor_kind TEXT NOT NULL CHECK (actor_kind IN ('user', 'token', 'oidc', 'system', 'anonymous')),
      actor_id TEXT,
      actor_name TEXT,
      action TEXT NOT NULL,
      target_type TEXT,
      target_id TEXT,
      target_config_id TEXT,
      outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'denied', 'failed')),
      source_ip TEXT,
      request_id TEXT,
      changes TEXT,
      hash TEXT NOT NULL
    ) STRICT`;
    await t`CREATE INDEX audit_log_target ON audit_log (target_id, audit_id)`;
    await t`CREATE INDEX audit_log_at ON audit_log (at)`;
    await t`CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON audit_log
      BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END`;
    await t`CREATE TABLE audit_chain (
      id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
      pruned_through_id INTEGER NOT NULL,
      pruned_through_hash TEXT NOT NULL,
      pruned_at INTEGER NOT NULL
    ) STRICT`;
  },
};
