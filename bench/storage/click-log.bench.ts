/**
 * The click log's write path on SQLite and PostgreSQL:
 *
 * 1. `clicks.insertBatch` of 1k and 10k clicks, and of the store's own batch size when larger
 *    (one idempotent batch each: guard row + one multi-row insert), interleaved sizes, into a
 *    table that grows as a node's would; median ms a batch and rows/s.
 * 2. The whole path as a node runs it: `ClickLog.append` of 200,000 clicks, then flushes of
 *    batches as the store sizes them (`batchMaxRows`: 10,000; 50,000 on a SQLite node's writer
 *    thread) until everything is written; clicks/s end to end.
 * 3. Heap bytes a buffered click costs (run with `--expose-gc`; skipped otherwise).
 *
 *   node --expose-gc bench/storage/click-log.bench.ts [--rounds 7] [--backends sqlite,sqlite-node,postgres]
 *        [--feed 200000] [--existing 0] [--flows 100] [--subs 1000]
 *        [--batch N] [--counts]
 *
 * `--existing N` first writes N clicks (in batches of the store's size, through the same path), so the figures are
 * those of a log that already holds that many: an index keyed by something other than time takes
 * each batch's rows at as many places as the batch has distinct keys, and once the index no longer
 * fits SQLite's page cache each of those places is a page read and a page written. A fresh table
 * hides that; `--existing 2000000 --flows 1000` is a day of a mid-sized node. `--flows` sets the
 * flows the clicks spread over (three streams each), `--subs` the distinct sub1 values.
 *
 * `sqlite-node` is SQLite as a node opens it: batches applied and the write-ahead log checkpointed
 * on the writer thread, with the page cache of `storage.sqlite.cache_mb`; `sqlite` is SQLite's own
 * defaults on the calling thread. `--batch N` sets the rows a batch holds at most in the ClickLog
 * part. `--counts`: every batch also carries what its clicks counted (the flows' and streams'
 * counters, as a node's click log writes them in the same transaction, docs/routing.md#counting),
 * and the ClickLog part counts each click as the hot path does; compare a run without it.
 *
 * Clicks look like real ones: a fresh id per click; country, language, referrer host and IP prefix
 * read from per-request header strings by the hot path's own functions (which share repeating
 * values); flow/stream ids and os/browser names shared (they come from the routing and user-agent
 * caches); sub1 on a third of them.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { pino } from 'pino';
import {
  ClickIdGenerator,
  ClickLog,
  ipPrefix,
  preferredLanguage,
  referrerHost,
} from '../../src/clicks/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { normalizeCountry } from '../../src/http/index.ts';
import { ClickCounters } from '../../src/routing/index.ts';
import {
  type NewClick,
  newBatchId,
  openPostgres,
  openSqlite,
  type Storage,
} from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { fmt, median } from '../_util.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    backends: { type: 'string', default: 'sqlite,sqlite-node,postgres' },
    feed: { type: 'string', default: '200000' },
    existing: { type: 'string', default: '0' },
    flows: { type: 'string', default: '100' },
    subs: { type: 'string', default: '1000' },
    batch: { type: 'string' },
    counts: { type: 'boolean', default: false },
  },
});
const EXISTING = Number(values.existing);
const SUBS = Number(values.subs);
const ROUNDS = Number(values.rounds);
/** Rows a batch holds at most in the ClickLog part; by default what the store asks for, as a node's. */
const BATCH = values.batch === undefined ? undefined : Number(values.batch);
/** The shipped defaults, as a node started with no settings of its own would run. */
const NODE_CONFIG = loadConfig({ configDir: 'config', mode: 'production', env: {} }).config;
const FEED = Number(values.feed);
const COUNTS = values.counts;

/** Counts a click as the hot path does (routing's counters), for `--counts`. */
function count(counters: ClickCounters, c: NewClick): void {
  if (c.outcome === 'bot') counters.bot(c.flow_id, c.at);
  else if (c.outcome === 'no_match') counters.noMatch(c.flow_id, c.at);
  else counters.hit(c.flow_id, c.stream_id!, c.at, c.is_unique);
}
const PG_URL = process.env.SLUICE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const FLOWS = Array.from(
  { length: Number(values.flows) },
  (_, i) => `flow-${String(i).padStart(4, '0')}-0000-0000-000000000000`,
);
const STREAMS = FLOWS.map((f) => [0, 1, 2].map((s) => `${f.slice(0, 30)}-s${s}`));
const AGENTS = [
  ['mobile', 'Android', 'Chrome'],
  ['mobile', 'iOS', 'Mobile Safari'],
  ['desktop', 'Windows', 'Chrome'],
  ['desktop', 'Mac OS', 'Safari'],
  ['tablet', 'iOS', 'Mobile Safari'],
] as const;
const COUNTRIES = ['US', 'DE', 'FR', 'GB', 'BR', 'IN'];
let seq = 0;
const clickIds = new ClickIdGenerator(systemClock);

