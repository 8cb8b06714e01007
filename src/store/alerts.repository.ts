import { sqliteOf, type Connection, type Db } from "./connection.js";
import type { AlertChannelRow, AlertChannelsTable, AlertDeliveriesTable, AlertDeliveryAttemptRow, AlertDeliveryRow } from "./schema.js";
import type { Updateable } from "kysely";

/**
 * Repository of alert channels and the delivery outbox (docs/alerts.md). Every function takes
 * the caller's handle: `store.db` for a read, the `trx` of `store.transaction` for a write, so
 * an alert is enqueued in the same transaction as the state change that causes it.
 */

export async function insertAlertChannel(db: Db, row: AlertChannelRow): Promise<void> {
  await db.insertInto("alert_channels").values(row).execute();
}

export async function findAlertChannel(db: Db, channelId: string): Promise<AlertChannelRow | undefined> {
  return db.selectFrom("alert_channels").selectAll().where("channel_id", "=", channelId).executeTakeFirst();
}

/** Every channel, by name. */
export async function listAlertChannels(db: Db): Promise<AlertChannelRow[]> {
  return db.selectFrom("alert_channels").selectAll().orderBy("name").orderBy("channel_id").execute();
}

/** Whether another channel has `name` (without regard to case). */
export async function alertChannelNameTaken(db: Db, name: string, exceptId?: string): Promise<boolean> {
  let q = db.selectFrom("alert_channels").select("channel_id").where("name", "=", name);
  if (exceptId !== undefined) q = q.where("channel_id", "!=", exceptId);
  return (await q.executeTakeFirst()) !== undefined;
}

export async function updateAlertChannel(db: Db, channelId: string, patch: Updateable<AlertChannelsTable>): Promise<void> {
  await db.updateTable("alert_channels").set(patch).where("channel_id", "=", channelId).execute();
}

/** Deletes a channel with its deliveries and their attempts (foreign-key cascade). @returns whether it existed */
export async function deleteAlertChannel(db: Db, channelId: string): Promise<boolean> {
  const r = await db.deleteFrom("alert_channels").where("channel_id", "=", channelId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/**
 * Enqueues deliveries in the caller's transaction: persisted before anything is sent, so a crash
 * after the commit still delivers them and a rollback sends nothing.
 */
export async function insertAlertDeliveries(db: Db, rows: readonly AlertDeliveryRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.insertInto("alert_deliveries").values([...rows]).execute();
}

/** Pending deliveries due at `now` on enabled channels, oldest due first, at most `limit`. */
export async function dueAlertDeliveries(db: Db, now: number, limit: number): Promise<AlertDeliveryRow[]> {
  return db
    .selectFrom("alert_deliveries as d")
    .innerJoin("alert_channels as c", "c.channel_id", "d.channel_id")
    .selectAll("d")
    .where("d.status", "=", "pending")
    .where("c.enabled", "=", 1)
    .where("d.next_attempt_at", "<=", now)
    .orderBy("d.next_attempt_at")
    .orderBy("d.delivery_id")
    .limit(limit)
    .execute();
}

/** When the earliest pending delivery of an enabled channel falls due after `after`, ms; undefined when none does. */
export async function nextAlertDeliveryDue(db: Db, after: number): Promise<number | undefined> {
  const row = await db
    .selectFrom("alert_deliveries as d")
    .innerJoin("alert_channels as c", "c.channel_id", "d.channel_id")
    .select((eb) => eb.fn.min("d.next_attempt_at").as("due"))
    .where("d.status", "=", "pending")
    .where("c.enabled", "=", 1)
    .where("d.next_attempt_at", ">", after)
    .executeTakeFirst();
  return row?.due ?? undefined;
}

export async function findAlertDelivery(db: Db, deliveryId: string): Promise<AlertDeliveryRow | undefined> {
  return db.selectFrom("alert_deliveries").selectAll().where("delivery_id", "=", deliveryId).executeTakeFirst();
}

/** Records one attempt and the delivery's state after it, in the caller's transaction. */
export async function recordAlertAttempt(db: Db, attempt: AlertDeliveryAttemptRow, after: Updateable<AlertDeliveriesTable>): Promise<void> {
  await db.insertInto("alert_delivery_attempts").values(attempt).execute();
  await db.updateTable("alert_deliveries").set(after).where("delivery_id", "=", attempt.delivery_id).execute();
}

/** A page of deliveries, newest first, after the cursor's position (`t` created_at, `id`). */
export async function listAlertDeliveries(
  db: Db,
  q: { channelId?: string | undefined; status?: AlertDeliveryRow["status"] | undefined; limit: number; after?: { t: number; id: string } | undefined },
): Promise<AlertDeliveryRow[]> {
  let query = db.selectFrom("alert_deliveries").selectAll();
  if (q.channelId !== undefined) query = query.where("channel_id", "=", q.channelId);
  if (q.status !== undefined) query = query.where("status", "=", q.status);
  const after = q.after;
  if (after !== undefined) {
    query = query.where((eb) => eb.or([eb("created_at", "<", after.t), eb.and([eb("created_at", "=", after.t), eb("delivery_id", "<", after.id)])]));
  }
  return query.orderBy("created_at", "desc").orderBy("delivery_id", "desc").limit(q.limit).execute();
}

/** The attempts of the given deliveries, in attempt order. */
export async function alertAttemptsOf(db: Db, deliveryIds: readonly string[]): Promise<AlertDeliveryAttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  return db.selectFrom("alert_delivery_attempts").selectAll().where("delivery_id", "in", [...deliveryIds]).orderBy("delivery_id").orderBy("attempt").execute();
}

/**
 * The outbox insert as a prepared statement, for a writer on the hot path that runs raw
 * statements in its own transaction (the actors' group commit): `enqueue` is synchronous and
 * joins whatever transaction is open on the connection, so an alert commits (or rolls back) with
 * the state change that caused it. The caller kicks the delivery worker after its commit.
 */
export interface AlertOutboxStatements {
  enqueue(row: AlertDeliveryRow): void;
}

export function createAlertOutboxStatements(conn: Connection): AlertOutboxStatements {
  const insert = sqliteOf(conn).prepare<[string, string, string, string, number, number, number]>(
    `INSERT INTO alert_deliveries (delivery_id, channel_id, type, message, status, attempts, next_attempt_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?)`,
  );
  return {
    enqueue: (r) => {
      insert.run(r.delivery_id, r.channel_id, r.type, r.message, r.next_attempt_at ?? r.created_at, r.created_at, r.updated_at);
    },
  };
}
