/**
 * Migration 0022 (frozen once released, like every migration): alert rules and the state the
 * rule engine keeps between a change and its message (docs/alerts.md "Rules"). A rule names its
 * channels through `alert_rule_channels` (a deleted channel leaves every rule it was in). An open
 * alert is one row per rule and subject (a node, `broker`) from the moment its condition starts:
 * held until `due_at` (the rule's `for_s`), then fired; the message that resolves it names its
 * `alert_id`. A notice waits for its channel's group window to close, then goes out in one
 * grouped delivery. All of it is written in the transaction of the change that causes it, so a
 * restart neither loses an alert nor sends one twice.
 */
import { sql, type Kysely, type Migration } from "kysely";

export const alertRules: Migration = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on today's types
  async up(db: Kysely<any>): Promise<void> {
    const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
    await t`CREATE TABLE alert_rules (
      rule_id TEXT PRIMARY KEY NOT NULL,
      name TEXT NOT NULL UNIQUE COLLATE NOCASE,
      event TEXT NOT NULL CHECK (event IN ('node.offline', 'node.dropped', 'node.sync_stuck', 'command.failed', 'mesh.pair_broken', 'broker.disconnected')),
      for_s INTEGER NOT NULL DEFAULT 0 CHECK (for_s >= 0),
      scope_config_id TEXT,
      scope_tag TEXT,
      scope_node_id TEXT,
      enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT`;
    await t`CREATE TABLE alert_rule_channels (
      rule_id TEXT NOT NULL REFERENCES alert_rules(rule_id) ON DELETE CASCADE,
      channel_id TEXT NOT NULL REFERENCES alert_channels(channel_id) ON DELETE CASCADE,
      position INTEGER NOT NULL,
      PRIMARY KEY (rule_id, channel_id)
    ) STRICT`;
    await t`CREATE INDEX alert_rule_channels_channel ON alert_rule_channels (channel_id)`;
    await t`CREATE TABLE alert_open (
      alert_id TEXT PRIMARY KEY NOT NULL,
      rule_id TEXT NOT NULL REFERENCES alert_rules(rule_id) ON DELETE CASCADE,
      event TEXT NOT NULL,
      subject TEXT NOT NULL,
      config_id TEXT,
      node_id TEXT,
      since INTEGER NOT NULL,
      due_at INTEGER NOT NULL,
      fired_at INTEGER,
      detail TEXT NOT NULL,
      UNIQUE (rule_id, subject)
    ) STRICT`;
    await t`CREATE INDEX alert_open_subject ON alert_open (subject)`;
    await t`CREATE INDEX alert_open_held ON alert_open (due_at) WHERE fired_at IS NULL`;
    await t`CREATE TABLE alert_notices (
      notice_id INTEGER PRIMARY KEY AUTOINCREMENT,
      channel_id TEXT NOT NULL REFERENCES alert_channels(channel_id) ON DELETE CASCADE,
      message TEXT NOT NULL,
      created_at INTEGER NOT NULL
    ) STRICT`;
    await t`CREATE INDEX alert_notices_channel ON alert_notices (channel_id, notice_id)`;
  },
};
