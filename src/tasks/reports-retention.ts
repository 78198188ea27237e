import type { TaskContext } from '../cron/index.ts';
import type { ReportStore } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';

const DAY_MS = 86_400_000;

export interface ReportsRetentionDeps {
  reports: Pick<ReportStore, 'deleteRollupsBefore'>;
  clock: Clock;
  /** `reports.retention_days`. */
  retentionDays: number;
}

/**
 * `reports.retention` (task `reports_retention`, docs/reports.md#bounds): deletes the hourly
 * rollups of hours more than `reports.retention_days` before the run started, an hour at a time,
 * stopping when the run's signal fires; the next run carries on. Not fenced, for the reason
 * `clicks.retention` is not: the delete is a function of the cut-off alone.
 */
export function reportsRetention(deps: ReportsRetentionDeps): (ctx: TaskContext) => Promise<void> {
  return async ({ signal, log }) => {
    const before = new Date(deps.clock.now() - deps.retentionDays * DAY_MS).toISOString();
    const deleted = await deps.reports.deleteRollupsBefore(before, { signal });
    const fields = { deleted, before, stopped: signal.aborted };
    if (deleted > 0 || signal.aborted) log.info(fields, 'old report rollups deleted');
    else log.debug(fields, 'no report rollups to delete');
  };
}
