import type { CronTaskConfig } from './schema.ts';

/**
 * Who does a piece of periodic work that a cron task kind can take over (the click log's writes,
 * the daily caps' read-back): its owner's own timer, every `ownMs`, unless an enabled task of
 * `kind` is configured, which then does it on its schedule (0: the owner runs no timer). One rule,
 * so that the owners cannot disagree about it (docs/cron.md).
 */
export function ownTimerMs(
  tasks: Readonly<Record<string, CronTaskConfig>>,
  kind: CronTaskConfig['kind'],
  ownMs: number,
): number {
  return Object.values(tasks).some((t) => t.kind === kind && t.enabled) ? 0 : ownMs;
}
