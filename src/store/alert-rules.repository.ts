import { sqliteOf, type Connection, type Db } from "./connection.js";
import type { AlertOpenRow, AlertRuleRow, AlertRulesTable } from "./schema.js";
import type { Updateable } from "kysely";

/**
 * Repository of alert rules and the rule engine's state (docs/alerts.md "Rules"): the rules'
 * CRUD through Kysely (the caller's handle or transaction first), and the engine's prepared
 * statements ({@link createAlertEngineStatements}), which join whatever transaction is open on
 * the connection, so an alert's state commits with the change that caused it.
 */

/** A rule with its channels, in the order given. */
export interface AlertRuleWithChannels extends AlertRuleRow {
  channel_ids: string[];
}

async function withChannels(db: Db, rows: AlertRuleRow[]): Promise<AlertRuleWithChannels[]> {
  if (rows.length === 0) return [];
  const links = await db
    .selectFrom("alert_rule_channels")
    .select(["rule_id", "channel_id"])
    .where("rule_id", "in", rows.map((r) => r.rule_id))
    .orderBy("rule_id")
    .orderBy("position")
    .execute();
  return rows.map((r) => ({ ...r, channel_ids: links.filter((l) => l.rule_id === r.rule_id).map((l) => l.channel_id) }));
}

/** Every rule with its channels, by name. */
export async function listAlertRules(db: Db): Promise<AlertRuleWithChannels[]> {
  return withChannels(db, await db.selectFrom("alert_rules").selectAll().orderBy("name").orderBy("rule_id").execute());
}

export async function findAlertRule(db: Db, ruleId: string): Promise<AlertRuleWithChannels | undefined> {
  const row = await db.selectFrom("alert_rules").selectAll().where("rule_id", "=", ruleId).executeTakeFirst();
  return row === undefined ? undefined : (await withChannels(db, [row]))[0];
}

/** The rules that send through a channel (read before the channel is deleted: its links go with it). */
export async function alertRuleIdsOfChannel(db: Db, channelId: string): Promise<string[]> {
  const rows = await db.selectFrom("alert_rule_channels").select("rule_id").where("channel_id", "=", channelId).orderBy("rule_id").execute();
  return rows.map((r) => r.rule_id);
}

/** The given rules with their channels, by name (an id naming no rule is left out). */
export async function findAlertRules(db: Db, ruleIds: readonly string[]): Promise<AlertRuleWithChannels[]> {
  if (ruleIds.length === 0) return [];
  return withChannels(db, await db.selectFrom("alert_rules").selectAll().where("rule_id", "in", [...ruleIds]).orderBy("name").orderBy("rule_id").execute());
}

/** Whether another rule has `name` (without regard to case). */
export async function alertRuleNameTaken(db: Db, name: string, exceptId?: string): Promise<boolean> {
  let q = db.selectFrom("alert_rules").select("rule_id").where("name", "=", name);
  if (exceptId !== undefined) q = q.where("rule_id", "!=", exceptId);
  return (await q.executeTakeFirst()) !== undefined;
}

/** The given channel ids that name no channel. */
export async function unknownAlertChannels(db: Db, channelIds: readonly string[]): Promise<string[]> {
  if (channelIds.length === 0) return [];
  const found = await db.selectFrom("alert_channels").select("channel_id").where("channel_id", "in", [...channelIds]).execute();
  const known = new Set(found.map((r) => r.channel_id));
  return channelIds.filter((id) => !known.has(id));
}

export async function insertAlertRule(db: Db, row: AlertRuleRow, channelIds: readonly string[]): Promise<void> {
  await db.insertInto("alert_rules").values(row).execute();
  await setAlertRuleChannels(db, row.rule_id, channelIds);
}

export async function updateAlertRule(db: Db, ruleId: string, patch: Updateable<AlertRulesTable>, channelIds?: readonly string[]): Promise<void> {
  await db.updateTable("alert_rules").set(patch).where("rule_id", "=", ruleId).execute();
  if (channelIds !== undefined) await setAlertRuleChannels(db, ruleId, channelIds);
}

