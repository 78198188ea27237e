import type { CronTaskConfig } from '../config/index.ts';
import type { TaskContext } from '../cron/index.ts';
import type { HttpClient } from '../http-client/index.ts';
import { targetWithoutClick } from '../routing/index.ts';
import type { StreamStore, StreamTarget } from '../storage/index.ts';
import { type Clock, TimeSlice } from '../time/index.ts';

export interface TargetsCheckDeps {
  streams: Pick<StreamStore, 'activeTargets' | 'setTargetStatus' | 'get'>;
  httpClient: HttpClient;
  clock: Clock;
}

const CHECK_PARALLELISM = 4;
/** Active streams read per query: a page is one index range scan, a few ms at most. */
const CHECK_PAGE = 500;

/**
 * `targets.check`: requests each active stream's target (HEAD, or GET where HEAD is refused) and
 * records reachability. The streams are read a page at a time in id order, each page an index
 * range scan that starts where the last one ended (no count, no sort of the table; its flow's slug
 * comes in the same query), and read only when the checks run low, so memory holds one page
 * whatever the number of streams; between pages the event loop gets a turn, so the run's timeout
 * can fire even when every check fails at once. The writes are fenced by the run's epoch.
 */
export function targetsCheck(
  name: string,
  cfg: CronTaskConfig,
  deps: TargetsCheckDeps,
): (ctx: TaskContext) => Promise<void> {
  return (ctx) => checkTargets(name, cfg, deps, ctx);
}

async function checkTargets(
  name: string,
  cfg: CronTaskConfig,
  deps: TargetsCheckDeps,
  ctx: TaskContext,
): Promise<void> {
  // A quarter of the run's budget at most (a HEAD and its GET fallback stay within half of it), so a
  // target that hangs is recorded unreachable before the run itself times out: with one call as
  // long as the run, the run's abort came first and a hanging target was never marked.
  const perRequestMs = Math.max(1, Math.min(10_000, Math.floor(cfg.timeout_ms / 4)));
  const slice = new TimeSlice();
  let page: StreamTarget[] = [];
  let taken = 0;
  let after: string | undefined;
  let done = false;
  let reading: Promise<void> | undefined;
  let checked = 0;
  let unreachable = 0;

  /** The next stream to check, reading the next page when this one is used up (one read at a time). */
  const next = async (): Promise<StreamTarget | undefined> => {
    for (;;) {
      if (ctx.signal.aborted) return undefined;
      if (taken < page.length) return page[taken++];
      if (done) return undefined;
      reading ??= (async () => {
        await slice.pause();
        const rows = await deps.streams.activeTargets(after, CHECK_PAGE);
        page = rows;
        taken = 0;
        after = rows.at(-1)?.id ?? after;
        if (rows.length < CHECK_PAGE) done = true;
      })().finally(() => {
        reading = undefined;
      });
      await reading;
    }
  };

  const worker = async () => {
    for (let s = await next(); s !== undefined; s = await next()) {
      const url = targetWithoutClick(s.target_url, {
        flow: s.flow_slug,
        stream: s.id,
        request_id: ctx.runId,
      });
      let error: string | null = null;
      try {
        const call = {
          url,
          timeoutMs: perRequestMs,
          totalTimeoutMs: perRequestMs,
          client: `targets:${name}`,
          signal: ctx.signal,
        };
        let res = await deps.httpClient.request({ ...call, method: 'HEAD' });
        if (res.status === 405 || res.status === 501)
          res = await deps.httpClient.request({ ...call, method: 'GET' });
        if (res.status >= 400) error = `HTTP ${res.status}`;
      } catch (err) {
        error = (err as Error).message;
      }
      if (ctx.signal.aborted) return;
      checked++;
      if (error !== null) unreachable++;
      const written = await deps.streams.setTargetStatus(
        s.id,
        s.target_url,
        error === null ? 'ok' : 'unreachable',
        error,
        new Date(deps.clock.now()).toISOString(),
        ctx.fence,
      );
      // Nothing written: the stream was deleted or given another target meanwhile, or leadership
      // was lost (fenced).
      if (!written && ctx.fence && (await deps.streams.get(s.id))?.target_url === s.target_url) {
        throw new Error(`fenced: epoch ${ctx.epoch} no longer holds the lease`);
      }
      await slice.pause();
    }
  };
  await Promise.all(Array.from({ length: CHECK_PARALLELISM }, worker));
  ctx.log.info({ checked, unreachable }, 'targets checked');
}
