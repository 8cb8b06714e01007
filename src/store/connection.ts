/**
 * The store's connection as the rest of `src/store` sees it: the Kysely handle types, the
 * {@link Connected} capability that raw-statement repositories take instead of the
 * better-sqlite3 handle, the per-connection statement cache of repositories and Kysely's
 * statement cache. A leaf module: `db.ts`, the store worker, the render job and every repository
 * import it, and it imports none of them.
 *
 * Only `src/store` reads the handle behind a {@link Connected} ({@link sqliteOf}): outside it,
 * code holds the `Store` and calls repository functions with it, inside `Store.read`,
 * `Store.transaction` or `Store.whenIdle` (test/store/raw-connection.test.ts keeps it so).
 */
import type SQLite from "better-sqlite3";
import type { Kysely, SqliteDatabase, Transaction } from "kysely";
import type { Database } from "./schema.js";

/** A Kysely handle usable both outside and inside a transaction. */
export type Db = Kysely<Database>;
export type Trx = Transaction<Database>;

/**
 * Registers work to run after the surrounding transaction commits (actors, SSE frames, kicks).
 * A hook may return a promise; the transaction's own promise settles after it.
 */
export type AfterCommit = (fn: () => void | Promise<unknown>) => void;

/** The key under which a {@link Connected} holds its better-sqlite3 handle (src/store only). */
export const CONNECTION: unique symbol = Symbol("store connection");

/**
 * Something that holds a store connection: the `Store` itself. Raw-statement repositories take
 * it; only `src/store` opens it ({@link sqliteOf}).
 */
export interface Connected {
  readonly [CONNECTION]: SQLite.Database;
}

/** What a raw-statement repository runs on: a store, or (inside `src/store`) a handle of its own (a private copy, the worker's). */
export type Connection = Connected | SQLite.Database;

/** The better-sqlite3 handle behind `c`. For `src/store` only. */
export function sqliteOf(c: Connection): SQLite.Database {
  return CONNECTION in c ? c[CONNECTION] : c;
}

/**
 * Makes `build` run once per better-sqlite3 connection and returns its result from then on: the
 * prepared statements of a repository, created at first use and kept as long as the connection.
 */
export function perConnection<T>(build: (sqlite: SQLite.Database) => T): (c: Connection) => T {
  const cache = new WeakMap<SQLite.Database, T>();
  return (c) => {
    const sqlite = sqliteOf(c);
    let made = cache.get(sqlite);
    if (made === undefined) {
      made = build(sqlite);
      cache.set(sqlite, made);
    }
    return made;
  };
}

/** Statements {@link StatementCache} keeps for Kysely's queries (docs/history/decisions-2026.md "prepared-statement cache"). */
export const STATEMENT_CACHE_SIZE = 500;

/**
 * The better-sqlite3 handle as Kysely's SQLite driver sees it, with `prepare` answered from a
 * bounded LRU keyed by SQL text: the driver prepares on every query, which was ~12 % of the
 * service's CPU at 1,000 nodes (docs/history/decisions-2026.md "prepared-statement cache"). Only Kysely's
 * path goes through it; statements prepared by raw-statement repositories are theirs (they may
 * set `raw`/`pluck`/`expand`, which Kysely never does).
 * - A cached statement that is still being iterated (`busy`: a `stream()` in progress) is not
 *   handed out again: that query gets a fresh, uncached statement.
 * - Past `capacity` texts (dynamic IN lists) the least recently used statement is dropped;
 *   better-sqlite3 finalizes it when it is collected.
 * - A schema change needs nothing: SQLite re-prepares a statement whose schema changed.
 */
export class StatementCache implements SqliteDatabase {
  readonly #sqlite: SQLite.Database;
  readonly #capacity: number;
  /** In use order, least recent first: a hit is deleted and set again. */
  readonly #statements = new Map<string, SQLite.Statement>();

  constructor(sqlite: SQLite.Database, capacity = STATEMENT_CACHE_SIZE) {
    this.#sqlite = sqlite;
    this.#capacity = capacity;
  }

  /** Statements held. */
  get size(): number {
    return this.#statements.size;
  }

  /** The cached statement for `sql`, or a new one. @throws SqliteError when `sql` does not prepare */
  prepare(sql: string): SQLite.Statement {
    const cached = this.#statements.get(sql);
    if (cached !== undefined) {
      if (cached.busy) return this.#sqlite.prepare(sql);
      this.#statements.delete(sql);
      this.#statements.set(sql, cached);
      return cached;
    }
    const made = this.#sqlite.prepare(sql);
    this.#statements.set(sql, made);
    if (this.#statements.size > this.#capacity) {
      const oldest = this.#statements.keys().next();
      if (oldest.done !== true) this.#statements.delete(oldest.value);
    }
    return made;
  }

  /** Drops the statements and closes the database (Kysely's `destroy`). */
  close(): void {
    this.#statements.clear();
    this.#sqlite.close();
  }
}
