import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openPostgres, openSqlite, type Storage } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';

export const PG_URL = process.env.SLUICE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Runs raw SQL beside the storage under test (seeding the database itself); `?` placeholders. */
export type RawSql = (sql: string, params: unknown[]) => Promise<void>;

/**
 * Runs `run` once per backend named (`sqlite`, `postgres`): a fresh SQLite file or PostgreSQL
 * schema, the storage on it, and a raw connection for seeding; everything removed afterwards.
 */
export async function forEachBackend(
  names: readonly string[],
  run: (name: 'sqlite' | 'postgres', storage: Storage, sql: RawSql) => Promise<unknown>,
): Promise<void> {
  for (const backend of names) {
    if (backend === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
      const path = join(dir, 'bench.db');
      const storage = openSqlite(path, systemClock);
      const { DatabaseSync } = await import('node:sqlite');
      const raw = new DatabaseSync(path);
      raw.exec('PRAGMA busy_timeout = 5000');
      try {
        await run('sqlite', storage, async (sql, params) => {
          raw.prepare(sql).run(...(params as string[]));
        });
      } finally {
        raw.close();
        await storage.close();
        rmSync(dir, { recursive: true, force: true });
      }
    } else {
      const schema = `sluice_bench_${randomBytes(4).toString('hex')}`;
      const storage = openPostgres({ url: PG_URL, poolMax: 4, schema, clock: systemClock });
      const pool = new pg.Pool({ connectionString: PG_URL, max: 1, options: `-c search_path=${schema}` });
      try {
        await run('postgres', storage, async (sql, params) => {
          let i = 0;
          await pool.query(
            sql.replace(/\?/g, () => `$${++i}`),
            params,
          );
        });
      } finally {
        await storage.close();
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await pool.end();
      }
    }
  }
}
