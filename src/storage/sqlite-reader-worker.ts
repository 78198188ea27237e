/**
 * The worker side of {@link SqliteReader}: one read-only connection to the node's SQLite file,
 * answering `{id, sql, params}` with `{id, rows}` or `{id, error}`. Statements are prepared once.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const db = new DatabaseSync(workerData.path as string, { readOnly: true });
db.exec('PRAGMA busy_timeout = 5000');
const statements = new Map<string, StatementSync>();

parentPort!.on('message', (m: { id: number; sql: string; params: SQLInputValue[] }) => {
  try {
    let stmt = statements.get(m.sql);
    if (stmt === undefined) {
      stmt = db.prepare(m.sql);
      if (statements.size < 200) statements.set(m.sql, stmt);
    }
    parentPort!.postMessage({ id: m.id, rows: stmt.all(...m.params) });
  } catch (err) {
    const e = err as Error & { errcode?: number };
    parentPort!.postMessage({ id: m.id, error: { message: e.message, errcode: e.errcode ?? null } });
  }
});
