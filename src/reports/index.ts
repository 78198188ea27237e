export {
  metricsOf,
  type Report,
  type ReportBounds,
  type ReportRow,
  reportCsv,
  reportCurrencies,
  runReport,
} from './engine.ts';
export {
  DIMENSION_KEYS,
  DIMENSIONS,
  type Dimension,
  METRICS,
  type Metric,
  type ReportQuery,
  ReportQueryBody,
} from './schema.ts';
