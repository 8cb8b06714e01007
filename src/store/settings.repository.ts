import type { Db } from "./connection.js";

/** Repository of `settings_kv`: generated secrets and server-side settings. */

export async function getSetting(db: Db, key: string): Promise<string | undefined> {
  const row = await db.selectFrom("settings_kv").select("value").where("key", "=", key).executeTakeFirst();
  return row?.value;
}

export async function putSetting(db: Db, key: string, value: string, now: number): Promise<void> {
  await db
    .insertInto("settings_kv")
    .values({ key, value, updated_at: now })
    .onConflict((oc) => oc.column("key").doUpdateSet({ value, updated_at: now }))
    .execute();
}

export async function deleteSetting(db: Db, key: string): Promise<void> {
  await db.deleteFrom("settings_kv").where("key", "=", key).execute();
}
