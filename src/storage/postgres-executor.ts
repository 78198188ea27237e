import type { Pool, PoolClient } from 'pg';
import { ApiError } from '../errors/index.ts';
import { type BatchRow, type BatchStatement, batchJson } from './batch.ts';
import type { QueryStats } from './query-stats.ts';
import type { Row, SqlExecutor } from './sql.ts';

/**
 * The server answered a connection and said no to its role, password or database name: at run time
 * (credentials rotated under the node, the database dropped) as unavailable as a server that is
 * down; at start, a mistake in the configuration that waiting does not cure.
 */
const REFUSED_LOGIN_CODES = new Set([
  '3D000', // invalid_catalog_name: the database is gone (or not yet created)
  '28000', // invalid_authorization_specification: the role may not connect (pg_hba)
  '28P01', // invalid_password
]);

/**
 * Failures of the server's state, by code: down or unreachable, a login it refuses, and the few
 * of other classes listed last (with the classes below: restarting, full).
 */
const UNAVAILABLE_CODES = new Set([
  ...REFUSED_LOGIN_CODES,
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  // object_not_in_prerequisite_state: as a connection's error, "database … is not currently
  // accepting connections" (ALLOW_CONNECTIONS false); no statement Sluice sends raises it otherwise.
  '55000',
  // One code of another class each, besides the classes below: a standby after a failover, and two
  // transient conflicts.
  '25006', // read_only_sql_transaction: a node still pointed at a server that became a standby
  '40001', // serialization_failure
  '40P01', // deadlock_detected
]);

/** Whether a driver error is the server refusing the login itself (see {@link REFUSED_LOGIN_CODES}). */
export function isRefusedLogin(err: unknown): boolean {
  return REFUSED_LOGIN_CODES.has(String((err as { code?: unknown } | undefined)?.code));
}

/**
 * SQLSTATE classes whose every condition is the server's state, not the statement's: connection
 * exceptions (08), insufficient resources (53: disk full, out of memory, too many connections),
 * operator intervention (57: a shutdown, a cancelled or timed-out statement) and system errors (58:
 * I/O). Such a statement may go through later as it is. Anything else (data, constraint, syntax)
 * is the statement's: the click log gives a batch up after its attempts only for those. Before,
 * a disk full or a standby's read-only refusal (below) held for over ten seconds dropped a click
 * batch a second (found by a reliability test).
 */
const UNAVAILABLE_CLASSES = ['08', '53', '57', '58'];
/**
 * Codes of those classes that depend on the statement: `temp_file_limit` exceeded (53400) would
 * fail the same batch forever. Given up after its attempts like any refused statement.
 */
const STATEMENT_CODES = new Set(['53400']);

export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  // A statement past the `statement_timeout` a report sets for itself took too long: the
  // statement's doing, not the server's state (another cancel, 57014 too, is an operator's).
  if (isStatementTimeout(err)) return false;
  if (
    typeof e.code === 'string' &&
    (UNAVAILABLE_CODES.has(e.code) ||
      (UNAVAILABLE_CLASSES.includes(e.code.slice(0, 2)) && !STATEMENT_CODES.has(e.code)))
  )
    return true;
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout/i.test(
    e.message ?? '',
  );
}

/** PostgreSQL cancelled the statement at the `statement_timeout` its transaction set. */
export function isStatementTimeout(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  return e?.code === '57014' && /statement timeout/.test(e.message ?? '');
}

const numbered = new Map<string, string>();
/** `?` placeholders to `$1..$n`, cached per statement text. */
function toPg(sql: string): string {
  let out = numbered.get(sql);
  if (out === undefined) {
    let n = 0;
    out = sql.replace(/\?/g, () => `$${++n}`);
    numbered.set(sql, out);
  }
  return out;
}

function mapError(err: unknown, stats: QueryStats, start: number): never {
  const unavailable = isUnavailable(err);
  stats.failed(start, err, unavailable);
  const code = (err as { code?: string }).code;
  // A serialization failure (40001) is no conflict of the caller's making: no transaction here is
  // serializable, so it is a standby's conflict with recovery, unavailable like the rest (a review
  // found it still mapped here, so a click batch that met it was given up after ten attempts).
  if (code === '23505' || code === '23503') {
    throw new ApiError('resource.conflict', undefined, { cause: err });
  }
  if (unavailable) throw new ApiError('db.unavailable', undefined, { cause: err });
  throw err;
}

type Queryable = Pool | PoolClient;

async function query(target: Queryable, stats: QueryStats, sql: string, params: readonly unknown[]) {
  const start = stats.clock.monotonic();
  try {
    const res = await target.query(toPg(sql), params as unknown[]);
    stats.ok(start);
    return res;
  } catch (err) {
    return mapError(err, stats, start);
  }
}

/** Statements on a pool (each on any free connection) or on one client (inside a transaction). */
class PostgresStatements {
  readonly dialect = 'postgres' as const;
  protected readonly target: Queryable;
  protected readonly stats: QueryStats;

  constructor(target: Queryable, stats: QueryStats) {
    this.target = target;
    this.stats = stats;
  }

  async all<T = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    return (await query(this.target, this.stats, sql, params)).rows as T[];
  }

  async run(sql: string, params: readonly unknown[] = []): Promise<number> {
    return (await query(this.target, this.stats, sql, params)).rowCount ?? 0;
  }

  /** One statement, its one parameter the rows as JSON (a single statement is atomic by itself). */
  async batch(stmt: BatchStatement, rows: readonly BatchRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    return (await query(this.target, this.stats, stmt.postgres, [await batchJson(rows)])).rowCount ?? 0;
  }

  async script(sql: string): Promise<void> {
    await query(this.target, this.stats, sql, []);
  }
}

/** `pg` pool behind the executor interface; a transaction holds one client from BEGIN to COMMIT. */
export class PostgresExecutor extends PostgresStatements implements SqlExecutor {
  readonly #pool: Pool;

  constructor(pool: Pool, stats: QueryStats) {
    super(pool, stats);
    this.#pool = pool;
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const start = this.stats.clock.monotonic();
    let client: PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      return mapError(err, this.stats, start);
    }
    let broken = false;
    // A checked-out client has no pool listener: a connection lost between two statements would be
    // an unhandled 'error' event and take the whole node down (the soak's database outage found
    // this). The statement in flight fails on its own; the client is discarded on release.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await query(client, this.stats, 'BEGIN', []);
      const out = await fn(new PostgresTransaction(client, this.stats));
      await query(client, this.stats, 'COMMIT', []);
      return out;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }
}

/** The executor seen from inside a transaction: its statements run on the transaction's client. */
class PostgresTransaction extends PostgresStatements implements SqlExecutor {
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return fn(this);
  }
}
