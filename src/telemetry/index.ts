export { currentContext, runWithContext, type WorkContext } from './context.ts';
export { ExpositionWriter, negotiateFormat } from './exposition.ts';
export { createLogger, flushLogSync, LazyRequestLogger, type Logger, unredacted } from './logger.ts';
export { QuantileSketch } from './quantile-sketch.ts';
export {
  CLIENT_ERROR,
  escapeLabelValue,
  OK,
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
  SlugMiss,
  StreamsSection,
  TasksSection,
} from './sections.ts';
export { type SystemMetrics, Telemetry, UNMATCHED_ROUTE } from './telemetry.ts';
