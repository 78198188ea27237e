import pg from 'pg';
import type { Logger } from 'pino';
import type { Clock } from '../time/index.ts';
import { PostgresExecutor } from './postgres-executor.ts';
import { QueryStats } from './query-stats.ts';
import { SqlStorage } from './sql-storage.ts';
import type { InvalidationListener } from './types.ts';

export interface PostgresOptions {
  url: string;
  poolMax: number;
  /** Schema for every table (search_path); created on migrate. */
  schema: string;
  /** A statement unanswered this long fails (client side): a partition sends no reset. */
  queryTimeoutMs?: number;
  clock: Clock;
  logger?: Logger | undefined;
}

/** Key of the advisory lock that serialises migrations across nodes starting together. */
const MIGRATION_LOCK = 0x51c3_0001;
const RECONNECT_MS = 1000;

/**
 * Shared storage on PostgreSQL through a `pg` pool. Routing changes are announced with
 * NOTIFY on a per-schema channel and picked up by every node's LISTEN connection, so caches
 * elsewhere drop a changed flow at once rather than when its TTL runs out.
 */
export function openPostgres(opts: PostgresOptions): SqlStorage {
  const searchPath = `-c search_path=${opts.schema}`;
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.poolMax,
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    options: searchPath,
    query_timeout: opts.queryTimeoutMs ?? 30_000,
    // A peer that vanished without a reset is noticed by the kernel, not after hours.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // An idle client losing its server emits here; without a listener the process would crash.
  pool.on('error', (err) => opts.logger?.warn({ err: err.message }, 'postgres pool client error'));
  const stats = new QueryStats(opts.clock);
  const exec = new PostgresExecutor(pool, stats);
  const channel = `sluice_routing_${opts.schema}`;
  const listeners: InvalidationListener[] = [];
  let listener: pg.Client | undefined;
  /**
   * Whether notices may have been missed since the last LISTEN that went through: a connection
   * lost, or a first LISTEN that failed while the pool may already have filled caches.
   */
  let missed = false;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const listen = async () => {
    if (closed || listener) return;
    const client = new pg.Client({
      connectionString: opts.url,
      connectionTimeoutMillis: 3000,
      options: searchPath,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    listener = client;
    const reconnect = () => {
      if (listener !== client) return;
      listener = undefined;
      missed = true;
      client.end().catch(() => {});
      if (!closed) {
        retry = setTimeout(() => void listen(), RECONNECT_MS);
        retry.unref();
      }
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    client.on('notification', (msg) => {
      if (msg.channel === channel && msg.payload) for (const l of listeners) l(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      opts.logger?.warn({ err: (err as Error).message }, 'postgres LISTEN connection failed; retrying');
      reconnect();
      return;
    }
    if (missed && listener === client) {
      missed = false;
      opts.logger?.info(
        'postgres LISTEN connection back; every cached flow is reloaded (notices may have been missed)',
      );
      for (const l of listeners) l(undefined);
    }
  };

  return new SqlStorage(
    {
      driver: 'postgres',
      exec,
      stats,
      pool: () => ({ size: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
      migrationPreamble: [
        `SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`,
        `CREATE SCHEMA IF NOT EXISTS ${opts.schema}`,
      ],
      publish: async (slug) => {
        await exec.all('SELECT pg_notify(?, ?)', [channel, slug]);
      },
      subscribe: (l) => {
        listeners.push(l);
        void listen();
      },
      isOpen: () => !closed,
      close: async () => {
        closed = true;
        if (retry) clearTimeout(retry);
        const l = listener;
        listener = undefined;
        await l?.end().catch(() => {});
        await pool.end();
      },
    },
    opts.clock,
  );
}
