import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { ApiError } from '../errors/index.ts';
import { TimeSlice } from '../time/index.ts';
import type { BatchRow, BatchStatement } from './batch.ts';
import type { QueryTimer } from './query-stats.ts';
import type { Row, SqlExecutor } from './sql.ts';

/**
 * SQLite primary result codes that mean the database itself is not usable now: busy (5), locked
 * (6), out of memory (7), read-only (8: a file or folder that cannot be written), I/O (10),
 * corrupt (11), full (13), cannot open (14), lock protocol (15), not a database (26).
 */
const UNAVAILABLE = new Set([5, 6, 7, 8, 10, 11, 13, 14, 15, 26]);
const CONSTRAINT = 19;
const BUSY = 5;
/** The longest pause between two tries of a statement another connection keeps waiting. */
const BUSY_PAUSE_MAX_MS = 16;

const primaryCode = (err: unknown): number | undefined => {
  const code = (err as { errcode?: unknown }).errcode;
  return typeof code === 'number' ? code & 0xff : undefined;
};

/** A batch statement's SQLite text; one written for PostgreSQL alone is a caller's mistake. */
function sqliteText(stmt: BatchStatement): string {
  if (stmt.sqlite === null) throw new Error('BatchStatement: this statement has no SQLite form');
  return stmt.sqlite;
}

function toParam(v: unknown): SQLInputValue {
  if (v === undefined) return null;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v instanceof Date) return v.toISOString();
  return v as SQLInputValue;
}

/**
 * `node:sqlite` behind the async executor interface. Statements are prepared once and cached.
 * An open transaction holds a gate so that no other caller's statement lands inside it while it
 * awaits; transactions take their turn one after another.
 *
 * Another connection may hold the write lock (a node's batch writer thread, the CLI). SQLite's
 * busy handler would sleep inside the call, on the event loop; with `busyWaitMs` the connection
 * is opened with no busy timeout and a statement that finds the database busy outside a
 * transaction (and `BEGIN IMMEDIATE`) is tried again on a timer until `busyWaitMs` has passed,
 * so the node goes on answering meanwhile. Inside a transaction this connection already holds
 * the lock.
 */
export class SqliteExecutor implements SqlExecutor {
  readonly dialect = 'sqlite' as const;
  readonly #db: DatabaseSync;
  readonly #stats: QueryTimer;
  readonly #busyWaitMs: number;
  readonly #statements = new Map<string, StatementSync>();
  /** Closed while a transaction of this connection is open: every other statement waits. */
  #gate: Promise<void> | null = null;
  /**
   * Held by a transaction from its call to its end, including while its `BEGIN` waits for another
   * connection's lock: the next transaction waits for it, a lone statement does not (it ran behind
   * a waiting `BEGIN` before: a `/go` cache miss waited ~0.5 s behind an ACP save that waited for
   * the writer thread's 50,000-click transaction).
   */
  #turn: Promise<void> | null = null;

  constructor(db: DatabaseSync, stats: QueryTimer, { busyWaitMs = 0 }: { busyWaitMs?: number } = {}) {
    this.#db = db;
    this.#stats = stats;
    this.#busyWaitMs = busyWaitMs;
  }

