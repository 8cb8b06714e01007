/**
 * Migration 0024 (frozen once released, like every migration): how a config's pushes are applied
 * on a running host (`configs.apply_mode`). `restart` is the spec's push sequence (§3.8: stop,
 * write, start); `hitless` asks the agent to change the peers of the running interface when only
 * peers changed (docs/decisions.md "Hitless peer updates"). Every config that existed before, and
 * every config of an older snapshot restored through this migration, keeps the spec's behaviour.
 */
import { sql, type Kysely, type Migration } from "kysely";

export const configApplyMode: Migration = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on today's types
  async up(db: Kysely<any>): Promise<void> {
    await sql`ALTER TABLE configs ADD COLUMN apply_mode TEXT NOT NULL DEFAULT 'restart' CHECK (apply_mode IN ('restart', 'hitless'))`.execute(db);
  },
};
