export { APPLIED_BATCH_RETENTION_MS, newBatchId } from './batch-guard.ts';
export { CLICK_BATCH_MAX_ROWS, clickRecordOf, WRITER_CLICK_BATCH_MAX_ROWS } from './clicks.ts';
export { ClusterStore, type Fence } from './cluster-store.ts';
export { fromMicros, fromMicrosSum, isCurrency, MICROS, toMicros } from './money.ts';
export { openStorage } from './open.ts';
export { openPostgres } from './postgres.ts';
export {
  REPORT_COLUMNS,
  REPORT_METRICS,
  type ReportColumn,
  type ReportPage,
  type ReportSortKey,
  type ReportSpec,
  type ReportStore,
  type ReportSums,
  ROLLUP_COLUMNS,
} from './report-store.ts';
export { QueryTimeout } from './sql.ts';
export { SchemaTooNew } from './sql-storage.ts';
export { openSqlite } from './sqlite.ts';
export { migrateWhenReachable, StartAbandoned } from './start-wait.ts';
export { CLICK_ID_PATTERN, firstChars, ID_PATTERN, INT4_MAX } from './storable.ts';
export { SUB_ID_MAX_LENGTH } from './sub-ids.ts';
export {
  type Aggregates,
  type AuditEntry,
  type AuditRecord,
  type AuditStore,
  type BotAction,
  CLICK_OUTCOMES,
  type ClickBatch,
  type ClickFilter,
  type ClickOutcome,
  type ClickRecord,
  type ClickStore,
  CONVERSION_STATUSES,
  type ConversionRecord,
  type ConversionStatus,
  type ConversionStore,
  type ConversionSums,
  type CounterBatch,
  type CountRows,
  DEVICE_TYPES,
  type DeviceType,
  FLOW_SORT_KEYS,
  type FlowInput,
  type FlowRecord,
  type InvalidationListener,
  LOG_TOTAL_CAP,
  type NewClick,
  NO_CONVERSIONS,
  type OperatorRecord,
  type OperatorStore,
  type Page,
  type RedirectMode,
  type Sighting,
  type SightingStore,
  STREAM_SORT_KEYS,
  type Storage,
  type StreamInput,
  type StreamRecord,
  type StreamStore,
  type StreamTarget,
  type TargetingRule,
} from './types.ts';
