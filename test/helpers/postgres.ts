import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TcpProxy } from './tcp-proxy.ts';

/** The PostgreSQL the tests use: `SLUICE_TEST_PG_URL`, else the local server on 127.0.0.1:5432. */
export const PG_URL = process.env.SLUICE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

let reachable: Promise<boolean> | undefined;

/**
 * Whether PostgreSQL answers. Outside CI a test that needs it is skipped with a clear message when
 * it does not; in CI (`CI` set) an unreachable server is a failure, never a silent skip.
 */
export function pgAvailable(): Promise<boolean> {
  reachable ??= (async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch (err) {
      if (process.env.CI)
        throw new Error(`PostgreSQL at ${PG_URL} is required in CI: ${(err as Error).message}`);
      process.stderr.write(
        `# PostgreSQL at ${PG_URL} unreachable (${(err as Error).message}): skipping PostgreSQL tests\n`,
      );
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  })();
  return reachable;
}

/**
 * A TCP proxy started in front of the test PostgreSQL, and the URL that goes through it: take the
 * proxy down to cut every connection as an outage would (`proxy.up()` brings it back).
 */
export async function pgBehindProxy(): Promise<{ proxy: TcpProxy; url: string }> {
  const db = new URL(PG_URL);
  const proxy = new TcpProxy(db.hostname, Number(db.port || 5432));
  await proxy.start();
  const via = new URL(PG_URL);
  via.port = String(proxy.port);
  return { proxy, url: via.toString() };
}

/** A fresh schema name for one test; drop it with {@link dropSchema}. */
export function testSchema(): string {
  return `sluice_t_${randomBytes(5).toString('hex')}`;
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * How many sessions have subscribed to a schema's routing channel (a node opens its LISTEN
 * connection in the background while it starts): a test that judges a cross-node notification
 * waits for the subscriptions first, or a NOTIFY sent before them would simply be missed.
 */
export async function routingListeners(schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const { rows } = await client.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = $1 AND state = 'idle'",
      [`LISTEN sluice_routing_${schema}`],
    );
    return rows[0].n as number;
  } finally {
    await client.end();
  }
}
