/**
 * A report grouped by a sub-id of `--clicks` distinct values (visitors choose them: one value a
 * click here), as `/acp/reports/query` runs it: JSON with `limit: 1000` and CSV with
 * `limit: 100000` (what the console's CSV button asks; `reports.max_rows`, `--max-rows` [10000], cuts it), each in a
 * child process of its own so its
 * peak RSS is its own. Per run: the time, the child's peak RSS and its RSS before and after, and
 * the longest main-thread CPU time between two event-loop turns (CPU, so a loaded machine does
 * not inflate it; test/helpers/loop-holds.ts). `--old <dir>` runs the same in a checkout of older
 * code (its `src/`) beside this one, on the same database, in the same run.
 *
 *   node --expose-gc bench/reports/high-cardinality.bench.ts [--clicks 1000000] [--backends sqlite,postgres] [--max-rows 10000] [--old <dir>]
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs, promisify } from 'node:util';
import pg from 'pg';
import { loopHolds } from '../../test/helpers/loop-holds.ts';
import { PG_URL } from '../storage/bench-backends.ts';

const { values } = parseArgs({
  options: {
    clicks: { type: 'string', default: '1000000' },
    backends: { type: 'string', default: 'sqlite,postgres' },
    old: { type: 'string' },
    'max-rows': { type: 'string', default: '10000' },
    child: { type: 'string' },
  },
});
const DAY = Date.UTC(2026, 2, 10);
const NEW_SRC = resolve(import.meta.dirname, '../../src');

/** What a child runs: one report, from one checkout's code, on one database. */
interface Job {
  src: string;
  backend: 'sqlite' | 'postgres';
  where: string;
  format: 'json' | 'csv';
  limit: number;
  maxRows: number;
}

const flowInput = {
  slug: 'bench',
  name: 'bench',
  status: 'active',
  rotation: 'position',
  cost_per_click: 0.05,
} as const;

if (values.child !== undefined) await child(JSON.parse(values.child) as Job);
else await main();

async function child(job: Job): Promise<void> {
  const storageModule = await import(join(job.src, 'storage/index.ts'));
  const reportsModule = await import(join(job.src, 'reports/index.ts'));
  const clock = { now: () => DAY + 86_400_000, monotonic: () => performance.now() };
  const storage =
    job.backend === 'sqlite'
      ? storageModule.openSqlite(job.where, clock)
      : storageModule.openPostgres({ url: PG_URL, poolMax: 4, schema: job.where, clock });
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const before = process.memoryUsage().rss;
  const query = {
    from: '2026-03-10',
    to: '2026-03-11',
    group_by: ['sub1'],
    limit: job.limit,
    format: job.format,
  };
  const t0 = performance.now();
  let report: { rows: unknown[]; total_rows: number } = { rows: [], total_rows: 0 };
  let body = '';
  const holds = await loopHolds(
    async () => {
      // As the route runs it, with `reports.max_rows` (older code takes no bounds).
      report = await reportsModule.runReport(storage, query, undefined, { maxRows: job.maxRows });
      // What the route sends: the JSON text, or the CSV.
      body = job.format === 'csv' ? reportsModule.reportCsv(report, ['sub1']) : JSON.stringify(report);
    },
    { tick: 'timer' },
  );
  const ms = performance.now() - t0;
  const peak = process.resourceUsage().maxRSS * 1024;
  gc?.();
  const after = process.memoryUsage().rss;
  await storage.close();
  process.stdout.write(
    JSON.stringify({
      ms,
      peak,
      before,
      after,
      held: holds.maxCpuMs,
      heldNet: holds.maxNetMs,
      rows: report.rows.length,
      total: report.total_rows,
      bytes: body.length,
    }),
  );
}

