import type { TaskContext } from '../cron/index.ts';
import type { ClickStore } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';

const DAY_MS = 86_400_000;

export interface ClicksRetentionDeps {
  clicks: Pick<ClickStore, 'deleteOlderThan'>;
  clock: Clock;
  /** `clicks.retention_days`. */
  retentionDays: number;
  /** Rows per delete statement (storage's default when absent); tests make it small. */
  chunkRows?: number;
}

/**
 * `clicks.retention` (task `clicks_retention`, docs/clicks.md#retention): deletes the clicks
 * created more than `clicks.retention_days` before the run started, oldest first, in short chunks
 * that stop when the run's signal fires (its timeout, a step-down, a graceful stop); what went
 * stays gone, and the next run carries on. Conversions keep their copy of the click's attribution
 * and stay.
 *
 * Not fenced: the delete is idempotent and a function of the cut-off alone, so a deposed leader
 * still deleting (between chunks, until its signal fires at the step-down) removes only rows the
 * new leader would remove too. Nodes that disagree on `retention_days` are a configuration
 * mistake the fence would not cure either.
 */
export function clicksRetention(deps: ClicksRetentionDeps): (ctx: TaskContext) => Promise<void> {
  return async ({ signal, log }) => {
    const before = new Date(deps.clock.now() - deps.retentionDays * DAY_MS).toISOString();
    const deleted = await deps.clicks.deleteOlderThan(before, {
      signal,
      ...(deps.chunkRows === undefined ? {} : { chunkRows: deps.chunkRows }),
    });
    const fields = { deleted, before, stopped: signal.aborted };
    if (deleted > 0 || signal.aborted) log.info(fields, 'old clicks deleted');
    else log.debug(fields, 'no clicks to delete');
  };
}
