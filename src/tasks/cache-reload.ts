import type { TaskContext } from '../cron/index.ts';
import type { RoutingService } from '../routing/index.ts';

/** `cache.reload`: re-reads every cached flow from storage (docs/routing.md#cache), a chunk at a time. */
export function cacheReload(routing: Pick<RoutingService, 'cache'>): (ctx: TaskContext) => Promise<void> {
  return async ({ signal, log }) => {
    const flows = await routing.cache.reloadAll(signal);
    log.debug({ flows }, 'routing cache reloaded');
  };
}