/** When the first click of the run happened; clicks follow at {@link CLICKS_PER_MS}. */
const START = Date.now();
/**
 * Clicks a millisecond: each click's time comes after the last one's, as a node's do. (Times that
 * started over with each batch put every batch's clicks amid the log's, not at its end, in each
 * index keyed by time: the figures at a million clicks were half what a node gets.)
 */
const CLICKS_PER_MS = 10;

/** A click as the hot path would make it: per-request strings fresh, cached ones shared. */
function click(): NewClick {
  const n = seq++;
  const at = START + Math.floor(n / CLICKS_PER_MS);
  const f = n % FLOWS.length;
  const a = AGENTS[n % AGENTS.length]!;
  const bot = n % 50 === 0;
  return {
    // As a node makes them: time first, so the primary key grows at its end as in production
    // (random ids made every insert a random B-tree descent: half the rate at a million rows).
    click_id: clickIds.next(),
    flow_id: FLOWS[f]!,
    stream_id: n % 20 === 0 ? null : STREAMS[f]![n % 3]!,
    at,
    outcome: bot ? 'bot' : n % 20 === 0 ? 'no_match' : 'redirect',
    // Each from a string made for this request, as a header value would be.
    country: normalizeCountry(`${COUNTRIES[n % COUNTRIES.length]}`.toLowerCase()) ?? null,
    device_type: a[0],
    os: a[1],
    browser: a[2],
    language: preferredLanguage(`${['en', 'de', 'fr'][n % 3]}-${n % 7},en;q=0.8`),
    referrer_host: n % 4 === 0 ? null : referrerHost(`https://news${n % 97}.example.com/p/${n}`),
    subs: n % 3 === 0 ? [`campaign-${(n * 7919) % SUBS}`] : null,
    is_unique: n % 5 !== 0,
    is_bot: bot,
    cost: bot ? 0 : 0.012,
    ip_prefix: ipPrefix(`203.0.${n % 256}.${n % 251}`),
  };
}

interface Opened {
  storage: Storage;
  close(): Promise<void>;
}

