import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ApiError } from '../../src/errors/index.ts';
import { openPostgres } from '../../src/storage/index.ts';
import { PostgresExecutor } from '../../src/storage/postgres-executor.ts';
import { QueryStats } from '../../src/storage/query-stats.ts';
import { systemClock } from '../../src/time/index.ts';
import { dropSchema, PG_URL, pgAvailable, pgBehindProxy, testSchema } from '../helpers/postgres.ts';
import type { TcpProxy } from '../helpers/tcp-proxy.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('PostgreSQL executor when the connection dies', { skip }, () => {
  let proxy: TcpProxy;
  let pool: pg.Pool;
  let exec: PostgresExecutor;
  before(async () => {
    let url: string;
    ({ proxy, url } = await pgBehindProxy());
    pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 2000 });
    pool.on('error', () => {}); // idle clients: the pool's own concern, as in openPostgres
    exec = new PostgresExecutor(pool, new QueryStats(systemClock));
  });
  after(async () => {
    await pool.end();
    await proxy.down();
  });

  test('a connection lost between two statements of a transaction fails the transaction, not the process', async () => {
    const uncaught: unknown[] = [];
    let crashed!: () => void;
    const crash = new Promise<void>((r) => {
      crashed = r;
    });
    const onUncaught = (err: unknown) => {
      uncaught.push(err);
      crashed();
    };
    process.on('uncaughtException', onUncaught);
    // The transaction's client (a fresh connection of the pool), to see when it notices the loss.
    let client: pg.PoolClient | undefined;
    const onConnect = (c: pg.PoolClient) => {
      client = c;
    };
    pool.on('connect', onConnect);
    try {
      const tx = exec.transaction(async (t) => {
        await t.all('SELECT 1 AS one', []);
        // The database goes away while the transaction's client sits idle between statements, and
        // the client notices (it emits 'error', then 'end') before the next statement is sent — or,
        // with nobody listening for that 'error', the process would crash right there.
        const ended = new Promise<void>((r) => client!.once('end', () => r()));
        await proxy.down();
        await Promise.race([ended, crash]);
        await t.all('SELECT 2 AS two', []);
      });
      await assert.rejects(tx, (err: unknown) => err instanceof ApiError && err.code === 'db.unavailable');
      // The 'error' event went off before the second statement: an unhandled one would be here now.
      assert.deepEqual(uncaught, []);

      // The broken client was discarded: once the database is back, the pool works again.
      await proxy.up();
      const rows = await exec.all<{ n: number }>('SELECT 3 AS n', []);
      assert.equal(Number(rows[0]!.n), 3);
    } finally {
      pool.off('connect', onConnect);
      process.off('uncaughtException', onUncaught);
    }
  });
});

describe('PostgreSQL behind a partition (no reset ever arrives)', { skip }, () => {
  test('a statement with no answer fails with db.unavailable after query_timeout_ms', async () => {
    const { proxy, url } = await pgBehindProxy();
    const schema = testSchema();
    // Migrated under the default timeout: on a busy machine a migration's script can take longer
    // than the 400 ms this test judges, which would fail the set-up rather than the check.
    const migrator = openPostgres({ url: PG_URL, poolMax: 1, schema, clock: systemClock });
    await migrator.migrate();
    await migrator.close();
    const store = openPostgres({
      url,
      poolMax: 2,
      schema,
      queryTimeoutMs: 400,
      clock: systemClock,
    });
    try {
      assert.equal(await store.flows.getBySlug('nope'), undefined);
      proxy.freeze();
      const t0 = performance.now();
      await assert.rejects(
        store.flows.getBySlug('nope'),
        (err: unknown) => err instanceof ApiError && err.code === 'db.unavailable',
      );
      const waited = performance.now() - t0;
      assert.ok(waited >= 350 && waited < 3000, `failed after ${waited.toFixed(0)} ms`);
    } finally {
      await proxy.down();
      await store.close().catch(() => {});
      await dropSchema(schema);
    }
  });
});

describe('PostgreSQL executor when the database refuses connections', { skip }, () => {
  // A database that cannot be connected to is db.unavailable (503), whatever the reason the server
  // gives: not accepting connections, gone, or the credentials no longer good. They were 500s.
  const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const name = `sluice_refusing_${process.pid}`;
  before(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
  });
  after(async () => {
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  });

  const failureOf = async (url: URL) => {
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1, connectionTimeoutMillis: 2000 });
    pool.on('error', () => {});
    const exec = new PostgresExecutor(pool, new QueryStats(systemClock));
    try {
      for (const call of [() => exec.all('SELECT 1'), () => exec.transaction((tx) => tx.all('SELECT 1'))]) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(err instanceof ApiError, String(err));
        assert.equal(err.code, 'db.unavailable', String(err.cause));
      }
    } finally {
      await pool.end();
    }
  };

  test('not accepting connections (55000), no such database (3D000), an unknown role (28000)', async () => {
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    const refusing = new URL(PG_URL);
    refusing.pathname = `/${name}`;
    await failureOf(refusing);
    const missing = new URL(PG_URL);
    missing.pathname = `/${name}_missing`;
    await failureOf(missing);
    const stranger = new URL(PG_URL);
    stranger.username = `${name}_nobody`;
    await failureOf(stranger);
  });
});
