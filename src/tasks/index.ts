export { CLICK_WAIT_WITH_TASK_MS, clicksFlush, clickWrites } from './clicks-flush.ts';
export { type ClicksRetentionDeps, clicksRetention } from './clicks-retention.ts';
export { type KindDeps, type TaskKind, taskRunner } from './kinds.ts';
export { type ReportsRetentionDeps, reportsRetention } from './reports-retention.ts';
