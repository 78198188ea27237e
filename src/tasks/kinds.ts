import type { ClickLog } from '../clicks/index.ts';
import type { Config, CronTaskConfig } from '../config/index.ts';
import { Schedule, type Scheduler, type TaskContext } from '../cron/index.ts';
import type { HttpClient } from '../http-client/index.ts';
import type { RoutingLedger, RoutingService } from '../routing/index.ts';
import type { Storage } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import { cacheReload } from './cache-reload.ts';
import { clicksFlush } from './clicks-flush.ts';
import { clicksRetention } from './clicks-retention.ts';
import { httpProbe } from './http-probe.ts';
import { reportsRetention } from './reports-retention.ts';
import { statsFlush } from './stats-flush.ts';
import { targetsCheck } from './targets-check.ts';

/** What the application's task kinds drive; main.ts hands it over once. */
export interface KindDeps {
  routing: Pick<RoutingService, 'cache'>;
  ledger: Pick<RoutingLedger, 'flush'>;
  storage: Storage;
  httpClient: HttpClient;
  clock: Clock;
  /** `clicks.retention_days`. */
  clickRetentionDays: number;
  /** `reports.retention_days`. */
  reportRetentionDays: number;
  clickLog: Pick<ClickLog, 'persist'>;
}

export type TaskKind = CronTaskConfig['kind'];

/** The run function of a configured task: its kind, given only what that kind drives. */
export function taskRunner(
  name: string,
  cfg: CronTaskConfig,
  deps: KindDeps,
): (ctx: TaskContext) => Promise<void> {
  switch (cfg.kind) {
    case 'stats.flush':
      return statsFlush(deps.clickLog, deps.ledger);
    case 'cache.reload':
      return cacheReload(deps.routing);
    case 'targets.check':
      return targetsCheck(name, cfg, {
        streams: deps.storage.streams,
        httpClient: deps.httpClient,
        clock: deps.clock,
      });
    case 'http.probe':
      return httpProbe(name, cfg, deps.httpClient);
    case 'clicks.retention':
      return clicksRetention({
        clicks: deps.storage.clicks,
        clock: deps.clock,
        retentionDays: deps.clickRetentionDays,
      });
    case 'clicks.flush':
      return clicksFlush(deps.clickLog);
    case 'reports.retention':
      return reportsRetention({
        reports: deps.storage.reports,
        clock: deps.clock,
        retentionDays: deps.reportRetentionDays,
      });
  }
}

/**
 * Adds every configured task (`cron.tasks`) to the scheduler, each run by its kind with only what
 * that kind drives (docs/cron.md).
 */
export function scheduleTasks(
  scheduler: Pick<Scheduler, 'add'>,
  config: Config,
  deps: Omit<KindDeps, 'clickRetentionDays' | 'reportRetentionDays'>,
): void {
  const kindDeps: KindDeps = {
    ...deps,
    clickRetentionDays: config.clicks.retention_days,
    reportRetentionDays: config.reports.retention_days,
  };
  for (const [name, task] of Object.entries(config.cron.tasks)) {
    scheduler.add({
      name,
      kind: task.kind,
      schedule: new Schedule(task.schedule),
      // The loader gave every task its kind's scope; a probe must have said its own.
      scope: task.execution_scope!,
      enabled: task.enabled,
      timeoutMs: task.timeout_ms,
      run: taskRunner(name, task, kindDeps),
    });
  }
}
