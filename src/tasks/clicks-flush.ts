import type { ClickLog } from '../clicks/index.ts';
import { type CronTaskConfig, ownTimerMs } from '../config/index.ts';
import type { TaskContext } from '../cron/index.ts';

/**
 * `clicks.flush` (docs/cron.md, optional): writes the click log's buffer as a task, so its runs, failures and
 * durations show in the `tasks` section and the console like any task. A node with an enabled
 * `clicks.flush` task turns the click log's own timer (`clicks.flush_interval_ms`) off: the task's
 * schedule is then how late a click may be written. A run that the database refuses fails (its
 * batches stay for the next run), so a refusing database shows as a failing task.
 */
export function clicksFlush(log: Pick<ClickLog, 'persist'>): (ctx: TaskContext) => Promise<void> {
  return async ({ log: out }) => {
    const rows = await log.persist();
    if (rows > 0) out.debug({ rows }, 'clicks persisted');
  };
}

/**
 * How long a postback on another node waits for its click when a `clicks.flush` task writes the
 * click log: the task's schedule, not a timer, then says how late a click may be written, and a
 * schedule's gaps cannot be known for sure from its next runs ("every second, but only at 00:xx"),
 * so the wait is this bound. The wait ends as soon as the click is found.
 */
export const CLICK_WAIT_WITH_TASK_MS = 30_000;

/**
 * How the click log is written on this node: by its own timer every `clicks.flush_interval_ms`,
 * or, when an enabled `clicks.flush` task has taken that over, by the task (`timerMs` 0). `waitMs`
 * is how long a postback that reaches another node waits for its click, a second more than a
 * click may take to be written.
 */
export function clickWrites(
  tasks: Readonly<Record<string, CronTaskConfig>>,
  flushIntervalMs: number,
): { timerMs: number; waitMs: number } {
  const timerMs = ownTimerMs(tasks, 'clicks.flush', flushIntervalMs);
  return { timerMs, waitMs: (timerMs === 0 ? CLICK_WAIT_WITH_TASK_MS : timerMs) + 1000 };
}