async function main(): Promise<void> {
  const n = Number(values.clicks);
  const checkouts: [string, string][] = [['new', NEW_SRC]];
  if (values.old !== undefined) checkouts.push(['old', resolve(values.old, 'src')]);
  const { openPostgres, openSqlite } = await import('../../src/storage/index.ts');
  const { systemClock } = await import('../../src/time/index.ts');
  for (const backend of values.backends.split(',') as ('sqlite' | 'postgres')[]) {
    let where: string;
    let cleanup: () => Promise<void>;
    const t0 = performance.now();
    if (backend === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
      where = join(dir, 'bench.db');
      const storage = openSqlite(where, systemClock);
      await storage.migrate();
      const flow = await storage.flows.create(flowInput);
      await storage.close();
      const raw = new DatabaseSync(where);
      for (const sql of seedSql('sqlite', n, flow.id)) raw.exec(sql);
      raw.exec('ANALYZE');
      raw.close();
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      where = `sluice_bench_${randomBytes(4).toString('hex')}`;
      const storage = openPostgres({ url: PG_URL, poolMax: 2, schema: where, clock: systemClock });
      await storage.migrate();
      const flow = await storage.flows.create(flowInput);
      await storage.close();
      const pool = new pg.Pool({ connectionString: PG_URL, max: 1, options: `-c search_path=${where}` });
      for (const sql of seedSql('postgres', n, flow.id)) await pool.query(sql);
      await pool.query('VACUUM ANALYZE');
      cleanup = async () => {
        await pool.query(`DROP SCHEMA IF EXISTS ${where} CASCADE`);
        await pool.end();
      };
    }
    console.log(
      `${backend}: ${n.toLocaleString('en')} clicks, as many distinct sub1 values, seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    try {
      for (const [format, limit] of [
        ['json', 1000],
        ['csv', 100_000],
      ] as const)
        for (const [name, src] of checkouts) {
          const job: Job = { src, backend, where, format, limit, maxRows: Number(values['max-rows']) };
          const r = await run(job);
          const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MB`;
          console.log(
            `  ${format} limit ${limit}, ${name}: ${(r.ms / 1000).toFixed(2)} s, peak RSS ${mb(r.peak)} (${mb(r.before)} before, ${mb(r.after)} after), longest main-thread CPU between two turns ${r.held.toFixed(0)} ms (${r.heldNet.toFixed(0)} ms less GC), ${r.rows} of ${r.total} rows, ${(r.bytes / 2 ** 20).toFixed(1)} MB answered`,
          );
        }
    } finally {
      await cleanup();
    }
  }
}

async function run(job: Job) {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', import.meta.filename, '--child', JSON.stringify(job)],
    { maxBuffer: 1 << 20, timeout: 600_000 },
  );
  return JSON.parse(stdout) as {
    ms: number;
    peak: number;
    before: number;
    after: number;
    held: number;
    heldNet: number;
    rows: number;
    total: number;
    bytes: number;
  };
}

/** One click a sub1 value over one day, and a sale on one click in fifty, by the database itself. */
function seedSql(dialect: 'sqlite' | 'postgres', n: number, flowId: string): string[] {
  const rows =
    dialect === 'postgres'
      ? `generate_series(0, ${n - 1}) AS n(i)`
      : `(WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${n - 1}) SELECT i FROM n) AS n`;
  const at =
    dialect === 'postgres'
      ? `to_timestamp(${DAY / 1000} + (i * 86000.0 / ${n}))`
      : `strftime('%Y-%m-%dT%H:%M:%fZ', ${DAY / 1000} + (i * 86000.0 / ${n}), 'unixepoch')`;
  const bool = (e: string) => (dialect === 'postgres' ? `(${e})` : `CASE WHEN ${e} THEN 1 ELSE 0 END`);
  return [
    `INSERT INTO clicks (click_id, flow_id, stream_id, created_at, outcome, country, device_type, os, browser, sub1,
        is_unique, is_bot, cost_micros)
      SELECT 'c' || i, '${flowId}', NULL, ${at}, 'redirect', 'DE', 'mobile', 'Android', 'Chrome', 'visitor-' || i,
        ${bool('true')}, ${bool('false')}, 50000
      FROM ${rows}`,
    `INSERT INTO conversions (id, click_id, txid, status, payout_micros, currency, postbacks, created_at, updated_at,
        click_created_at, flow_id, stream_id, outcome, country, device_type, os, browser, sub1, is_unique, is_bot)
      SELECT 'v' || i, 'c' || i, '', 'sale', 2000000, 'USD', 1, ${at}, ${at}, ${at}, '${flowId}', NULL, 'redirect',
        'DE', 'mobile', 'Android', 'Chrome', 'visitor-' || i, ${bool('true')}, ${bool('false')}
      FROM ${rows} WHERE i % 50 = 7`,
  ];
}
