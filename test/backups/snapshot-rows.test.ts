import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { createLogger } from "../../src/logger.js";
import { SNAPSHOT_ROW_SCHEMAS } from "../../src/services/snapshot-rows.js";
import { DATA_TABLES, SCRUBBED_TABLES } from "../../src/services/snapshots.js";
import { Store } from "../../src/store/db.js";
import { sqliteOf } from "../../src/store/connection.js";

test("spec §2.4: there is one row schema per snapshot data table, with exactly the live table's columns (a new migration column must be validated too)", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-rows-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  assert.deepEqual(Object.keys(SNAPSHOT_ROW_SCHEMAS).sort(), [...DATA_TABLES].sort());
  for (const table of DATA_TABLES) {
    const columns = (sqliteOf(store).prepare("SELECT name FROM pragma_table_info(?)").all(table) as Array<{ name: string }>).map((c) => c.name).sort();
    assert.deepEqual(Object.keys(SNAPSHOT_ROW_SCHEMAS[table].shape).sort(), columns, `table ${table}`);
  }
});

test("spec §2.4: every table a migration creates is either carried by snapshots (a row schema) or scrubbed from them (a new table must be placed)", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-rows-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const tables = (sqliteOf(store).prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as Array<{ name: string }>)
    .map((r) => r.name)
    .filter((name) => !name.startsWith("kysely_"));
  const placed = new Set<string>([...DATA_TABLES, ...SCRUBBED_TABLES]);
  for (const table of tables) assert.ok(placed.has(table), `table ${table} is neither a snapshot data table nor scrubbed`);
  assert.ok(tables.includes("node_transitions"), "the flight recorder's table exists");
  assert.ok(!(DATA_TABLES as readonly string[]).includes("node_transitions"), "the flight recorder is not restored from a snapshot");
});
