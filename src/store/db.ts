import { accessSync, constants, mkdirSync, statfsSync } from "node:fs";
import { dirname } from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, SqliteDialect, type Driver, type MigrationProvider } from "kysely";
import type { Logger } from "../logger.js";
import { CONNECTION, StatementCache, type AfterCommit, type Connected, type Db, type Trx } from "./connection.js";
import { migrations } from "./migrations.js";
import { StoreWorker } from "./store-worker.js";
import type { Database } from "./schema.js";

export { StatementCache, STATEMENT_CACHE_SIZE, type AfterCommit, type Connected, type Db } from "./connection.js";

/**
 * Kysely's SQLite dialect, except that ROLLBACK is skipped when SQLite has already rolled the
 * transaction back itself, as it does on SQLITE_FULL, SQLITE_IOERR and some SQLITE_BUSY (at the
 * statement or at COMMIT). Kysely would otherwise issue ROLLBACK, fail with "cannot rollback - no
 * transaction is active", and throw that instead of the cause: a full disk answered 500 INTERNAL
 * rather than 503 STORAGE_UNAVAILABLE (docs/history/decisions-2026.md "chaos and resource faults").
 */
class RollbackSafeSqliteDialect extends SqliteDialect {
  readonly #sqlite: SQLite.Database;

  constructor(sqlite: SQLite.Database, statements: StatementCache) {
    super({ database: statements });
    this.#sqlite = sqlite;
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const rollback = driver.rollbackTransaction.bind(driver);
    driver.rollbackTransaction = async (connection) => {
      if (this.#sqlite.inTransaction) await rollback(connection);
    };
    return driver;
  }
}

/**
 * SQLite's page cache per connection: negative = KiB, so 64 MiB (SQLite's default is 2 MiB). A
 * node joining an n-node full mesh inserts n − 1 pair rows whose index entries land on ~n
 * different pages; with 2 MiB those pages are read again from the file on every write from a
 * few hundred nodes on (docs/history/decisions-2026.md "the 5,000-node build"). Filled on demand:
 * a small database uses no more than its size.
 */
export const PAGE_CACHE_SIZE = -65536;

/**
 * Pages in the WAL after which a commit checkpoints (SQLite's default: 1,000 = 4 MiB). A write
 * of a large full mesh dirties more pages than that, so with the default every such write
 * checkpointed (and synced the file) on its own; 50,000 pages (~200 MiB of WAL at 4 KiB pages)
 * lets ~10 writes of a 5,000-node mesh share one checkpoint and rewrite a page touched by several
 * of them once. With `synchronous = NORMAL` the WAL is synced at checkpoints only, so a power cut
 * (not a crash of the process) can lose the commits since the last one: a longer interval widens
 * that window (the kernel still writes dirty pages back within ~30 s); it never corrupts the file.
 * docs/history/decisions-2026.md "the 5,000-node build".
 */
export const WAL_AUTOCHECKPOINT_PAGES = 50_000;

/**
 * The same backstop while the store worker runs (~1 GiB of WAL at 4 KiB pages). The worker
 * checkpoints every second, but a WAL only starts over from its beginning when a write begins
 * after everything was copied, which sustained writes never allow: a 1,000-node protocol switch
 * writes ~200 MiB of WAL without a pause. At 50,000 pages the commit that crossed it ran the
 * backstop's checkpoint in the event loop, syncing the files: one 90–170 ms stall per switch
 * (62–95 ms of it blocked in I/O). The worker has already copied all but the last second, so
 * the WAL starts over at the first pause in writes; this bound is only for a worker that stopped
 * copying. docs/history/decisions-2026.md "the checkpoint backstop while the worker runs".
 */
export const WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER = 262_144;

/**
 * A WAL file that grew past this (bytes) is cut back to it when the WAL starts over
 * (`journal_size_limit`), and to zero by the store worker once the writer is idle and every frame
 * was copied (src/store/store-worker.thread.ts), so that a burst (a switch, a 5,000-node build)
 * does not leave a file of up to 1 GiB behind: sustained writes never let the WAL start over, so
 * the limit alone would wait for the next write after the burst.
 */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * The one owner of the SQLite file: WAL, `busy_timeout`, foreign keys on, a 64 MiB page cache,
 * checkpoints by the store worker (or every 50,000 WAL pages without one), Kysely's statements
 * kept in a {@link StatementCache}, migrations at open. Nobody outside `src/store` touches the
 * connection; they go through one of three doors:
 * - writes: {@link Store.transaction} (Kysely, commit hooks);
 * - reads: Kysely's `db` outside a transaction, or {@link Store.read} for the raw prepared
 *   statements of the large reads (lists, views, counts);
 * - background writers that must never land inside a request's transaction (client events,
 *   retention): {@link Store.whenIdle};
 * - the hot path's writers (the actors' group commit, the command tracker): the prepared
 *   statements of a store factory made from the store, in the factory's own transaction.
 * Repositories of raw statements and statement factories take the store itself (a {@link Connected}).
 */
