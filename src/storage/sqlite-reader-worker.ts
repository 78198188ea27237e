/**
 * The worker side of {@link SqliteReader}: one read-only connection to the node's SQLite file,
 * answering `{id, sql, params, budgetMs?}` with `{id, rows, more: true}` for each chunk of rows
 * but the last, then `{id, rows}`, or `{id, error}`. Statements are
 * prepared once.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const db = new DatabaseSync(workerData.path as string, { readOnly: true });
db.exec('PRAGMA busy_timeout = 5000');
const statements = new Map<string, StatementSync>();
/** Rows a message carries at most. */
const CHUNK = 1000;

/** When the statement under way must stop (performance.now()), Infinity for none. */
let deadline = Number.POSITIVE_INFINITY;
let calls = 0;
let spent = false;
/**
 * `sluice_in_budget()`: true until the deadline, then it throws and SQLite abandons the statement.
 * Called for each row a budgeted statement scans; the clock is read every 1,024 calls (a call is
 * ~0.1 µs, reading the clock several times that).
 */
db.function('sluice_in_budget', { deterministic: false, directOnly: true }, () => {
  if ((++calls & 1023) === 0 && performance.now() > deadline) {
    spent = true;
    throw new Error('time budget spent');
  }
  return 1;
});

parentPort!.on('message', (m: { id: number; sql: string; params: SQLInputValue[]; budgetMs?: number }) => {
  deadline = m.budgetMs === undefined ? Number.POSITIVE_INFINITY : performance.now() + m.budgetMs;
  spent = false;
  try {
    let stmt = statements.get(m.sql);
    if (stmt === undefined) {
      stmt = db.prepare(m.sql);
      if (statements.size < 200) statements.set(m.sql, stmt);
    }
    // In chunks: the thread holds one chunk of rows at a time, and the node's thread takes each
    // in a turn of its own (100,000 rows in one message grew the process ~400 MB and held its
    // event loop while they were copied in).
    let rows: unknown[] = [];
    for (const row of stmt.iterate(...m.params)) {
      rows.push(row);
      if (rows.length === CHUNK) {
        parentPort!.postMessage({ id: m.id, rows, more: true });
        rows = [];
      }
    }
    parentPort!.postMessage({ id: m.id, rows });
  } catch (err) {
    // A statement its iteration abandoned fails its next run (with no message): prepared anew.
    statements.delete(m.sql);
    const e = err as Error & { errcode?: number };
    parentPort!.postMessage({
      id: m.id,
      error: { message: e.message, errcode: e.errcode ?? null, timeout: spent },
    });
  } finally {
    deadline = Number.POSITIVE_INFINITY;
  }
});
