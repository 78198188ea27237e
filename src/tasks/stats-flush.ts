import type { ClickLog } from '../clicks/index.ts';
import type { TaskContext } from '../cron/index.ts';
import type { RoutingService } from '../routing/index.ts';

/**
 * `stats.flush`: persists the routing counters counted in memory on the hot path, then reads every
 * node's daily cap counts back (how a node learns the others' capped clicks). Counters travel with
 * the clicks that made them (docs/routing.md#counting), so persisting them is writing the click
 * log's buffer now: when a run ends, every click answered before it started is counted in storage.
 * The click log's own cut (every half `clicks.flush_interval_ms`) goes on beside it.
 */
export function statsFlush(
  clickLog: Pick<ClickLog, 'persist'>,
  routing: Pick<RoutingService, 'refreshCaps'>,
): (ctx: TaskContext) => Promise<void> {
  return async ({ log }) => {
    const rows = await clickLog.persist();
    if (rows > 0) log.debug({ rows }, 'clicks and their counts persisted');
    await routing.refreshCaps();
  };
}
