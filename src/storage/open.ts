import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import type { Clock } from '../time/index.ts';
import { openPostgres } from './postgres.ts';
import { openSqlite } from './sqlite.ts';
import type { Storage } from './types.ts';

/**
 * Opens the configured backend; a relative SQLite path is taken from `cwd`. `node`: storage for a
 * running node (SQLite then checkpoints on a thread of its own), not for a one-off command.
 */
export function openStorage(
  config: Config,
  clock: Clock,
  cwd = process.cwd(),
  logger?: Logger,
  { node = false }: { node?: boolean } = {},
): Storage {
  if (config.storage.driver === 'postgres') {
    return openPostgres({
      url: config.storage.postgres.url!,
      poolMax: config.storage.postgres.pool_max,
      schema: config.storage.postgres.schema,
      queryTimeoutMs: config.storage.postgres.query_timeout_ms,
      clock,
      logger,
    });
  }
  const path = config.storage.sqlite.path;
  return openSqlite(path === ':memory:' ? path : resolve(cwd, path), clock, {
    checkpointThread: node,
    writeThread: node,
    cacheMb: config.storage.sqlite.cache_mb,
  });
}
