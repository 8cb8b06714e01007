import type SQLite from "better-sqlite3";
import { z } from "zod";
import { tunnelProtocolSchema, type TunnelProtocol } from "../protocol/envelope.schema.js";
import type { CommandStatus } from "../protocol/enums.js";
import { perConnection, sqliteOf, type Connection } from "./connection.js";
import type { ControlLogRow } from "./schema.js";

/**
 * Repository of the `control_logs` rows written for commands (spec §2.8), with the push target
 * of config pushes (migration `0003_control_log_push_target`). Synchronous
 * better-sqlite3 statements, prepared once per connection: the command tracker writes a row
 * before each publish and must not yield between the row and the publish.
 */

/** What a config push asked the agent to apply (spec §6.3 config/push, §9 rule 4). */
export interface PushTarget {
  version: number;
  /** Lower-case hex SHA-256 of the config text, 64 characters. */
  sha: string;
  protocol: TunnelProtocol;
}

/**
 * The stored columns of a push target, validated when read back (a row may come from a restored
 * snapshot) and, each nullable, by the snapshot row check (`SNAPSHOT_ROW_SCHEMAS.control_logs`).
 */
export const pushTargetSchema = z.object({
  pushed_config_version: z.number().int().nonnegative(),
  pushed_config_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  pushed_tunnel_protocol: tunnelProtocolSchema,
});

interface Statements {
  insert: SQLite.Statement;
  open: SQLite.Statement;
}

const statements = perConnection(
  (sqlite): Statements => ({
    insert: sqlite.prepare(
      `INSERT INTO control_logs (node_id, config_id, request_id, kind, action, status, message, created_at, updated_at,
                                 pushed_config_version, pushed_config_sha256, pushed_tunnel_protocol)
       VALUES (?, ?, ?, 'command', ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    open: sqlite.prepare("SELECT * FROM control_logs WHERE kind = 'command' AND status IN ('pending', 'accepted') ORDER BY log_id"),
  }),
);

/**
 * Inserts the control log row of a command (`kind = 'command'`).
 * @param row.status `pending` for a command about to be published; `failed` for one that could
 *   not be sent at all (its `message` says why; `request_id` is then null)
 * @param row.at creation time, ms since the epoch
 * @param row.pushed the push target of a config push, else null
 * @returns the new `log_id`
 * @throws SqliteError when the node no longer exists (foreign key) or the database fails
 */
export function insertCommandLog(
  conn: Connection,
  row: {
    configId: string;
    nodeId: string;
    requestId: string | null;
    action: string;
    status: "pending" | "failed";
    message: string;
    at: number;
    pushed: PushTarget | null;
  },
): number {
  const sqlite = sqliteOf(conn);
  const info = statements(sqlite).insert.run(
    row.nodeId,
    row.configId,
    row.requestId,
    row.action,
    row.status,
    row.message,
    row.at,
    row.at,
    row.pushed?.version ?? null,
    row.pushed?.sha ?? null,
    row.pushed?.protocol ?? null,
  );
  return Number(info.lastInsertRowid);
}

/** Command rows still waiting for a final ACK (`pending` or `accepted`), oldest first. */
export function listOpenCommandLogs(conn: Connection): ControlLogRow[] {
  const sqlite = sqliteOf(conn);
  return statements(sqlite).open.all() as ControlLogRow[];
}

/**
 * The push target stored on a row.
 * @returns `target` null when the row has none (not a config push, or written before migration
 *   0003); `invalid` true when the stored columns are not a valid target (a tampered snapshot),
 *   with `target` null: such a push then confirms nothing when its ACK arrives
 */
export function pushTargetOf(row: ControlLogRow): { target: PushTarget | null; invalid: boolean } {
  if (row.pushed_config_version === null && row.pushed_config_sha256 === null && row.pushed_tunnel_protocol === null) {
    return { target: null, invalid: false };
  }
  const parsed = pushTargetSchema.safeParse(row);
  if (!parsed.success) return { target: null, invalid: true };
  const d = parsed.data;
  return { target: { version: d.pushed_config_version, sha: d.pushed_config_sha256, protocol: d.pushed_tunnel_protocol }, invalid: false };
}

/** The prepared statements of {@link createCommandLogStatements}. */
export interface CommandLogStatements {
  /** Sets a command row's `status` and `message`; `at` (ms) goes to `updated_at`. No row: nothing happens. */
  writeStatus(logId: number, status: CommandStatus, message: string, at: number): void;
  /** The control log row with this id; undefined when it is gone (its node deleted, a snapshot restored). */
  byId(logId: number): ControlLogRow | undefined;
  /** Runs `fn` in one transaction (a savepoint inside an open one): a final status and the alerts it causes commit together. */
  inTransaction<T>(fn: () => T): T;
}

/**
 * Prepares the command tracker's status write and row read once (every ACK of every command
 * goes through them, DESIGN §2 "prepared statements for the hot path made by store factories").
 */
export function createCommandLogStatements(conn: Connection): CommandLogStatements {
  const sqlite = sqliteOf(conn);
  const update = sqlite.prepare("UPDATE control_logs SET status = ?, message = ?, updated_at = ? WHERE log_id = ?");
  const select = sqlite.prepare<[number], ControlLogRow>("SELECT * FROM control_logs WHERE log_id = ?");
  const transaction = sqlite.transaction((fn: () => unknown) => fn());
  return {
    writeStatus(logId, status, message, at) {
      update.run(status, message, at, logId);
    },
    byId: (logId) => select.get(logId),
    inTransaction: <T>(fn: () => T) => transaction(fn) as T,
  };
}
