export { type Report, type ReportBounds, reportCsv, reportCurrencies, runReport } from './engine.ts';
export { DIMENSIONS, type ReportQuery, ReportQueryBody } from './schema.ts';
