export { TaskRuntime } from './runtime.ts';
export { Schedule } from './schedule.ts';
export {
  type ExecutionScope,
  type RunJournal,
  Scheduler,
  type SchedulerOptions,
  type TaskContext,
  type TaskDefinition,
  type TaskItem,
} from './scheduler.ts';