async function setAlertRuleChannels(db: Db, ruleId: string, channelIds: readonly string[]): Promise<void> {
  await db.deleteFrom("alert_rule_channels").where("rule_id", "=", ruleId).execute();
  const unique = [...new Set(channelIds)];
  if (unique.length === 0) return;
  await db.insertInto("alert_rule_channels").values(unique.map((channel_id, position) => ({ rule_id: ruleId, channel_id, position }))).execute();
}

/** Deletes a rule with its channel links and open alerts (foreign-key cascade). @returns whether it existed */
export async function deleteAlertRule(db: Db, ruleId: string): Promise<boolean> {
  const r = await db.deleteFrom("alert_rules").where("rule_id", "=", ruleId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** Open alerts of a rule that has changed (its event, scope or hold-off): they no longer hold by it. */
export async function deleteOpenAlertsOfRule(db: Db, ruleId: string): Promise<void> {
  await db.deleteFrom("alert_open").where("rule_id", "=", ruleId).execute();
}

/**
 * The rule engine's statements, prepared once (the engine runs on the hot path: inside the
 * actors' group commit and the command tracker's writes). Every function is synchronous and
 * joins the transaction open on the connection; {@link AlertEngineStatements.inTransaction} opens
 * one (a savepoint inside another), so a failing alert rolls back alone.
 */
export interface AlertEngineStatements {
  /** Every rule, enabled or not. */
  rules(): AlertRuleRow[];
  ruleChannels(): Array<{ rule_id: string; channel_id: string }>;
  insertOpen(row: AlertOpenRow): void;
  /** The open alerts of a subject (a node id, a pair id, `broker`). */
  openOf(subject: string): AlertOpenRow[];
  /** The open alerts of a config's nodes and pairs. */
  openOfConfig(configId: string): AlertOpenRow[];
  /** Every open alert of a node or a pair (all but the broker link's). */
  openOfMesh(): AlertOpenRow[];
  /** Whether any alert is open or held (a mesh write with none costs one statement). */
  anyOpen(): boolean;
  /** The open `mesh.pair_broken` alerts. */
  openPairAlerts(): AlertOpenRow[];
  /** Every node without a public endpoint (address and listen port), by config: only two such can make a broken pair. */
  privateNodes(): Array<{ config_id: string; node_id: string }>;
  deleteOpen(alertId: string): void;
  /** Held alerts due at `now`, oldest first. */
  dueHeld(now: number): AlertOpenRow[];
  /** When the earliest held alert falls due, ms; null when none is held. */
  nextHeldDue(): number | null;
  markFired(alertId: string, at: number): void;
  nodeTags(nodeId: string): string[];
  nodeName(nodeId: string): string | undefined;
  insertNotice(channelId: string, message: string, at: number): void;
  /** Removes and answers a channel's waiting notices, oldest first. */
  takeNotices(channelId: string): string[];
  /** Channels with notices waiting (left by a previous run). */
  channelsWithNotices(): string[];
  /**
   * When the group window a channel's waiting notices belong to opened, ms: the channel's last
   * alert delivered at once (not a channel test) before its oldest notice, else that notice's time.
   */
  windowOpenedAt(channelId: string): number | null;
  /** Runs `fn` in a transaction (a savepoint inside an open one); rethrows after rolling back. */
  inTransaction<T>(fn: () => T): T;
}

export function createAlertEngineStatements(conn: Connection): AlertEngineStatements {
  const sqlite = sqliteOf(conn);
  const q = {
    rules: sqlite.prepare<[], AlertRuleRow>("SELECT * FROM alert_rules ORDER BY rule_id"),
    links: sqlite.prepare<[], { rule_id: string; channel_id: string }>("SELECT rule_id, channel_id FROM alert_rule_channels ORDER BY rule_id, position"),
    insertOpen: sqlite.prepare(
      `INSERT OR IGNORE INTO alert_open (alert_id, rule_id, event, subject, config_id, node_id, since, due_at, fired_at, detail)
       VALUES (@alert_id, @rule_id, @event, @subject, @config_id, @node_id, @since, @due_at, @fired_at, @detail)`,
    ),
    openOf: sqlite.prepare<[string], AlertOpenRow>("SELECT * FROM alert_open WHERE subject = ? ORDER BY alert_id"),
    openOfConfig: sqlite.prepare<[string], AlertOpenRow>("SELECT * FROM alert_open WHERE config_id = ? ORDER BY alert_id"),
    openOfMesh: sqlite.prepare<[], AlertOpenRow>("SELECT * FROM alert_open WHERE config_id IS NOT NULL ORDER BY alert_id"),
    anyOpen: sqlite.prepare<[], { one: number }>("SELECT 1 AS one FROM alert_open LIMIT 1"),
    openPairs: sqlite.prepare<[], AlertOpenRow>("SELECT * FROM alert_open WHERE event = 'mesh.pair_broken' ORDER BY alert_id"),
    privateNodes: sqlite.prepare<[], { config_id: string; node_id: string }>("SELECT config_id, node_id FROM nodes WHERE public_address IS NULL OR public_address = '' OR listen_port IS NULL"),
    deleteOpen: sqlite.prepare<[string]>("DELETE FROM alert_open WHERE alert_id = ?"),
    dueHeld: sqlite.prepare<[number], AlertOpenRow>("SELECT * FROM alert_open WHERE fired_at IS NULL AND due_at <= ? ORDER BY due_at, alert_id"),
    nextHeld: sqlite.prepare<[], { due: number | null }>("SELECT MIN(due_at) AS due FROM alert_open WHERE fired_at IS NULL"),
    markFired: sqlite.prepare<[number, string]>("UPDATE alert_open SET fired_at = ? WHERE alert_id = ?"),
    tags: sqlite.prepare<[string], { tag: string }>("SELECT tag FROM node_tags WHERE node_id = ?"),
    name: sqlite.prepare<[string], { name: string }>("SELECT name FROM nodes WHERE node_id = ?"),
    insertNotice: sqlite.prepare<[string, string, number]>("INSERT INTO alert_notices (channel_id, message, created_at) VALUES (?, ?, ?)"),
    notices: sqlite.prepare<[string], { message: string }>("SELECT message FROM alert_notices WHERE channel_id = ? ORDER BY notice_id"),
    dropNotices: sqlite.prepare<[string]>("DELETE FROM alert_notices WHERE channel_id = ?"),
    noticeChannels: sqlite.prepare<[], { channel_id: string }>("SELECT DISTINCT channel_id FROM alert_notices"),
    windowOpened: sqlite.prepare<{ c: string }, { at: number | null }>(
      `SELECT COALESCE((SELECT MAX(d.created_at) FROM alert_deliveries d
         WHERE d.channel_id = @c AND d.created_at <= n.first AND d.type != 'alert.test'), n.first) AS at
       FROM (SELECT MIN(created_at) AS first FROM alert_notices WHERE channel_id = @c) n`,
    ),
  };
  const tx = sqlite.transaction((fn: () => unknown) => fn());
  return {
    rules: () => q.rules.all(),
    ruleChannels: () => q.links.all(),
    insertOpen: (row) => void q.insertOpen.run(row),
    openOf: (subject) => q.openOf.all(subject),
    openOfConfig: (configId) => q.openOfConfig.all(configId),
    openOfMesh: () => q.openOfMesh.all(),
    anyOpen: () => q.anyOpen.get() !== undefined,
    openPairAlerts: () => q.openPairs.all(),
    privateNodes: () => q.privateNodes.all(),
    deleteOpen: (alertId) => void q.deleteOpen.run(alertId),
    dueHeld: (now) => q.dueHeld.all(now),
    nextHeldDue: () => q.nextHeld.get()?.due ?? null,
    markFired: (alertId, at) => void q.markFired.run(at, alertId),
    nodeTags: (nodeId) => q.tags.all(nodeId).map((r) => r.tag),
    nodeName: (nodeId) => q.name.get(nodeId)?.name,
    insertNotice: (channelId, message, at) => void q.insertNotice.run(channelId, message, at),
    takeNotices: (channelId) => {
      const rows = q.notices.all(channelId).map((r) => r.message);
      if (rows.length > 0) q.dropNotices.run(channelId);
      return rows;
    },
    channelsWithNotices: () => q.noticeChannels.all().map((r) => r.channel_id),
    windowOpenedAt: (channelId) => q.windowOpened.get({ c: channelId })?.at ?? null,
    inTransaction: <T>(fn: () => T) => tx(fn) as T,
  };
}
