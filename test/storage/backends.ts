import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { openPostgres, openSqlite, type Storage } from '../../src/storage/index.ts';
import { PostgresExecutor } from '../../src/storage/postgres-executor.ts';
import { QueryStats } from '../../src/storage/query-stats.ts';
import type { SqlExecutor } from '../../src/storage/sql.ts';
import { SqliteExecutor } from '../../src/storage/sqlite-executor.ts';
import { type Clock, systemClock } from '../../src/time/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';

/** One backend under test: how to open a fresh, migrated store and how to clean it up. */
export interface BackendCase {
  name: 'sqlite' | 'postgres';
  /** How its tests are titled: two cases may share a backend. */
  label: string;
  /** Resolves false when the backend cannot run here (PostgreSQL outside CI). */
  available(): Promise<boolean>;
  open(clock?: Clock): Promise<Opened>;
  /** A whole node on this backend (its own SQLite file, or its own PostgreSQL schema). */
  startNode(opts?: Parameters<typeof startTestNode>[0]): Promise<TestNode>;
}

export interface Opened {
  storage: Storage;
  cleanup(): Promise<void>;
  reopen(): Storage;
  /**
   * A connection of its own to the same database, for what the Storage interface does not offer
   * (bulk seeding, a trigger that refuses a write); opened on first use, closed by cleanup.
   */
  sql(): SqlExecutor;
}

/**
 * SQLite on a file of its own; `writeThread`: click and counter batches applied on the writer
 * thread as a node's are (`openSqlite`'s `writeThread`).
 */
function sqliteCase(writeThread: boolean): BackendCase {
  return {
    name: 'sqlite',
    label: writeThread ? 'sqlite (writer thread)' : 'sqlite',
    available: async () => true,
    open: async (clock = systemClock) => {
      const dir = mkdtempSync(join(tmpdir(), 'sluice-store-'));
      const path = join(dir, 'store.db');
      const storage = openSqlite(path, clock, { writeThread });
      await storage.migrate();
      let raw: DatabaseSync | undefined;
      let exec: SqlExecutor | undefined;
      return {
        storage,
        reopen: () => openSqlite(path, clock, { writeThread }),
        sql: () => {
          if (exec === undefined) {
            raw = new DatabaseSync(path);
            raw.exec('PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;');
            exec = new SqliteExecutor(raw, new QueryStats(clock));
          }
          return exec;
        },
        cleanup: async () => {
          await storage.close();
          raw?.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    startNode: (opts = {}) => startTestNode(opts),
  };
}

export const BACKENDS: BackendCase[] = [
  sqliteCase(false),
  {
    name: 'postgres',
    label: 'postgres',
    available: pgAvailable,
    open: async (clock = systemClock) => {
      const schema = testSchema();
      const make = () => openPostgres({ url: PG_URL, poolMax: 5, schema, clock });
      const storage = make();
      await storage.migrate();
      let pool: pg.Pool | undefined;
      let exec: SqlExecutor | undefined;
      return {
        storage,
        reopen: make,
        sql: () => {
          if (exec === undefined) {
            pool = new pg.Pool({ connectionString: PG_URL, max: 2, options: `-c search_path=${schema}` });
            exec = new PostgresExecutor(pool, new QueryStats(clock));
          }
          return exec;
        },
        cleanup: async () => {
          await storage.close();
          await pool?.end();
          await dropSchema(schema);
        },
      };
    },
    startNode: (opts = {}) => startTestNode({ postgres: {}, ...opts }),
  },
];

/** The backends, and SQLite as a node writes batches: for the stores that the writer thread runs. */
export const BATCH_BACKENDS: BackendCase[] = [...BACKENDS, sqliteCase(true)];

/** A describe block on one backend: whether it runs here, and `it`, a test skipped where it cannot. */
export interface BackendSuite {
  available: boolean;
  it(name: string, fn: () => Promise<void>): Promise<void>;
}

/** Call inside `describe`: `it` skips its test, saying why, where the backend cannot run here. */
export async function backendSuite(backend: BackendCase): Promise<BackendSuite> {
  const available = await backend.available();
  return {
    available,
    it: (name, fn) => test(name, { skip: !available && `${backend.name} unavailable` }, fn),
  };
}

/**
 * Call inside `describe`: `backendSuite` plus one fresh, migrated store for the block, opened
 * before its tests (handed to `onOpen`) and cleaned up after them; nothing where it cannot run.
 */
export async function storeSuite(
  backend: BackendCase,
  opts: { clock?: Clock; onOpen?: (opened: Opened) => void | Promise<void> } = {},
): Promise<BackendSuite> {
  const suite = await backendSuite(backend);
  let opened: Opened | undefined;
  before(async () => {
    if (!suite.available) return;
    opened = await backend.open(opts.clock);
    await opts.onOpen?.(opened);
  });
  after(async () => {
    await opened?.cleanup();
  });
  return suite;
}

/**
 * Call inside `describe`: `backendSuite` plus one node on the backend for the block, started
 * before its tests (handed to `onStart`) and closed after them; nothing where it cannot run.
 */
export async function nodeSuite(
  backend: BackendCase,
  opts: {
    node?: Parameters<BackendCase['startNode']>[0];
    onStart?: (t: TestNode) => void | Promise<void>;
  } = {},
): Promise<BackendSuite> {
  const suite = await backendSuite(backend);
  let started: TestNode | undefined;
  before(async () => {
    if (!suite.available) return;
    started = await backend.startNode(opts.node);
    await opts.onStart?.(started);
  });
  after(async () => {
    await started?.close();
  });
  return suite;
}
