import type { TaskContext } from '../cron/index.ts';
import type { RoutingService } from '../routing/index.ts';

/** `stats.flush`: persists the routing counters counted in memory on the hot path (§10). */
export function statsFlush(routing: RoutingService): (ctx: TaskContext) => Promise<void> {
  return async ({ log }) => {
    const rows = await routing.persistCounters();
    if (rows > 0) log.debug({ rows }, 'counters persisted');
  };
}
