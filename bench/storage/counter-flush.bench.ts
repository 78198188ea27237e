/**
 * The counter flush (`Storage.addCounters`): ms per flush, rows/s and queries per flush for 1k, 10k
 * and 100k touched streams (plus one flow row per 10 streams), on SQLite and PostgreSQL. Each size
 * gets a fresh database holding exactly the rows it touches; one warm-up flush, then the median of
 * the timed ones. PostgreSQL is skipped with a message when it does not answer.
 *
 *   node bench/storage/counter-flush.bench.ts [--sizes 1000,10000,100000] [--rounds 5] [--backends sqlite,postgres]
 *
 * It only uses the public storage API and seeds with plain SQL, so the same file measures an older
 * checkout too (copy it into a `git worktree` of that commit): that is how docs/PERFORMANCE.md
 * compares the per-row flush with the batched one.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { type CounterBatch, openPostgres, openSqlite, type Storage } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { median } from '../_util.ts';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,10000,100000' },
    rounds: { type: 'string', default: '5' },
    backends: { type: 'string', default: 'sqlite,postgres' },
  },
});
const SIZES = values.sizes.split(',').map(Number);
const ROUNDS = Number(values.rounds);
const PG_URL = process.env.SLUICE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const STREAMS_PER_FLOW = 10;

const flowId = (f: number) => `bench-flow-${String(f).padStart(6, '0')}`;
const streamId = (s: number) => `bench-stream-${String(s).padStart(7, '0')}`;
const CREATED = '2026-01-01T00:00:00.000Z';

interface Opened {
  storage: Storage;
  close(): Promise<void>;
}

async function openSqliteSeeded(streams: number): Promise<Opened> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  const path = join(dir, 'bench.db');
  const storage = openSqlite(path, systemClock);
  await storage.migrate();
  const db = new DatabaseSync(path);
  db.exec(`BEGIN;
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${streams / STREAMS_PER_FLOW})
    INSERT INTO traffic_flows (id, slug, name, status, rotation, created_at, updated_at)
      SELECT printf('bench-flow-%06d', i), printf('bench-flow-%06d', i), 'f', 'active', 'position', '${CREATED}', '${CREATED}' FROM n;
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${streams})
    INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code, created_at, updated_at)
      SELECT printf('bench-stream-%07d', i), printf('bench-flow-%06d', i / ${STREAMS_PER_FLOW}), 's', 'regular', i % ${STREAMS_PER_FLOW}, 100,
             'active', '{}', 'https://example.com/', 302, '${CREATED}', '${CREATED}' FROM n;
    COMMIT;`);
  db.close();
  return {
    storage,
    close: async () => {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function openPostgresSeeded(streams: number): Promise<Opened> {
  const schema = `sluice_bench_${randomBytes(4).toString('hex')}`;
  const storage = openPostgres({ url: PG_URL, poolMax: 4, schema, clock: systemClock });
  await storage.migrate();
  const client = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${schema}` });
  await client.connect();
  await client.query(`
    INSERT INTO traffic_flows (id, slug, name, status, rotation, created_at, updated_at)
      SELECT 'bench-flow-' || lpad(i::text, 6, '0'), 'bench-flow-' || lpad(i::text, 6, '0'), 'f', 'active', 'position', '${CREATED}', '${CREATED}'
      FROM generate_series(0, ${streams / STREAMS_PER_FLOW - 1}) AS i;
    INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code, created_at, updated_at)
      SELECT 'bench-stream-' || lpad(i::text, 7, '0'), 'bench-flow-' || lpad((i / ${STREAMS_PER_FLOW})::text, 6, '0'), 's', 'regular',
             i % ${STREAMS_PER_FLOW}, 100, 'active', '{}', 'https://example.com/', 302, '${CREATED}', '${CREATED}'
      FROM generate_series(0, ${streams - 1}) AS i;
    ANALYZE traffic_flows; ANALYZE streams;`);
  await client.end();
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

/** Every stream touched, as a busy second of traffic would: hits vary, timestamps move forward. */
function batchOf(streams: number, round: number): CounterBatch {
  const at = new Date(Date.UTC(2026, 0, 2, 0, 0, round)).toISOString();
  // An id as the node cuts one (older checkouts, without idempotent batches, ignore it).
  const batch: CounterBatch = { id: randomUUID(), streams: [], flows: [] };
  for (let s = 0; s < streams; s++)
    batch.streams.push({ id: streamId(s), hits: 1 + ((s + round) % 7), last_hit_at: at });
  for (let f = 0; f < streams / STREAMS_PER_FLOW; f++) {
    batch.flows.push({ id: flowId(f), clicks: 10 + (f % 5), no_match: f % 3, last_click_at: at });
  }
  return batch;
}

const backends = values.backends.split(',');
console.log(`counter flush: median of ${ROUNDS} flushes after a warm-up; rows = streams + flows touched`);
for (const backend of backends) {
  if (backend === 'postgres' && !(await pgAnswers())) continue;
  for (const size of SIZES) {
    const opened = backend === 'postgres' ? await openPostgresSeeded(size) : await openSqliteSeeded(size);
    try {
      const rows = size + size / STREAMS_PER_FLOW;
      await opened.storage.addCounters(batchOf(size, 0));
      const times: number[] = [];
      let queries = 0;
      for (let r = 1; r <= ROUNDS; r++) {
        const batch = batchOf(size, r);
        const q0 = opened.storage.stats().queries;
        const t0 = performance.now();
        await opened.storage.addCounters(batch);
        times.push(performance.now() - t0);
        queries = opened.storage.stats().queries - q0;
      }
      const ms = median(times);
      console.log(
        `  ${backend.padEnd(8)} ${String(size).padStart(6)} streams (${rows} rows): ${ms.toFixed(1).padStart(8)} ms/flush, ` +
          `${Math.round((rows / ms) * 1000).toLocaleString('en-US')} rows/s, ${queries} queries/flush` +
          ` (min ${Math.min(...times).toFixed(1)}, max ${Math.max(...times).toFixed(1)} ms)`,
      );
    } finally {
      await opened.close();
    }
  }
}
