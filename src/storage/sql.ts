import type { BatchRow, BatchStatement } from './batch.ts';

/**
 * The narrow SQL surface the repositories are written against, once, for both backends.
 * Statements use `?` placeholders (the PostgreSQL executor numbers them) and only SQL that both
 * SQLite 3.35+ and PostgreSQL 13+ accept; the few dialect differences live in the migrations and
 * in batch statements, which carry the text of each backend.
 */
export type Dialect = 'sqlite' | 'postgres';
export type Row = Record<string, unknown>;

/**
 * The part of an executor a long read needs: what reports and lists read through, an executor
 * itself or, on a SQLite node, the reader thread (src/storage/sqlite-reader.ts).
 */
export interface SqlReader {
  /** Rows of a statement. */
  all<T = Row>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /**
   * Rows of a statement stopped once it has run `budgetMs`, rejecting with {@link QueryTimeout}:
   * SQLite's reader thread, where `sluice_in_budget()` in the statement is its clock (node:sqlite
   * has no way to interrupt a statement from outside, so the statement checks as it scans).
   */
  allWithin?<T = Row>(budgetMs: number, sql: string, params?: readonly unknown[]): Promise<T[]>;
}

/** A read stopped at its time budget (a report's `reports.query_timeout_ms`). */
export class QueryTimeout extends Error {
  readonly budgetMs: number;
  constructor(budgetMs: number) {
    super(`the query ran past its time budget of ${budgetMs} ms`);
    this.name = 'QueryTimeout';
    this.budgetMs = budgetMs;
  }
}

export interface SqlExecutor extends SqlReader {
  readonly dialect: Dialect;
  /** Affected row count of a statement. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /**
   * Applies `stmt` to every row, all or nothing, in one round trip whatever the number of rows;
   * counted as one query in the stats on both backends. No rows: nothing is sent. Returns the
   * number of rows the statement affected (rows matching nothing are no error).
   */
  batch(stmt: BatchStatement, rows: readonly BatchRow[]): Promise<number>;
  /** Runs a parameterless multi-statement script (migrations). */
  script(sql: string): Promise<void>;
  /** Runs `fn` in one transaction: all of it commits or none of it does. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
}

/** Timestamps come back as ISO strings from SQLite and as Dates from PostgreSQL. */
export function toIso(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v.toISOString() : String(v);
}

/**
 * A sum of micro-units, as two columns `<as>_units` and `<as>_rest` (read back by {@link microsOf}):
 * the sum of whole units and the sum of what is left, each as text. In one piece, node:sqlite refuses
 * to read an integer past 2^53 as a JavaScript number (ten sales of 1,000,000,000 IDR made every
 * flows list and report fail), and SQLite's own `SUM` stops at 2^63 (`integer overflow`: 9.2 million
 * clicks at the largest cost per click), where PostgreSQL's numeric sum goes on. In two pieces
 * neither is near either limit, and both backends give the same exact total.
 */
export const sumMicros = (expr: string, as: string): string =>
  `CAST(SUM((${expr}) / 1000000) AS TEXT) AS ${as}_units, CAST(SUM((${expr}) % 1000000) AS TEXT) AS ${as}_rest`;

/** The exact sum {@link sumMicros} read as `as` (0 when nothing was summed). */
export function microsOf(r: Row, as: string): bigint {
  const units = r[`${as}_units`];
  const rest = r[`${as}_rest`];
  return (
    BigInt(units === null || units === undefined ? 0 : String(units)) * 1_000_000n +
    BigInt(rest === null || rest === undefined ? 0 : String(rest))
  );
}

/** Numbers come back as numbers from SQLite and as strings for bigint / COUNT from PostgreSQL. */
export function toNum(v: unknown): number {
  return typeof v === 'number' ? v : Number(v ?? 0);
}

/**
 * Runs `sql`, a `DELETE` of at most `chunk` rows whose last parameter is that chunk, until a
 * statement deletes fewer: each its own short transaction, with the event loop let go between
 * them, so a retention delete of millions of rows never holds a long lock nor (SQLite runs
 * in-process) the loop. Stops between statements when `signal` fires; what went stays gone.
 * Returns the rows deleted.
 */
export async function deleteInChunks(
  x: Pick<SqlExecutor, 'run'>,
  sql: string,
  params: readonly unknown[],
  chunk: number,
  signal?: AbortSignal,
): Promise<number> {
  let total = 0;
  while (!signal?.aborted) {
    const n = await x.run(sql, [...params, chunk]);
    total += n;
    if (n < chunk) break;
    await new Promise<void>((r) => setImmediate(r));
  }
  return total;
}
