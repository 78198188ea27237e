export { CLICK_WAIT_WITH_TASK_MS, clickWrites } from './clicks-flush.ts';
export { clicksRetention } from './clicks-retention.ts';
export { scheduleTasks } from './kinds.ts';
export { reportsRetention } from './reports-retention.ts';