export class Store implements Connected {
  readonly [CONNECTION]: SQLite.Database;
  /** Kysely's handle: queries outside a transaction (each on the one connection, in turn). */
  readonly db: Db;
  /** Kysely's prepared statements, by SQL text. */
  readonly statements: StatementCache;
  readonly #log: Logger;
  readonly #file: string;
  #worker: StoreWorker | null = null;
  /** {@link whenIdle}'s work, in the order asked. */
  #idle: IdleTask[] = [];
  #idleScheduled = false;
  readonly #walTruncateBytes: number;
  #truncating = false;

  private constructor(sqlite: SQLite.Database, file: string, log: Logger, walTruncateBytes: number) {
    this[CONNECTION] = sqlite;
    this.#file = file;
    this.#log = log;
    this.#walTruncateBytes = walTruncateBytes;
    this.statements = new StatementCache(sqlite);
    this.db = new Kysely<Database>({ dialect: new RollbackSafeSqliteDialect(sqlite, this.statements) });
  }

  /** The database file's path (":memory:" for an in-memory store). */
  get file(): string {
    return this.#file;
  }

  /** True for an in-memory database, which no other connection or thread can open. */
  get inMemory(): boolean {
    return this[CONNECTION].memory || this.#file === "" || this.#file === ":memory:";
  }

