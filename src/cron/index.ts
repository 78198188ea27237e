export { TaskRuntime } from './runtime.ts';
export { Schedule } from './schedule.ts';
export { Scheduler, type TaskContext, type TaskItem } from './scheduler.ts';
