import type { TaskContext } from '../cron/index.ts';
import type { RoutingService } from '../routing/index.ts';

/**
 * `stats.flush`: the routing counters counted in memory on the hot path are written with the clicks
 * that made them, by the click log (its timer, or a `clicks.flush` task; docs/routing.md#counting);
 * this reads every node's daily cap counts back, which is what a node learns the others' capped
 * clicks by. Writing the click log here would override `clicks.flush_interval_ms` and a
 * `clicks.flush` task's schedule with this task's.
 */
export function statsFlush(
  routing: Pick<RoutingService, 'refreshCaps'>,
): (ctx: TaskContext) => Promise<void> {
  return async () => {
    await routing.refreshCaps();
  };
}
