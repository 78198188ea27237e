import type { ClickLog } from '../clicks/index.ts';
import type { TaskContext } from '../cron/index.ts';

/**
 * `clicks.flush` (§11, optional): writes the click log's buffer as a task, so its runs, failures and
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
