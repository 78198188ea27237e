import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ApiError } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import { QueryStats } from './query-stats.ts';
import { SqlStorage } from './sql-storage.ts';
import {
  CHECKPOINT_INTERVAL_MS,
  SqliteCheckpointer,
  WAL_PAGES_BEFORE_INLINE_CHECKPOINT,
} from './sqlite-checkpointer.ts';
import { SqliteExecutor } from './sqlite-executor.ts';
import { SqliteReader } from './sqlite-reader.ts';

const BUSY_TIMEOUT_MS = 5000;

export interface SqliteOptions {
  /**
   * Copy the write-ahead log back into the database on a thread of its own (see
   * {@link SqliteCheckpointer}) rather than inside the commits of this connection. For a node;
   * short-lived commands leave it to SQLite.
   */
  checkpointThread?: boolean;
  /** How often that thread checkpoints; {@link CHECKPOINT_INTERVAL_MS} unless a test says otherwise. */
  checkpointIntervalMs?: number;
  /**
   * `storage.sqlite.cache_mb`: this connection's page cache (SQLite's own default: 2 MB). Pages
   * fill it as they are read, so a small database never uses it all. Each click batch lands at as
   * many places in the click log's flow and sub1 indexes as it has distinct keys; at 2 million
   * clicks a page cache of 2 MB made each of those a page read (bench/storage/click-log.bench.ts).
   */
  cacheMb?: number;
}

/**
 * Embedded storage on `node:sqlite`, WAL mode so the CLI can write (e.g. revoke an operator) while
 * a node reads. One node per file: invalidation is local, so `publish` has nobody else to tell.
 */
export function openSqlite(path: string, clock: Clock, options: SqliteOptions = {}): SqlStorage {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path);
    db.exec(`PRAGMA journal_mode = WAL; PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}; PRAGMA foreign_keys = ON;`);
    if (options.cacheMb !== undefined) db.exec(`PRAGMA cache_size = ${-Math.floor(options.cacheMb) * 1024}`);
  } catch (err) {
    throw new ApiError('db.unavailable', `cannot open SQLite database at ${path}`, { cause: err });
  }
  const file = path !== ':memory:';
  let checkpointer: SqliteCheckpointer | undefined;
  if (file && options.checkpointThread === true) {
    db.exec(`PRAGMA wal_autocheckpoint = ${WAL_PAGES_BEFORE_INLINE_CHECKPOINT}`);
    checkpointer = new SqliteCheckpointer(path, options.checkpointIntervalMs ?? CHECKPOINT_INTERVAL_MS);
  }
  const stats = new QueryStats(clock);
  // Reports' scans read on their own thread; an in-memory database has no file to share.
  const reader = file ? new SqliteReader(path, stats) : undefined;
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
        await Promise.all([reader?.close(), checkpointer?.close()]);
        if (db.isOpen) db.close();
      },
      ...(reader ? { reader } : {}),
      ...(checkpointer ? { checkpoints: () => checkpointer.stats() } : {}),
    },
    clock,
  );
}
