import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import { migrateWhenReachable, openPostgres, StartAbandoned } from '../../src/storage/index.ts';
import { createLogger } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, pgBehindProxy, testSchema } from '../helpers/postgres.ts';
import { until } from '../helpers/until.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

/** A PostgreSQL storage reached through a proxy that is down (its port refuses), and its logger. */
async function unreachable() {
  const { proxy, url } = await pgBehindProxy();
  await proxy.down();
  const schema = testSchema();
  const logs = new LogCapture();
  const logger = createLogger({ level: 'info', name: 'sluice', serverId: 'n1', destination: logs });
  const storage = openPostgres({ url, poolMax: 2, schema, queryTimeoutMs: 5000, clock: systemClock });
  const close = async () => {
    await proxy.down();
    await storage.close().catch(() => {});
    await dropSchema(schema);
  };
  return { proxy, storage, logs, logger, close };
}

const waiting = (logs: LogCapture) =>
  logs.lines.filter((l) => l.message === 'database unreachable at start; trying again');

describe('a start waiting for its PostgreSQL', { skip }, () => {
  test('no wait: the refusal is thrown at once, naming the address that refused', async () => {
    const db = await unreachable();
    try {
      await assert.rejects(
        migrateWhenReachable(db.storage, { clock: systemClock, logger: db.logger, waitMs: 0 }),
        (err: unknown) =>
          err instanceof ApiError &&
          err.code === 'db.unavailable' &&
          err.message.startsWith('the database could not be reached: ') &&
          err.message.includes(`ECONNREFUSED 127.0.0.1:${db.proxy.port}`),
      );
      assert.equal(waiting(db.logs).length, 0);
    } finally {
      await db.close();
    }
  });

  test('a database that comes up while it waits: the start goes on, each refusal logged with its cause', async () => {
    const db = await unreachable();
    try {
      const migrated = migrateWhenReachable(db.storage, {
        clock: systemClock,
        logger: db.logger,
        waitMs: 60_000,
      });
      await until('a refusal logged', () => waiting(db.logs).length >= 1, 30_000);
      assert.match(
        String(waiting(db.logs)[0]!.err),
        new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${db.proxy.port}`),
      );
      await db.proxy.up();
      await migrated;
      assert.equal(await db.storage.flows.getBySlug('nope'), undefined);
      assert.ok(db.logs.lines.some((l) => l.message === 'database reachable; starting'));
    } finally {
      await db.close();
    }
  });

  test('past the wait: the last refusal, saying how long it waited', async () => {
    const db = await unreachable();
    try {
      await assert.rejects(
        migrateWhenReachable(db.storage, { clock: systemClock, logger: db.logger, waitMs: 300 }),
        (err: unknown) =>
          err instanceof ApiError &&
          /within storage\.postgres\.start_wait_ms \(300 ms\): .*ECONNREFUSED/.test(err.message),
      );
      // One pause of the 300 ms, unless the first attempt alone outlasted them on a busy machine.
      assert.ok(waiting(db.logs).length <= 1);
    } finally {
      await db.close();
    }
  });

  test('a stop asked for while it waits: it gives up at once', async () => {
    const db = await unreachable();
    const stop = new AbortController();
    try {
      const migrated = migrateWhenReachable(db.storage, {
        clock: systemClock,
        logger: db.logger,
        waitMs: 60_000,
        signal: stop.signal,
      });
      await until('a refusal logged', () => waiting(db.logs).length >= 1, 30_000);
      stop.abort();
      await assert.rejects(
        migrated,
        (err: unknown) =>
          err instanceof StartAbandoned &&
          /^stopped while waiting for the database \(.*ECONNREFUSED/.test(err.message) &&
          !err.message.includes('retry shortly'),
      );
    } finally {
      await db.close();
    }
  });

  test('a role, password or database the server refuses is not waited for: the configuration is wrong', async () => {
    for (const [what, edit] of [
      [
        'an unknown role',
        (u: URL) => {
          u.username = 'sluice_no_such_role';
        },
      ],
      [
        'an unknown database',
        (u: URL) => {
          u.pathname = '/sluice_no_such_database';
        },
      ],
    ] as const) {
      const url = new URL(PG_URL);
      edit(url);
      const logs = new LogCapture();
      const logger = createLogger({ level: 'info', name: 'sluice', serverId: 'n1', destination: logs });
      const storage = openPostgres({
        url: url.toString(),
        poolMax: 1,
        schema: testSchema(),
        queryTimeoutMs: 5000,
        clock: systemClock,
      });
      try {
        await assert.rejects(
          migrateWhenReachable(storage, { clock: systemClock, logger, waitMs: 60_000 }),
          (err: unknown) =>
            err instanceof ApiError && /^the database refused the connection: /.test(err.message),
          what,
        );
        assert.equal(waiting(logs).length, 0, what);
      } finally {
        await storage.close().catch(() => {});
      }
    }
  });
});
