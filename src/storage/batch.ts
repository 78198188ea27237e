import { TimeSlice } from '../time/index.ts';

/** The SQL type of one value of a batch row, which PostgreSQL reads it back as from the batch's JSON. */
export type BatchColumnType = 'text' | 'integer' | 'bigint' | 'boolean' | 'timestamptz';

/** One row of a batch: its values in the order of {@link BatchStatement.columns}. */
export type BatchRow = readonly unknown[];

export interface BatchStatementSpec {
  columns: readonly BatchColumnType[];
  /**
   * SQLite: the statement for one row, run once per row with the statement prepared once; `?N`
   * is the row's Nth value (1-based), so a value can be used twice. Null for a statement that
   * only PostgreSQL runs (one that writes two tables from the rows, where a SQLite caller runs two
   * statements): a SQLite executor refuses it.
   */
  sqlite: string | null;
  /**
   * PostgreSQL: one statement for all the rows, with `{rows}` where the batch is read as a
   * relation (`FROM {rows} AS r (id, hits, at)`); it holds no other placeholder.
   */
  postgres: string;
}

/**
 * A statement applied to every row of a batch (`SqlExecutor.batch`) in a number of round trips
 * that does not depend on the number of rows: PostgreSQL gets one statement whose one parameter is
 * the rows as a JSON array of arrays, read back as rows by `jsonb_array_elements` (a round trip a
 * row cost 0.2–0.5 ms, see docs/PERFORMANCE.md); SQLite, in-process, runs one prepared statement
 * per row, where the cost is per row rather than per trip. Both texts are written out because the
 * fastest form differs: `UPDATE ... FROM` a one-row subquery is 1.3–2× slower on SQLite than
 * `UPDATE ... WHERE id = ?`.
 *
 * Why JSON: `JSON.stringify` writes the text natively. A click written to PostgreSQL costs this
 * process 3.8 µs of CPU in all, against 6.2 µs with one array literal per column built in
 * JavaScript (`unnest` of 26 arrays, the form this replaced; bench/storage/click-log.bench.ts), and
 * PostgreSQL reads either form in the same time (the insert of 10,000 clicks: 84.6 against 84.5 ms).
 *
 * Statements are built once, at module load, and reused; the executors cache by text.
 */
export class BatchStatement {
  readonly columns: readonly BatchColumnType[];
  readonly sqlite: string | null;
  readonly postgres: string;

  constructor(spec: BatchStatementSpec) {
    const parts = spec.postgres.split('{rows}');
    if (parts.length !== 2 || spec.postgres.includes('?')) {
      throw new Error('BatchStatement: the PostgreSQL text needs one {rows} and no other placeholder');
    }
    this.columns = Object.freeze([...spec.columns]);
    this.sqlite = spec.sqlite;
    this.postgres = parts.join(jsonRows(spec.columns));
  }
}

/**
 * PostgreSQL: a relation of the rows given as one parameter (`?`, their {@link batchJson} text)
 * with these column types: what a {@link BatchStatement}'s `{rows}` becomes, for a statement that
 * reads several batches.
 */
export function jsonRows(columns: readonly BatchColumnType[]): string {
  const values = columns.map((t, i) => `(e->>${i})::${t}`).join(', ');
  return `(SELECT ${values} FROM jsonb_array_elements(?::jsonb) AS e)`;
}

/**
 * Rows serialised at a time: ~0.25 ms for clicks, ~3 ms for clicks whose ten sub-ids are all at
 * their longest, so a batch's text never holds the loop long.
 */
const JSON_CHUNK_ROWS = 256;

/**
 * A batch's rows as the one parameter of its PostgreSQL statement: a JSON array of arrays, written
 * a chunk of rows at a time with the event loop let go between chunks (one synchronous call for
 * 100k rows held the loop for tens of ms, #12). A Date becomes its ISO text, `undefined` null, a
 * BigInt its decimal text. The text is concatenated, not joined: `pg` flattens it once, as it
 * writes it (that write, ~1 ms a MB, is `pg`'s, in one call, as it was for the array literals).
 *
 * A lone UTF-16 surrogate (which `JSON.stringify` writes as a `\ud800` escape that PostgreSQL's
 * JSON refuses) becomes U+FFFD, as it does in UTF-8 on the way into either database when sent as
 * plain text, so that a row cannot make its whole batch fail. Click text is made well-formed before
 * it is batched (`storableText`); this is the backstop for every other batch.
 */
export async function batchJson(rows: readonly BatchRow[]): Promise<string> {
  const slice = new TimeSlice();
  let json = '[';
  for (let i = 0; i < rows.length; i += JSON_CHUNK_ROWS) {
    const chunk = rows.slice(i, i + JSON_CHUNK_ROWS);
    let text = stringify(chunk);
    // Checked and redone a chunk at a time: `\ud` also matches an escaped backslash followed by the
    // letters "ud", which any visitor can put in a sub-id, so a redo must cost no more than a chunk.
    if (text.includes('\\ud')) text = stringify(chunk.map(wellFormed));
    json += (i === 0 ? '' : ',') + text.slice(1, -1);
    await slice.pause();
  }
  return `${json}]`;
}

/** `JSON.stringify`, with BigInts (which it refuses) as their decimal text, read back by the cast. */
function stringify(rows: readonly BatchRow[]): string {
  try {
    return JSON.stringify(rows);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    return JSON.stringify(rows, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  }
}

const wellFormed = (row: BatchRow): unknown[] =>
  row.map((v) => (typeof v === 'string' ? v.toWellFormed() : v));
