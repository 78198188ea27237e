export { currentContext, runWithContext, type WorkContext } from './context.ts';
export {
  CONTENT_TYPES,
  type ExpositionFormat,
  ExpositionWriter,
  formatNumber,
  negotiateFormat,
  type Sample,
} from './exposition.ts';
export { type HostSection, HostStats } from './host-stats.ts';
export {
  createLogger,
  flushLogSync,
  LazyRequestLogger,
  type Logger,
  type LoggerOptions,
  REDACT_PATHS,
  unredacted,
} from './logger.ts';
export { DEFAULT_RELATIVE_ACCURACY, QuantileSketch } from './quantile-sketch.ts';
export {
  CLIENT_ERROR,
  escapeLabelValue,
  OK,
  type Outcome,
  outcomeOf,
  type RecentEntry,
  RecentWindow,
  Recorder,
  type RecorderEntry,
  RecorderGroup,
  SERVER_ERROR,
} from './recorder.ts';
export type {
  CacheSection,
  ClicksSection,
  DbSection,
  FlowsSection,
  Partially,
  PostbacksSection,
  SectionName,
  Sections,
  SlugMiss,
  StreamsSection,
  TaskSectionEntry,
  TasksSection,
} from './sections.ts';
export {
  type FamilyWriter,
  type HttpSection,
  type SystemMetrics,
  Telemetry,
  type TelemetryOptions,
  UNMATCHED_ROUTE,
} from './telemetry.ts';