  /**
   * Opens (creating if needed) the database file and applies pending migrations.
   * @param file path of the SQLite file, or ":memory:"
   * @throws Error when the file's directory cannot be written (its message names the directory
   *   and the cause, e.g. "read-only file system"), when SQLite cannot open the file (the message
   *   names the file, SQLite's reason and the bytes free on its file system: a full disk says only
   *   "disk I/O error"), or when a migration fails (the caller exits non-zero)
   * @param opts.walTruncateBytes WAL size past which an idle WAL the store worker copied entirely
   *   is truncated ({@link truncateIdleWal}; default {@link WAL_SIZE_LIMIT_BYTES}; tests lower it)
   */
  static async open(file: string, log: Logger, opts: { walTruncateBytes?: number } = {}): Promise<Store> {
    if (file !== ":memory:") assertWritableDir(dirname(file));
    let sqlite: SQLite.Database | undefined;
    try {
      sqlite = new SQLite(file);
      sqlite.pragma("journal_mode = WAL");
      sqlite.pragma("busy_timeout = 5000");
      sqlite.pragma("foreign_keys = ON");
      sqlite.pragma("synchronous = NORMAL");
      sqlite.pragma(`cache_size = ${PAGE_CACHE_SIZE}`);
      sqlite.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
      sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    } catch (err) {
      sqlite?.close();
      throw openError(file, err);
    }
    const store = new Store(sqlite, file, log, opts.walTruncateBytes ?? WAL_SIZE_LIMIT_BYTES);
    try {
      await store.migrate();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /** Applies pending migrations. @throws Error naming the failed migration. */
  async migrate(): Promise<void> {
    const provider: MigrationProvider = { getMigrations: async () => migrations };
    const { error, results } = await new Migrator({ db: this.db, provider }).migrateToLatest();
    for (const r of results ?? []) {
      if (r.status === "Success") this.#log.info({ migration: r.migrationName }, "migration applied");
      if (r.status === "Error") this.#log.error({ migration: r.migrationName }, "migration failed");
    }
    if (error) throw new Error(`database migration failed: ${error instanceof Error ? error.message : String(error)}`);
    // Converting a full mesh's pair rows to the policy frees most of the file (167 MB of 170 at
    // 1,000 nodes): given back to the file system once, at the upgrade.
    if ((results ?? []).some((r) => r.migrationName === "0016_mesh_pair_policy" && r.status === "Success") && !this.inMemory) {
      this[CONNECTION].exec("VACUUM");
      this[CONNECTION].pragma("wal_checkpoint(TRUNCATE)"); // at start-up, nobody else reads or writes
      this.#log.info("database compacted after the full-mesh policy migration");
    }
  }

  /**
   * Runs `fn` in one transaction. Callbacks registered with `afterCommit` run, in order, only
   * after the commit succeeded; on rollback they are dropped. The returned promise settles after
   * the hooks' promises (so a request answers once its after-commit work is done); a failing
   * hook is logged, never turned into a failure of the committed write. An error thrown by `fn`
   * rolls back and is rethrown.
   */
  async transaction<T>(fn: (trx: Trx, afterCommit: AfterCommit) => Promise<T>): Promise<T> {
    const hooks: Array<() => void | Promise<unknown>> = [];
    const result = await this.db.transaction().execute((trx) => fn(trx, (h) => hooks.push(h)));
    const pending: Array<Promise<unknown>> = [];
    for (const h of hooks) {
      try {
        const r = h();
        if (r instanceof Promise) pending.push(r.catch((err: unknown) => this.#log.error({ err }, "after-commit hook failed")));
      } catch (err) {
        this.#log.error({ err }, "after-commit hook failed");
      }
    }
    await Promise.all(pending);
    return result;
  }

  /**
   * Runs `fn` while holding the connection, as Kysely's own queries do: no caller's transaction
   * is open meanwhile, so the raw statements `fn` runs through repository functions (given the
   * store as `conn`) never read another caller's uncommitted rows, and a synchronous batch of
   * its own (a restore's replace) never lands inside one. Waits for an open transaction to end,
   * so it must not be called from inside a transaction of this store (it would wait for itself).
   * @returns what `fn` returns; rejects with what it throws
   */
  async read<T>(fn: (conn: Connected) => T | Promise<T>): Promise<T> {
    return this.db.connection().execute(async () => fn(this));
  }

  /**
   * Runs `fn` (synchronous raw statements: a background writer's batch or step) at the next
   * turn of the event loop at which no transaction is open on the connection, so that it never
   * lands inside a request's transaction; while one is open it waits a turn at a time. Work
   * asked in the same turn runs in that order, in one turn.
   * @param opts.turns turns to wait at most (default: no limit)
   * @returns what `fn` returns; rejects with what it throws, or with an Error "the database
   *   stayed busy" after `opts.turns` turns inside a transaction
   */
  whenIdle<T>(fn: () => T, opts: { turns?: number } = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#idle.push({ run: () => resolve(fn()), fail: reject, turns: opts.turns ?? Number.POSITIVE_INFINITY });
      this.#scheduleIdle();
    });
  }

  #scheduleIdle(): void {
    if (this.#idleScheduled) return;
    this.#idleScheduled = true;
    setImmediate(() => this.#runIdle());
  }

  #runIdle(): void {
    this.#idleScheduled = false;
    const tasks = this.#idle;
    this.#idle = [];
    if (this[CONNECTION].inTransaction) {
      // A request's transaction holds the connection: write after it, never inside it.
      for (const t of tasks) {
        if (--t.turns > 0) this.#idle.push(t);
        else t.fail(new Error("the database stayed busy"));
      }
      if (this.#idle.length > 0) this.#scheduleIdle();
      return;
    }
    for (const t of tasks) {
      try {
        t.run();
      } catch (err) {
        t.fail(err);
      }
    }
  }

  /**
   * Truncates the WAL file to zero bytes (`wal_checkpoint(TRUNCATE)` on this, the writing,
   * connection), between two transactions ({@link whenIdle}): the store worker asks once its
   * checkpoint copied every frame of a WAL past the limit, so a large write leaves no large WAL
   * behind. Done here, not on the worker's connection: restarting the WAL from another connection
   * would fail a transaction of this one that read before and writes after (SQLITE_BUSY_SNAPSHOT).
   * Never waits: with the busy timeout at 0, a reader still on the WAL (a render job's statement
   * on the worker) makes it answer busy, and the next report tries again. Its cost is the file
   * system's: cutting a 500 MB WAL takes ~0.2–0.3 s of this thread (freeing its extents), paid
   * once, after the write, instead of by the first commit that SQLite's `journal_size_limit` would
   * otherwise have cut it in.
   * @returns true when the file was truncated
   */
  async truncateIdleWal(): Promise<boolean> {
    if (this.#truncating) return false;
    this.#truncating = true;
    try {
      return await this.whenIdle(() => {
        const sqlite = this[CONNECTION];
        // A report that arrives as the store closes finds nothing left to truncate.
        if (!sqlite.open) return false;
        sqlite.pragma("busy_timeout = 0");
        try {
          const [row] = sqlite.pragma("wal_checkpoint(TRUNCATE)") as Array<{ busy: number }>;
          return row !== undefined && row.busy === 0;
        } finally {
          sqlite.pragma("busy_timeout = 5000");
        }
      });
    } finally {
      this.#truncating = false;
    }
  }

  /**
   * The worker thread of this store's file (src/store/store-worker.ts: renders large writes'
   * nodes, checkpoints the WAL), made on first use; null for ":memory:" (another thread cannot
   * open it), where callers render in this thread and commits checkpoint as before.
   */
  worker(): StoreWorker | null {
    if (this.#file === ":memory:") return null;
    this.#worker ??= new StoreWorker(this.#file, this.db, this.#log.child({ name: "store-worker" }), {
      walTruncateBytes: this.#walTruncateBytes,
      onIdleWal: () => void this.truncateIdleWal().catch((err: unknown) => this.#log.warn({ err }, "the idle WAL was not truncated")),
      // While the worker checkpoints, the commits' own checkpoint is only a far backstop.
      onRunning: (running) => void this[CONNECTION].pragma(`wal_autocheckpoint = ${running ? WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER : WAL_AUTOCHECKPOINT_PAGES}`),
    });
    return this.#worker;
  }

  /** Stops the store worker, then closes the database. */
  async close(): Promise<void> {
    await this.#worker?.close();
    await this.db.destroy();
  }
}

/** One piece of {@link Store.whenIdle}'s work. */
interface IdleTask {
  run(): void;
  fail(err: unknown): void;
  /** Turns it may still wait. */
  turns: number;
}

/** Why a directory cannot take files, in words, from an errno code. */
const DIR_FAULTS: Record<string, string> = {
  EROFS: "its file system is read-only",
  EACCES: "permission denied",
  EPERM: "permission denied",
  ENOSPC: "no space left on its file system",
  EDQUOT: "the disk quota is exhausted",
};

/**
 * Creates `dir` if needed and checks that it can be written: SQLite itself would only say
 * "unable to open database file" (docs/history/decisions-2026.md "chaos and resource faults").
 * @throws Error "the data directory {dir} is not writable: its file system is read-only (EROFS)" and alike
 */
function assertWritableDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "";
    throw new Error(`the data directory ${dir} is not writable: ${DIR_FAULTS[code] ?? (err instanceof Error ? err.message : String(err))} (${code || "unknown"})`, { cause: err });
  }
}

/**
 * SQLite's error at open, with the file's name and the space left on its file system: a full
 * disk surfaces as "disk I/O error" while the WAL index is created (docs/history/decisions-2026.md
 * "chaos and resource faults").
 */
function openError(file: string, err: unknown): Error {
  const reason = err instanceof Error ? err.message : String(err);
  let free = "";
  try {
    const fs = statfsSync(dirname(file));
    free = `; ${fs.bavail * fs.bsize} bytes free on its file system`;
  } catch {
    // no statfs answer: the reason alone
  }
  return new Error(`cannot open the database ${file}: ${reason}${free}`, { cause: err });
}
