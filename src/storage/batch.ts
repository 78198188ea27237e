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

/** Rows to the statement's parameters on PostgreSQL: one array per column. */
export function columnArrays(columns: number, rows: readonly BatchRow[]): unknown[][] {
  const out: unknown[][] = [];
  for (let c = 0; c < columns; c++) out.push(new Array(rows.length));
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    for (let c = 0; c < columns; c++) out[c]![i] = row[c];
  }
  return out;
}