async function open(backend: string): Promise<Opened> {
  if (backend === 'sqlite' || backend === 'sqlite-node') {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
    // sqlite-node: as a node opens it, batches applied and the write-ahead log checkpointed on
    // the writer thread.
    const storage = openSqlite(join(dir, 'bench.db'), systemClock, {
      checkpointThread: backend === 'sqlite-node',
      writeThread: backend === 'sqlite-node',
      ...(backend === 'sqlite-node' ? { cacheMb: NODE_CONFIG.storage.sqlite.cache_mb } : {}),
    });
    await storage.migrate();
    return {
      storage,
      close: async () => {
        await storage.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const schema = `sluice_bench_${randomBytes(4).toString('hex')}`;
  const storage = openPostgres({ url: PG_URL, poolMax: 4, schema, clock: systemClock });
  await storage.migrate();
  return {
    storage,
    close: async () => {
      await storage.close();
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

async function pgAnswers(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    return true;
  } catch (err) {
    console.log(`PostgreSQL at ${PG_URL} unreachable (${(err as Error).message}): skipping it`);
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

function heapPerClick(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) {
    console.log('heap a buffered click: run with --expose-gc to measure');
    return;
  }
  const log = new ClickLog({
    store: { insertBatch: async () => ({ applied: true, rows: 0 }) },
    logger: pino({ level: 'silent' }),
    serverId: null,
    bufferMax: 10_000_000,
    flushIntervalMs: 0,
  });
  const N = 200_000;
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < N; i++) log.append(click());
  gc();
  gc();
  const after = process.memoryUsage().heapUsed;
  console.log(
    `heap a buffered click: ${((after - before) / N).toFixed(0)} bytes (${N.toLocaleString('en-US')} clicks, ${log.stats().buffered} held)`,
  );
}

heapPerClick();
console.log(
  `insertBatch: median of ${ROUNDS} batches a size after a warm-up, sizes interleaved; then ClickLog end to end`,
);
for (const backend of values.backends.split(',')) {
  if (backend === 'postgres' && !(await pgAnswers())) continue;
  const opened = await open(backend);
  try {
    const { storage } = opened;
    const batchOf = async (n: number) => {
      const rows = Array.from({ length: n }, click);
      if (!COUNTS) return { id: newBatchId(), server_id: 'bench-node', rows };
      const counters = new ClickCounters();
      for (const c of rows) count(counters, c);
      return { id: newBatchId(), server_id: 'bench-node', rows, counts: await counters.cut()!.rows() };
    };
    const cut = storage.clicks.batchMaxRows;
    for (let done = 0; done < EXISTING; done += cut) {
      await storage.clicks.insertBatch(await batchOf(Math.min(cut, EXISTING - done)));
    }
    if (EXISTING > 0) console.log(`  ${backend.padEnd(11)} ${fmt(EXISTING)} clicks written first`);
    await storage.clicks.insertBatch(await batchOf(1000));
    // 1k, 10k and the store's own batch when larger (50k on a SQLite node's writer thread).
    const sizes = [...new Set([1000, 10_000, storage.clicks.batchMaxRows])];
    const times = new Map<number, number[]>(sizes.map((n) => [n, []]));
    // This process's CPU a row (the whole of SQLite's cost; PostgreSQL's client side only): less
    // sensitive than wall time to other jobs sharing the machine.
    const cpu = new Map<number, number[]>(sizes.map((n) => [n, []]));
    // The main thread's share: what the event loop pays (the checkpoint thread's work is not in it).
    const mainCpu = new Map<number, number[]>(sizes.map((n) => [n, []]));
    const queries = new Map<number, number>();
    for (let r = 0; r < ROUNDS; r++) {
      for (const size of times.keys()) {
        const batch = await batchOf(size);
        const q0 = storage.stats().queries;
        const c0 = process.cpuUsage();
        const m0 = process.threadCpuUsage();
        const t0 = performance.now();
        await storage.clicks.insertBatch(batch);
        times.get(size)!.push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        const m = process.threadCpuUsage(m0);
        cpu.get(size)!.push((c.user + c.system) / size);
        mainCpu.get(size)!.push((m.user + m.system) / size);
        queries.set(size, storage.stats().queries - q0);
      }
    }
    for (const [size, ts] of times) {
      const ms = median(ts);
      console.log(
        `  ${backend.padEnd(11)} batch of ${String(size).padStart(6)}: ${ms.toFixed(1).padStart(7)} ms, ${fmt((size / ms) * 1000)} rows/s, ` +
          `${median(cpu.get(size)!).toFixed(1)} µs this process's CPU a row (main thread ${median(mainCpu.get(size)!).toFixed(1)}), ` +
          `${queries.get(size)} queries a batch (min ${Math.min(...ts).toFixed(1)}, max ${Math.max(...ts).toFixed(1)} ms)`,
      );
    }
    const counters = new ClickCounters();
    const log = new ClickLog({
      store: storage.clicks,
      logger: pino({ level: 'silent' }),
      serverId: 'bench-node',
      ...(COUNTS ? { counts: counters } : {}),
      bufferMax: FEED,
      flushIntervalMs: 0,
      ...(BATCH === undefined ? {} : { batchMaxRows: BATCH }),
    });
    const feed = Array.from({ length: FEED }, click);
    const c0 = process.cpuUsage();
    const m0 = process.threadCpuUsage();
    const t0 = performance.now();
    if (COUNTS) {
      for (const c of feed) {
        count(counters, c);
        log.append(c);
      }
    } else for (const c of feed) log.append(c);
    const appended = performance.now() - t0;
    const written = await log.persist();
    const ms = performance.now() - t0;
    const c = process.cpuUsage(c0);
    const m = process.threadCpuUsage(m0);
    console.log(
      `  ${backend.padEnd(11)} ClickLog: ${fmt(FEED)} clicks appended in ${appended.toFixed(1)} ms ` +
        `(${((appended / FEED) * 1e6).toFixed(0)} ns each), written in ${(ms / 1000).toFixed(2)} s: ${fmt((written / ms) * 1000)} clicks/s, ` +
        `${((c.user + c.system) / written).toFixed(1)} µs this process's CPU a click (main thread ${((m.user + m.system) / written).toFixed(1)})`,
    );
  } finally {
    await opened.close();
  }
}
