import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPostgres, openSqlite, type Storage } from '../../src/storage/index.ts';
import { type Clock, systemClock } from '../../src/time/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';

/** One backend under test: how to open a fresh, migrated store and how to clean it up. */
export interface BackendCase {
  name: 'sqlite' | 'postgres';
  /** Resolves false when the backend cannot run here (PostgreSQL outside CI). */
  available(): Promise<boolean>;
  open(clock?: Clock): Promise<{ storage: Storage; cleanup(): Promise<void>; reopen(): Storage }>;
  /** A whole node on this backend (its own SQLite file, or its own PostgreSQL schema). */
  startNode(opts?: Parameters<typeof startTestNode>[0]): Promise<TestNode>;
}

export const BACKENDS: BackendCase[] = [
  {
    name: 'sqlite',
    available: async () => true,
    open: async (clock = systemClock) => {
      const dir = mkdtempSync(join(tmpdir(), 'sluice-store-'));
      const path = join(dir, 'store.db');
      const storage = openSqlite(path, clock);
      await storage.migrate();
      return {
        storage,
        reopen: () => openSqlite(path, clock),
        cleanup: async () => {
          await storage.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    startNode: (opts = {}) => startTestNode(opts),
  },
  {
    name: 'postgres',
    available: pgAvailable,
    open: async (clock = systemClock) => {
      const schema = testSchema();
      const make = () => openPostgres({ url: PG_URL, poolMax: 5, schema, clock });
      const storage = make();
      await storage.migrate();
      return {
        storage,
        reopen: make,
        cleanup: async () => {
          await storage.close();
          await dropSchema(schema);
        },
      };
    },
    startNode: (opts = {}) => startTestNode({ postgres: {}, ...opts }),
  },
];