  async all<T = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    while (this.#gate) await this.#gate;
    return (await this.#execWaiting(sql, params, true)) as T[];
  }

  async run(sql: string, params: readonly unknown[] = []): Promise<number> {
    while (this.#gate) await this.#gate;
    return (await this.#execWaiting(sql, params, false)) as number;
  }

  /** In a transaction of its own, so that a batch is all or nothing as on PostgreSQL. */
  async batch(stmt: BatchStatement, rows: readonly BatchRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    return this.transaction(() => this.execBatch(sqliteText(stmt), rows));
  }

  async script(sql: string): Promise<void> {
    while (this.#gate) await this.#gate;
    this.execScript(sql);
  }

  execScript(sql: string): void {
    const start = this.#stats.clock.monotonic();
    try {
      this.#db.exec(sql);
      this.#stats.ok(start);
    } catch (err) {
      this.#stats.failed(start, err, false);
      throw err;
    }
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    while (this.#turn) await this.#turn;
    let next!: () => void;
    this.#turn = new Promise((r) => {
      next = r;
    });
    let open: (() => void) | undefined;
    try {
      // The gate closes in the same synchronous step as the BEGIN that succeeds: a statement
      // resuming in between would run inside this transaction.
      await this.#execWaiting('BEGIN IMMEDIATE', [], false, () => {
        this.#gate = new Promise((r) => {
          open = r;
        });
      });
      try {
        const out = await fn(new SqliteTransaction(this));
        this.exec('COMMIT', [], false);
        return out;
      } catch (err) {
        if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
        throw err;
      }
    } finally {
      this.#gate = null;
      open?.();
      this.#turn = null;
      next();
    }
  }

  /** Runs one statement now, timed; maps SQLite failures to contract errors. */
  exec(sql: string, params: readonly unknown[], rows: boolean): Row[] | number {
    const start = this.#stats.clock.monotonic();
    try {
      const out = this.#step(sql, params, rows);
      this.#stats.ok(start);
      return out;
    } catch (err) {
      return this.#failed(start, err);
    }
  }

  /**
   * {@link exec}, tried again on a timer while another connection holds the lock, until
   * `busyWaitMs` has passed (the last try is at that deadline, so giving up means it was waited
   * for). The wait is timed with the statement; tries that found the database busy are not
   * failures. While it waited, a transaction of this connection may have begun: the next try waits
   * for its gate rather than land inside it. `done` runs in the same synchronous step as the
   * statement that succeeded.
   */
  async #execWaiting(
    sql: string,
    params: readonly unknown[],
    rows: boolean,
    done?: () => void,
  ): Promise<Row[] | number> {
    const start = this.#stats.clock.monotonic();
    // Real time, whatever clock the stats were given: this waits for another connection.
    const since = performance.now();
    let pause = 1;
    for (;;) {
      try {
        const out = this.#step(sql, params, rows);
        done?.();
        this.#stats.ok(start);
        return out;
      } catch (err) {
        const left = this.#busyWaitMs - (performance.now() - since);
        if (primaryCode(err) !== BUSY || left <= 0) return this.#failed(start, err);
        await new Promise<void>((r) => setTimeout(r, Math.min(pause, Math.ceil(left))));
        pause = Math.min(pause * 2, BUSY_PAUSE_MAX_MS);
      }
      while (this.#gate) await this.#gate;
    }
  }

  #step(sql: string, params: readonly unknown[], rows: boolean): Row[] | number {
    const stmt = this.#prepared(sql);
    const args = params.map(toParam);
    return rows ? (stmt.all(...args) as Row[]) : Number(stmt.run(...args).changes);
  }

  /**
   * Runs one prepared statement per row, timed as one query (it is one batch statement; counting
   * each row would make the `db` section's figures depend on batch sizes). The caller holds the
   * transaction, whose gate keeps every other statement out while this yields: a batch of 100k
   * rows is ~1 s of synchronous work, so it hands the event loop a turn every few ms (#12) and
   * the node keeps answering from its cache meanwhile.
   */
  async execBatch(sql: string, rows: readonly BatchRow[]): Promise<number> {
    const start = this.#stats.clock.monotonic();
    const slice = new TimeSlice();
    try {
      const stmt = this.#prepared(sql);
      let changes = 0;
      for (let i = 0; i < rows.length; i++) {
        changes += Number(stmt.run(...rows[i]!.map(toParam)).changes);
        if ((i & 63) === 63) await slice.pause();
      }
      this.#stats.ok(start);
      return changes;
    } catch (err) {
      return this.#failed(start, err);
    }
  }

  #prepared(sql: string): StatementSync {
    let stmt = this.#statements.get(sql);
    if (stmt === undefined) {
      stmt = this.#db.prepare(sql);
      this.#statements.set(sql, stmt);
    }
    return stmt;
  }

  #failed(start: number, err: unknown): never {
    const primary = primaryCode(err);
    const unavailable = primary !== undefined ? UNAVAILABLE.has(primary) : !this.#db.isOpen;
    this.#stats.failed(start, err, unavailable);
    if (primary === CONSTRAINT) throw new ApiError('resource.conflict', undefined, { cause: err });
    if (unavailable) throw new ApiError('db.unavailable', undefined, { cause: err });
    throw err;
  }
}

/** The executor seen from inside a transaction: statements run at once, nesting flattens. */
class SqliteTransaction implements SqlExecutor {
  readonly dialect = 'sqlite' as const;
  readonly #outer: SqliteExecutor;
  constructor(outer: SqliteExecutor) {
    this.#outer = outer;
  }
  async all<T = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    return this.#outer.exec(sql, params, true) as T[];
  }
  async run(sql: string, params: readonly unknown[] = []): Promise<number> {
    return this.#outer.exec(sql, params, false) as number;
  }
  async batch(stmt: BatchStatement, rows: readonly BatchRow[]): Promise<number> {
    return rows.length === 0 ? 0 : this.#outer.execBatch(sqliteText(stmt), rows);
  }
  async script(sql: string): Promise<void> {
    this.#outer.execScript(sql);
  }
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return fn(this);
  }
}
