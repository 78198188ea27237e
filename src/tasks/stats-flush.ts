import type { ClickLog } from '../clicks/index.ts';
import type { TaskContext } from '../cron/index.ts';
import type { RoutingService } from '../routing/index.ts';

/**
 * `stats.flush`: persists the routing counters counted in memory on the hot path (docs/cron.md). They are
 * written with the clicks they counted, so this writes the click log (as its own timer or a
 * `clicks.flush` task also do), then reads every node's daily cap counts back.
 */
export function statsFlush(
  routing: Pick<RoutingService, 'refreshCaps'>,
  clickLog: Pick<ClickLog, 'persist'>,
): (ctx: TaskContext) => Promise<void> {
  return async ({ log }) => {
    const clicks = await clickLog.persist();
    if (clicks > 0) log.debug({ clicks }, 'clicks and their counts persisted');
    await routing.refreshCaps();
  };
}
