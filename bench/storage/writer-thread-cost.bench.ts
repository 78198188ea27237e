/**
 * What a click costs a SQLite node's writer path, by thread: click batches spread as the hot-path
 * benchmark's mixed scenario spreads them (1,000 flows × 10 streams × 20 countries: about one
 * hourly rollup row a click) sent through `storage.clicks.insertBatch` to the real writer thread
 * (`SqliteWriter`), and the CPU each thread of this process used meanwhile read from /proc: the
 * main thread (copying the batch to the thread), the writer (rows, rollups, the inserts and the
 * commit) and V8's helper threads (garbage collection of both heaps). The clicks themselves are
 * made before each batch is timed. Batch sizes: what a node cuts at ~3,000, ~25,000 and its
 * 50,000-click maximum (every half second at 6,000 and 50,000 clicks a second).
 *
 *   node --max-semi-space-size=16 bench/storage/writer-thread-cost.bench.ts [--batches 10] [--existing 200000]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ClickIdGenerator } from '../../src/clicks/index.ts';
import { type NewClick, newBatchId, openSqlite } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { machine, procThreadsCpuUs } from '../http/load.ts';
import { COUNTRIES } from '../http/scenarios.ts';

const { values } = parseArgs({
  options: { batches: { type: 'string', default: '10' }, existing: { type: 'string', default: '200000' } },
});
const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-writer-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
// As a node opens its file: batches and checkpoints on the writer thread, its page cache.
const storage = openSqlite(join(dir, 'b.db'), systemClock, {
  writeThread: true,
  checkpointThread: true,
  cacheMb: 64,
});
await storage.migrate();

const ids = new ClickIdGenerator(systemClock);
const FLOWS = Array.from({ length: 1000 }, () => randomUUID());
const STREAMS = FLOWS.map(() => Array.from({ length: 10 }, () => randomUUID()));
const any = <T>(xs: readonly T[]) => xs[Math.floor(Math.random() * xs.length)]!;
function click(): NewClick {
  const f = Math.floor(Math.random() * FLOWS.length);
  return {
    click_id: ids.next(),
    flow_id: FLOWS[f]!,
    stream_id: any(STREAMS[f]!),
    at: Date.now(),
    outcome: 'redirect',
    country: any(COUNTRIES),
    device_type: 'desktop',
    os: 'Windows',
    browser: 'Chrome',
    language: 'en',
    referrer_host: null,
    subs: null,
    is_unique: Math.random() < 0.8,
    is_bot: false,
    cost: 0,
    ip_prefix: '127.0.0.0/24',
  };
}

const write = (n: number) =>
  storage.clicks.insertBatch({
    id: newBatchId(),
    server_id: 'bench',
    rows: Array.from({ length: n }, click),
  });
for (let left = Number(values.existing); left > 0; left -= 50_000) await write(Math.min(left, 50_000));

console.log(`machine: ${machine()}`);
console.log(`log of ${values.existing} clicks first; ${values.batches} batches a size, 2 more not counted\n`);
console.log('| clicks a batch | main µs/click | sqlite-writer µs/click | V8 helpers µs/click |');
console.log('|---:|---:|---:|---:|');
for (const size of [3_000, 25_000, 50_000]) {
  const sum: Record<string, number> = {};
  for (let b = 0; b < Number(values.batches) + 2; b++) {
    const rows = Array.from({ length: size }, click);
    const before = procThreadsCpuUs(process.pid);
    await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'bench', rows });
    const after = procThreadsCpuUs(process.pid);
    if (b < 2) continue;
    for (const k of Object.keys(after)) sum[k] = (sum[k] ?? 0) + after[k]! - (before[k] ?? 0);
  }
  const per = (k: string) => ((sum[k] ?? 0) / (size * Number(values.batches))).toFixed(2);
  console.log(`| ${size} | ${per('main')} | ${per('sqlite-writer')} | ${per('v8-helpers')} |`);
}
console.log(`\nafter: ${machine()}`);
await storage.close();
