import { TimeSlice } from '../time/index.ts';

/** The SQL type of one value of a batch row; PostgreSQL receives each column as one array of it. */
export type BatchColumnType = 'text' | 'integer' | 'bigint' | 'boolean' | 'timestamptz';

/** One row of a batch: its values in the order of {@link BatchStatement.columns}. */
export type BatchRow = readonly unknown[];

export interface BatchStatementSpec {
  columns: readonly BatchColumnType[];
  /**
   * SQLite: the statement for one row, run once per row with the statement prepared once; `?N`
   * is the row's Nth value (1-based), so a value can be used twice.
   */
  sqlite: string;
  /**
   * PostgreSQL: one statement for all the rows, with `{rows}` where the batch is read as a
   * relation (`FROM {rows} AS r (id, hits, at)`); it holds no other placeholder.
   */
  postgres: string;
}

/**
 * A statement applied to every row of a batch (`SqlExecutor.batch`) in a number of round trips
 * that does not depend on the number of rows: PostgreSQL gets one statement whose parameters are
 * one array per column, read back as rows by `unnest` (a round trip a row cost 0.2–0.5 ms, see
 * docs/PERFORMANCE.md); SQLite, in-process, runs one prepared statement per row, where the cost is
 * per row rather than per trip. Both texts are written out because the fastest form differs:
 * `UPDATE ... FROM` a one-row subquery is 1.3–2× slower on SQLite than `UPDATE ... WHERE id = ?`.
 *
 * Statements are built once, at module load, and reused; the executors cache by text.
 */
export class BatchStatement {
  readonly columns: readonly BatchColumnType[];
  readonly sqlite: string;
  readonly postgres: string;

  constructor(spec: BatchStatementSpec) {
    const parts = spec.postgres.split('{rows}');
    if (parts.length !== 2 || spec.postgres.includes('?')) {
      throw new Error('BatchStatement: the PostgreSQL text needs one {rows} and no other placeholder');
    }
    this.columns = Object.freeze([...spec.columns]);
    this.sqlite = spec.sqlite;
    this.postgres = parts.join(`unnest(${spec.columns.map((t) => `?::${t}[]`).join(', ')})`);
  }
}

/** One value of an array literal, quoted as `pg` quotes it (NULL bare; strings escaped). */
function element(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'boolean') return v ? 't' : 'f';
  const text = v instanceof Date ? v.toISOString() : String(v);
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}

/**
 * Rows to the statement's parameters on PostgreSQL as one array literal per column, built a slice
 * at a time. `pg` would build the same text from JavaScript arrays, but in one synchronous call:
 * 100k rows held the event loop for tens of ms (#12). Still one parameter per column, so still
 * one round trip.
 */
export async function columnLiterals(columns: number, rows: readonly BatchRow[]): Promise<string[]> {
  const slice = new TimeSlice();
  const out: string[] = [];
  for (let c = 0; c < columns; c++) {
    const parts = new Array<string>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      parts[i] = element(rows[i]![c]);
      if ((i & 1023) === 1023) await slice.pause();
    }
    out.push(`{${parts.join(',')}}`);
    await slice.pause();
  }
  return out;
}
