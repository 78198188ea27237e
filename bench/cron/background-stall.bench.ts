/**
 * How long each background task holds the event loop, at a given store size: the event-loop delay
 * (p99 and max, `monitorEventLoopDelay`, 1 ms resolution) and the longest main-thread CPU time
 * between two turns, while one run of each goes: cache reload (every flow cached), targets check
 * (against a local HTTP target, stopped by its `timeout_ms` when it would take longer), totals
 * refresh, counter flush (10 % of the streams touched) and a click log flush of a whole batch as
 * the node cuts it (`batchMaxRows`: 50,000 clicks on a SQLite node's writer thread, 10,000 on
 * PostgreSQL) into a log that already holds `--clicks` (spread over every flow, sub1 on a third
 * from 50,000 values). A real node in this process, seeded with plain SQL: `streams` streams in `streams / 5` flows, one
 * stream in 10 active.
 *
 *   node bench/cron/background-stall.bench.ts [--streams 10000,100000] [--backends sqlite,postgres]
 *        [--check-ms 15000] [--clicks 200000]
 *
 * It drives only the public API that the code before #12 had too, so the same file measures an
 * older checkout (copy it into a `git worktree` of that commit); docs/PERFORMANCE.md compares both
 * in one session, alternating.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ClickIdGenerator } from '../../src/clicks/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { loopHolds } from '../../test/helpers/loop-holds.ts';
import { startTestNode } from '../../test/helpers/node.ts';
import { PG_URL, pgAvailable } from '../../test/helpers/postgres.ts';

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '10000,100000' },
    backends: { type: 'string', default: 'sqlite,postgres' },
    'check-ms': { type: 'string', default: '15000' },
    clicks: { type: 'string', default: '200000' },
  },
});
const PER_FLOW = 5;
const ACTIVE_EVERY = 10;
const NEVER = '0 0 1 1 *';
const CLICKS = Number(values.clicks);
const SUBS = 50_000;
const DAY_S = 86_400;

let targetHits = 0;
const target = createServer((_q, r) => {
  targetHits++;
  r.end();
});
await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
const targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}/t/{stream}`;

/**
 * Runs `fn` and reports its wall time, the event-loop delay p99 and max, the longest main-thread
 * CPU time between two turns, and the same net of the garbage collector's pauses within that gap
 * (the stall test judges the net figure: a collection's length depends on the heap, not the task).
 */
async function measure(fn: () => Promise<unknown>) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let ms = 0;
  const holds = await loopHolds(
    async () => {
      const t0 = performance.now();
      await fn();
      ms = performance.now() - t0;
    },
    { tick: 'timer' },
  );
  h.disable();
  return { ms, p99: h.percentile(99) / 1e6, max: h.max / 1e6, ...holds };
}

