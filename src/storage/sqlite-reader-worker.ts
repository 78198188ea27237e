/**
 * The worker side of {@link SqliteReader}: one read-only connection to the node's SQLite file,
 * answering `{id, sql, params, budgetMs?}` with `{id, rows}` or `{id, error}`. Statements are
 * prepared once.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const db = new DatabaseSync(workerData.path as string, { readOnly: true });
db.exec('PRAGMA busy_timeout = 5000');
const statements = new Map<string, StatementSync>();

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
    parentPort!.postMessage({ id: m.id, rows: stmt.all(...m.params) });
  } catch (err) {
    const e = err as Error & { errcode?: number };
    parentPort!.postMessage({
      id: m.id,
      error: { message: e.message, errcode: e.errcode ?? null, timeout: spent },
    });
  } finally {
    deadline = Number.POSITIVE_INFINITY;
  }
});
