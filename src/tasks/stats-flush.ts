import type { ClickLog } from '../clicks/index.ts';
import type { TaskContext } from '../cron/index.ts';
import type { RoutingLedger } from '../routing/index.ts';

/**
 * `stats.flush` (docs/cron.md): the routing ledger's flush ({@link RoutingLedger.flush}): the click
 * log's buffer written now, with the counts its clicks made, then every node's daily cap counts
 * read back (how a node learns the others' capped clicks). The click log's own cut (every half
 * `clicks.flush_interval_ms`) goes on beside it.
 */
export function statsFlush(
  clickLog: Pick<ClickLog, 'persist'>,
  ledger: Pick<RoutingLedger, 'flush'>,
): (ctx: TaskContext) => Promise<void> {
  return async ({ log }) => {
    const rows = await ledger.flush(clickLog);
    if (rows > 0) log.debug({ rows }, 'clicks and their counts persisted');
  };
}