for (const backend of values.backends.split(',')) {
  if (backend === 'postgres' && !(await pgAvailable())) continue;
  for (const streams of values.streams.split(',').map(Number)) {
    const flows = streams / PER_FLOW;
    const t = await startTestNode({
      ...(backend === 'postgres' ? { postgres: {} } : {}),
      yaml:
        `cache:\n  max_entries: ${flows}\n  ttl_ms: 3600000\nclicks:\n  flush_interval_ms: 60000\ncron:\n  tasks:\n` +
        `    stats_flush:\n      schedule: '${NEVER}'\n    cache_reload:\n      schedule: '${NEVER}'\n` +
        `    targets_check:\n      schedule: '${NEVER}'\n      timeout_ms: ${values['check-ms']}\n`,
    });
    const now = new Date().toISOString();
    if (backend === 'sqlite') {
      const db = new DatabaseSync(join(t.dir, 'sluice.db'));
      db.exec(`PRAGMA busy_timeout = 5000; BEGIN;
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${flows})
        INSERT INTO traffic_flows (id, slug, name, status, rotation, created_at, updated_at)
          SELECT printf('b-flow-%07d', i), printf('b-%07d', i), 'f', 'active', 'weight', '${now}', '${now}' FROM n;
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${streams})
        INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code, created_at, updated_at)
          SELECT printf('b-stream-%07d', i), printf('b-flow-%07d', i / ${PER_FLOW}), 's', 'regular', i % ${PER_FLOW}, 100,
                 CASE WHEN i % ${ACTIVE_EVERY} = 0 THEN 'active' ELSE 'paused' END,
                 '{"countries_include":["DE","FR"]}', '${targetUrl}', 302, '${now}', '${now}' FROM n;
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${CLICKS})
        INSERT INTO clicks (click_id, flow_id, stream_id, created_at, outcome, country, device_type, os, browser, sub1, is_unique, is_bot, cost_micros)
          SELECT printf('b-click-%09d', i), printf('b-flow-%07d', i % ${flows}), printf('b-stream-%07d', (i % ${flows}) * ${PER_FLOW}),
                 strftime('%Y-%m-%dT%H:%M:%fZ', unixepoch('now') - ${DAY_S} + i * ${DAY_S}.0 / ${Math.max(1, CLICKS)}, 'unixepoch'),
                 'redirect', 'DE', 'mobile', 'iOS', 'Safari',
                 CASE WHEN i % 3 = 0 THEN printf('campaign-%d', (i * 7919) % ${SUBS}) END, 1, 0, 0 FROM n;
        COMMIT;`);
      db.close();
    } else {
      const c = new pg.Client({
        connectionString: PG_URL,
        options: `-c search_path=${t.node.config.storage.postgres.schema}`,
      });
      await c.connect();
      await c.query(`
        INSERT INTO traffic_flows (id, slug, name, status, rotation, created_at, updated_at)
          SELECT 'b-flow-' || lpad(i::text, 7, '0'), 'b-' || lpad(i::text, 7, '0'), 'f', 'active', 'weight', '${now}', '${now}'
          FROM generate_series(0, ${flows - 1}) AS i;
        INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code, created_at, updated_at)
          SELECT 'b-stream-' || lpad(i::text, 7, '0'), 'b-flow-' || lpad((i / ${PER_FLOW})::text, 7, '0'), 's', 'regular', i % ${PER_FLOW}, 100,
                 CASE WHEN i % ${ACTIVE_EVERY} = 0 THEN 'active' ELSE 'paused' END,
                 '{"countries_include":["DE","FR"]}', '${targetUrl}', 302, '${now}', '${now}'
          FROM generate_series(0, ${streams - 1}) AS i;
        INSERT INTO clicks (click_id, flow_id, stream_id, created_at, outcome, country, device_type, os, browser, sub1, is_unique, is_bot, cost_micros)
          SELECT 'b-click-' || lpad(i::text, 9, '0'), 'b-flow-' || lpad((i % ${flows})::text, 7, '0'),
                 'b-stream-' || lpad(((i % ${flows}) * ${PER_FLOW})::text, 7, '0'),
                 now() - interval '1 day' + i * interval '${DAY_S} seconds' / ${Math.max(1, CLICKS)},
                 'redirect', 'DE', 'mobile', 'iOS', 'Safari',
                 CASE WHEN i % 3 = 0 THEN 'campaign-' || ((i::bigint * 7919) % ${SUBS}) END, true, false, 0
          FROM generate_series(0, ${CLICKS - 1}) AS i;
        ANALYZE traffic_flows; ANALYZE streams; ANALYZE clicks;`);
      await c.end();
    }
    for (let i = 0; i < flows; i += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, flows - i) }, (_, j) =>
          t.node.routing.cache.load(`b-${String(i + j).padStart(7, '0')}`),
        ),
      );
    }
    await t.node.httpClient.request({ url: targetUrl, method: 'HEAD', client: 'warm-up' });
    const rows: [string, Awaited<ReturnType<typeof measure>>, string][] = [];
    const task = async (name: string) => {
      const failures = () => t.node.scheduler.list().find((x) => x.name === name)!.runtime;
      const r = await measure(() => t.node.scheduler.runNow(name).done);
      return [r, failures().last_error ?? 'ok'] as const;
    };
    let [r, note] = await task('cache_reload');
    rows.push(['cache reload', r, `${t.node.routing.cache.section().entries} flows; ${note}`]);
    targetHits = 0;
    [r, note] = await task('targets_check');
    rows.push(['targets check', r, `${targetHits} of ${streams / ACTIVE_EVERY} checked; ${note}`]);
    r = await measure(() => t.node.routing.refreshAggregates());
    rows.push(['totals refresh', r, '']);
    const at = Date.now();
    for (let i = 0; i < streams; i += 10) {
      const id = `b-stream-${String(i).padStart(7, '0')}`;
      t.node.ledger.counters.hit(`b-flow-${String(Math.floor(i / PER_FLOW)).padStart(7, '0')}`, id, at);
    }
    [r, note] = await task('stats_flush');
    rows.push(['counter flush', r, `${streams / 10} streams; ${note}`]);
    const ids = new ClickIdGenerator(systemClock);
    // A whole batch as the click log cuts it for this store.
    for (let i = 0; i < t.node.storage.clicks.batchMaxRows; i++) {
      const flow = (i * 7) % flows;
      t.node.clickLog.append({
        click_id: ids.next(),
        flow_id: `b-flow-${String(flow).padStart(7, '0')}`,
        stream_id: `b-stream-${String(flow * PER_FLOW).padStart(7, '0')}`,
        at: at + i,
        outcome: 'redirect',
        country: 'FR',
        device_type: 'mobile',
        os: 'Android',
        browser: 'Chrome',
        language: 'fr',
        referrer_host: 'news.example.com',
        subs: i % 3 === 0 ? [`campaign-${(i * 7919) % SUBS}`] : null,
        is_unique: true,
        is_bot: false,
        cost: 0.01,
        ip_prefix: '203.0.113.0',
      });
    }
    let written = 0;
    r = await measure(async () => {
      written = await t.node.clickLog.persist();
    });
    rows.push(['click flush', r, `${written} clicks into a log of ${CLICKS}`]);
    // What an operator's console asks for: every page counts the set and sorts by a column with no index.
    let listed = 0;
    r = await measure(async () => {
      const page = await t.node.storage.streams.list({
        filter: {},
        sort: { by: 'hits', order: 'desc' },
        limit: 100,
      });
      listed = page.total;
    });
    rows.push(['streams list', r, `a page of 100 by hits of ${listed}`]);
    for (const [what, m, n] of rows) {
      console.log(
        `${backend.padEnd(8)} ${String(streams).padStart(6)} streams  ${what.padEnd(14)} ` +
          `${m.ms.toFixed(0).padStart(7)} ms  loop delay p99 ${m.p99.toFixed(1).padStart(7)} ms, max ${m.max.toFixed(1).padStart(8)} ms; ` +
          `longest CPU hold ${m.maxCpuMs.toFixed(1).padStart(8)} ms (GC in it ${m.gcInMaxMs.toFixed(1)} ms; net of GC, longest ${m.maxNetMs.toFixed(1)} ms)  (${n})`,
      );
    }
    await t.close();
  }
}
target.close();
