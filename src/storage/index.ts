import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import type { Clock } from '../time/index.ts';
import { openPostgres } from './postgres.ts';
import { openSqlite } from './sqlite.ts';
import type { Storage } from './types.ts';

export { APPLIED_BATCH_RETENTION_MS, newBatchId } from './batch-guard.ts';
export { CLICK_BATCH_MAX_ROWS, clickRecordOf, WRITER_CLICK_BATCH_MAX_ROWS } from './clicks.ts';
export {
  ClusterStore,
  type Fence,
  fenceClause,
  type LeaseState,
  type NodeRecord,
  type TaskRunRecord,
} from './cluster-store.ts';
export { MIGRATIONS, type Migration } from './migrations.ts';
export { fromMicros, fromMicrosSum, isCurrency, MAX_MONEY, MICROS, toMicros } from './money.ts';
export { decodeCursor, encodeCursor } from './paging.ts';
export { openPostgres, type PostgresOptions } from './postgres.ts';
export { isUnavailable } from './postgres-executor.ts';
export {
  REPORT_COLUMNS,
  type ReportAnswer,
  type ReportColumn,
  type ReportFilter,
  type ReportGroup,
  type ReportPage,
  type ReportSortKey,
  type ReportSpec,
  type ReportStore,
  type ReportSums,
  ROLLUP_COLUMNS,
} from './reports.ts';
export { QueryTimeout } from './sql.ts';
export { SchemaTooNew } from './sql-storage.ts';
export { openSqlite, type SqliteOptions } from './sqlite.ts';
export { migrateWhenReachable, StartAbandoned } from './start-wait.ts';
export {
  CLICK_ID_PATTERN,
  type ColumnKind,
  clickIdProblem,
  firstChars,
  ID_PATTERN,
  INT4_MAX,
  INT4_MIN,
  idProblem,
  storableProblem,
  storableText,
} from './storable.ts';
export * from './types.ts';

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
