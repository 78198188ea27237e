import type { CronTaskConfig } from '../config/index.ts';
import type { HttpClient } from '../http-client/index.ts';
import type { RoutingService } from '../routing/index.ts';
import type { Storage, StreamRecord } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import type { ExecutionScope, TaskContext } from './scheduler.ts';

export interface KindDeps {
  routing: RoutingService;
  storage: Storage;
  httpClient: HttpClient;
  clock: Clock;
}

/** Default scope of each kind (§10); `http.probe` has none: its config must say. */
export const DEFAULT_SCOPE: Record<CronTaskConfig['kind'], ExecutionScope | undefined> = {
  'stats.flush': 'all',
  'cache.reload': 'all',
  'targets.check': 'leader',
  'http.probe': undefined,
};

/** The run function of a configured task. */
export function taskRunner(
  name: string,
  cfg: CronTaskConfig,
  deps: KindDeps,
): (ctx: TaskContext) => Promise<void> {
  switch (cfg.kind) {
    case 'stats.flush':
      return async ({ log }) => {
        const rows = await deps.routing.persistCounters();
        if (rows > 0) log.debug({ rows }, 'counters persisted');
      };
    case 'cache.reload':
      return async ({ signal, log }) => {
        const flows = await deps.routing.cache.reloadAll(signal);
        log.debug({ flows }, 'routing cache reloaded');
      };
    case 'targets.check':
      return (ctx) => checkTargets(name, cfg, deps, ctx);
    case 'http.probe':
      return (ctx) => probe(name, cfg, deps, ctx);
  }
}

async function probe(
  name: string,
  cfg: CronTaskConfig,
  deps: KindDeps,
  { signal }: TaskContext,
): Promise<void> {
  const expected = cfg.expect_status ?? 200;
  const res = await deps.httpClient.request({
    url: cfg.url!,
    method: cfg.method ?? 'GET',
    headers: cfg.headers ?? {},
    secretHeaders: Object.keys(cfg.headers ?? {}),
    retries: cfg.retries ?? 0,
    timeoutMs: cfg.timeout_ms,
    totalTimeoutMs: cfg.timeout_ms,
    client: `probe:${name}`,
    signal,
  });
  if (res.status !== expected) throw new Error(`expected HTTP ${expected}, got ${res.status}`);
}

const CHECK_PARALLELISM = 4;

/** Requests each active stream's target (HEAD, or GET where HEAD is refused) and records reachability. */
async function checkTargets(
  name: string,
  cfg: CronTaskConfig,
  deps: KindDeps,
  ctx: TaskContext,
): Promise<void> {
  const streams: StreamRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await deps.storage.streams.list({
      filter: { status: 'active' },
      sort: { by: 'created_at', order: 'asc' },
      limit: 500,
      cursor,
    });
    streams.push(...page.items);
    cursor = page.next_cursor ?? undefined;
  } while (cursor && !ctx.signal.aborted);

  const slugs = new Map<string, string>();
  const slugOf = async (flowId: string) => {
    let slug = slugs.get(flowId);
    if (slug === undefined) {
      slug = (await deps.storage.flows.get(flowId))?.slug ?? '';
      slugs.set(flowId, slug);
    }
    return slug;
  };
  const perRequestMs = Math.min(10_000, cfg.timeout_ms);
  let unreachable = 0;
  const queue = [...streams];
  const worker = async () => {
    for (let s = queue.shift(); s !== undefined && !ctx.signal.aborted; s = queue.shift()) {
      const url = s.target_url
        .replaceAll('{country}', '')
        .replaceAll('{flow}', encodeURIComponent(await slugOf(s.flow_id)))
        .replaceAll('{stream}', encodeURIComponent(s.id))
        .replaceAll('{request_id}', encodeURIComponent(ctx.runId));
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
      if (error !== null) unreachable++;
      const written = await deps.storage.streams.setTargetStatus(
        s.id,
        error === null ? 'ok' : 'unreachable',
        error,
        new Date(deps.clock.now()).toISOString(),
        ctx.fence,
      );
      // Nothing written: either the stream was deleted meanwhile, or leadership was lost (fenced).
      if (!written && ctx.fence && (await deps.storage.streams.get(s.id))) {
        throw new Error(`fenced: epoch ${ctx.epoch} no longer holds the lease`);
      }
    }
  };
  await Promise.all(Array.from({ length: CHECK_PARALLELISM }, worker));
  ctx.log.info({ checked: streams.length, unreachable }, 'targets checked');
}
