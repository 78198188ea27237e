import type { ClickLog } from '../clicks/index.ts';
import type { CronTaskConfig } from '../config/index.ts';
import { Schedule, type TaskContext } from '../cron/index.ts';

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

/** How long a postback on another node may be held for its click at most, whatever the schedule. */
export const CLICK_WAIT_MAX_MS = 30_000;

/**
 * How late a click may reach the database on this node: `clicks.flush_interval_ms` from the click
 * log's own timer, or, when an enabled `clicks.flush` task has taken that over, the longest gap
 * between its next runs (its schedule may be uneven). A postback that reaches another node waits
 * this long (and a second) for its click, at most {@link CLICK_WAIT_MAX_MS}.
 */
export function clickWritePeriodMs(
  tasks: Readonly<Record<string, CronTaskConfig>>,
  flushIntervalMs: number,
  now: number,
): { timerMs: number; periodMs: number } {
  const flushes = Object.values(tasks).filter((t) => t.kind === 'clicks.flush' && t.enabled);
  if (flushes.length === 0) return { timerMs: flushIntervalMs, periodMs: flushIntervalMs };
  let periodMs = 0;
  for (const t of flushes) {
    // Several flush tasks write in turn: the shortest schedule bounds the lateness.
    const runs = new Schedule(t.schedule).nextRuns(64, now);
    let gap = 0;
    for (let i = 1; i < runs.length; i++) gap = Math.max(gap, runs[i]! - runs[i - 1]!);
    periodMs = periodMs === 0 ? gap : Math.min(periodMs, gap);
  }
  return { timerMs: 0, periodMs };
}
