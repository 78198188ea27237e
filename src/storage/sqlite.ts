import { closeSync, mkdirSync, openSync } from 'node:fs';
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
import { SqliteWriter } from './sqlite-writer.ts';

const BUSY_TIMEOUT_MS = 5000;

export interface SqliteOptions {
  /**
   * Copy the write-ahead log back into the database on a thread of its own (see
   * {@link SqliteCheckpointer}; the writer thread's connection does it when there is one) rather
   * than inside the commits of this connection. For a node; short-lived commands leave it to SQLite.
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
  /**
   * Apply click and counter batches on a thread of their own with a second connection (see
   * {@link SqliteWriter}); it takes `cacheMb`, the node's connection keeps SQLite's default cache.
   * For a node; short-lived commands write on their one connection.
   */
  writeThread?: boolean;
}

/**
 * The database's folder and file are created readable by their owner alone (0700, 0600): the file
 * holds clicks, conversions, the audit log and operators' token hashes, and SQLite gives its `-wal`
 * and `-shm` files the main file's mode, so the file is made before SQLite opens it. Existing ones
 * keep the mode they have (an operator may have chosen it).
 */
const PRIVATE_DIR = 0o700;
const PRIVATE_FILE = 0o600;

function createFilePrivately(path: string): void {
  try {
    // Exclusive: an existing file is not opened at all (a read-only one stays as it is).
    closeSync(openSync(path, 'wx', PRIVATE_FILE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * Embedded storage on `node:sqlite`, WAL mode so the CLI can write (e.g. revoke an operator) while
 * a node reads. One node per file: invalidation is local, so `publish` has nobody else to tell.
 */
export function openSqlite(path: string, clock: Clock, options: SqliteOptions = {}): SqlStorage {
  const file = path !== ':memory:';
  if (file) mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR });
  // An in-memory database has no file to share with another thread.
  const writeThread = file && options.writeThread === true;
  let db: DatabaseSync;
  try {
    if (file) createFilePrivately(path);
    db = new DatabaseSync(path);
    // With a writer thread the node's connection waits for it on a timer (SqliteExecutor), never
    // in SQLite's busy handler, which sleeps on the event loop.
    const busy = writeThread ? 0 : BUSY_TIMEOUT_MS;
    db.exec(`PRAGMA journal_mode = WAL; PRAGMA busy_timeout = ${busy}; PRAGMA foreign_keys = ON;`);
    if (options.cacheMb !== undefined && !writeThread) {
      db.exec(`PRAGMA cache_size = ${-Math.floor(options.cacheMb) * 1024}`);
    }
  } catch (err) {
    throw new ApiError('db.unavailable', `cannot open SQLite database at ${path}`, { cause: err });
  }
  const checkpointThread = file && options.checkpointThread === true;
  if (checkpointThread) db.exec(`PRAGMA wal_autocheckpoint = ${WAL_PAGES_BEFORE_INLINE_CHECKPOINT}`);
  const checkpointIntervalMs = options.checkpointIntervalMs ?? CHECKPOINT_INTERVAL_MS;
  const stats = new QueryStats(clock);
  // Reports' scans read on their own thread.
  const reader = file ? new SqliteReader(path, stats) : undefined;
  const writer = writeThread
    ? new SqliteWriter({
        path,
        stats,
        busyTimeoutMs: BUSY_TIMEOUT_MS,
        ...(options.cacheMb !== undefined ? { cacheMb: options.cacheMb } : {}),
        // The writer checkpoints too: one thread rather than two.
        ...(checkpointThread
          ? { walAutocheckpoint: WAL_PAGES_BEFORE_INLINE_CHECKPOINT, checkpointIntervalMs }
          : {}),
      })
    : undefined;
  const checkpointer =
    checkpointThread && writer === undefined ? new SqliteCheckpointer(path, checkpointIntervalMs) : undefined;
  writer?.start();
  return new SqlStorage(
    {
      driver: 'sqlite',
      exec: new SqliteExecutor(db, stats, { busyWaitMs: BUSY_TIMEOUT_MS }),
      stats,
      pool: () => ({ size: 1, idle: 1, waiting: 0 }),
      migrationPreamble: [],
      // The node that wrote has already dropped the flow from its own cache.
      publish: async () => {},
      subscribe: () => {},
      isOpen: () => db.isOpen,
      close: async () => {
        // The writer first: its last batches (a graceful stop's flush) commit before the rest stops.
        await writer?.close();
        await Promise.all([reader?.close(), checkpointer?.close()]);
        if (db.isOpen) db.close();
      },
      ...(reader ? { reader } : {}),
      ...(writer ? { writer } : {}),
      ...(checkpointer ? { checkpoints: () => checkpointer.stats() } : {}),
      ...(writer && checkpointThread ? { checkpoints: () => writer.checkpoints() } : {}),
    },
    clock,
  );
}
