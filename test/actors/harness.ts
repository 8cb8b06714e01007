import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { createLogger } from "../../src/logger.js";
import { insertConfig } from "../../src/store/configs.repository.js";
import { Store } from "../../src/store/db.js";
import { insertNode } from "../../src/store/nodes.repository.js";

/** Shared set-up of the actor tests: a real SQLite file, migrated, and a second connection. */

export const log = createLogger("silent");
export const CONFIG = "cfg-1";

/** A fresh SQLite file path in a temp directory removed after the test. */
export function tempDbFile(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-actors-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "svc.db");
}

/**
 * Opens `file` twice: `store` for the part under test and `reader`, a second connection that
 * sees only committed data. `close()` closes both; the caller registers it after stopping
 * what uses them (`t.after` hooks run in the order they were added).
 */
export async function openStores(file: string): Promise<{ store: Store; reader: Store; close(): Promise<void> }> {
  const store = await Store.open(file, log);
  const reader = await Store.open(file, log);
  return {
    store,
    reader,
    close: async () => {
      await reader.close();
      await store.close();
    },
  };
}

/** Stores config {@link CONFIG} and one dynamic node per id (rows only; no actor). */
export async function seedNodes(store: Store, ids: string[]): Promise<void> {
  await insertConfig(store.db, {
    config_id: CONFIG,
    name: "mesh",
    tunnel_protocol: "wireguard",
    network_cidr: "10.9.0.0/24",
    awg_params: null,
    created_at: 0,
    updated_at: 0,
  });
  for (const [i, id] of ids.entries()) {
    await insertNode(
      store.db,
      {
        node_id: id,
        config_id: CONFIG,
        name: id,
        mode: "dynamic",
        interface_name: "svc0",
        address: `10.9.0.${i + 1}`,
        staged_config_version: 0,
        private_key: "k",
        public_key: "p",
        created_at: 0,
        updated_at: 0,
      },
      0,
    );
  }
}

/** A logger that keeps every line it writes (JSON objects), for tests that check what is logged. */
export function capturingLog(level = "info"): { log: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { log: createLogger(level, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }), lines };
}
