import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ApiError } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import { QueryStats } from './query-stats.ts';
import { SqlStorage } from './sql-storage.ts';
import { SqliteExecutor } from './sqlite-executor.ts';
import { SqliteReader } from './sqlite-reader.ts';

const BUSY_TIMEOUT_MS = 5000;

/**
 * Embedded storage on `node:sqlite`, WAL mode so the CLI can write (e.g. revoke an operator) while
 * a node reads. One node per file: invalidation is local, so `publish` has nobody else to tell.
 */
export function openSqlite(path: string, clock: Clock): SqlStorage {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path);
    db.exec(`PRAGMA journal_mode = WAL; PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}; PRAGMA foreign_keys = ON;`);
  } catch (err) {
    throw new ApiError('db.unavailable', `cannot open SQLite database at ${path}`, { cause: err });
  }
  const stats = new QueryStats(clock);
  // Reports' scans read on their own thread; an in-memory database has no file to share.
  const reader = path === ':memory:' ? undefined : new SqliteReader(path, stats);
  return new SqlStorage(
    {
      driver: 'sqlite',
      exec: new SqliteExecutor(db, stats),
      stats,
      pool: () => ({ size: 1, idle: 1, waiting: 0 }),
      migrationPreamble: [],
      // The node that wrote has already dropped the flow from its own cache.
      publish: async () => {},
      subscribe: () => {},
      isOpen: () => db.isOpen,
      close: async () => {
        await reader?.close();
        if (db.isOpen) db.close();
      },
      ...(reader ? { reader } : {}),
    },
    clock,
  );
}
