/**
 * The floor of persisting a click in SQLite: the click log's own `INSERT` alone (no guard, no
 * rollups, no message to a thread), one prepared statement a row inside 10,000-row transactions,
 * on the node's schema (migrated) with its secondary indexes kept or dropped. CPU µs a row,
 * `COMMIT` included, median of the batches; each variant on a fresh file of its own.
 *
 *   node bench/storage/sqlite-insert.bench.ts [--batches 30] [--flows 100] [--subs 1000] [--existing 0]
 *
 * `--existing N` writes N rows through the same statement first (not measured): the cost of each
 * index once the log holds that many clicks (sub1 on a third of them, from `--subs` values).
 *
 * What docs/PERFORMANCE.md compares a bare fastify 302 with: the part of a redirect's CPU that an
 * in-process click log cannot avoid.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { ClickIdGenerator } from '../../src/clicks/index.ts';
import { CLICK_COLUMNS } from '../../src/storage/clicks.ts';
import { openSqlite } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { median } from '../_util.ts';

const { values } = parseArgs({
  options: {
    batches: { type: 'string', default: '30' },
    flows: { type: 'string', default: '100' },
    subs: { type: 'string', default: '1000' },
    existing: { type: 'string', default: '0' },
  },
});
const SUBS = Number(values.subs);
const EXISTING = Number(values.existing);
const BATCHES = Number(values.batches);
const ROWS = 10_000;
const FLOWS = Array.from({ length: Number(values.flows) }, () => randomUUID());
const STREAMS = FLOWS.map(() => [randomUUID(), randomUUID(), randomUUID()]);
const COLUMNS = CLICK_COLUMNS.split(',').map((c) => c.trim());
const SECONDARY = ['clicks_created', 'clicks_flow', 'clicks_sub1'];
const ids = new ClickIdGenerator(systemClock);

/** A click row in CLICK_COLUMNS order, as the click log writes one. */
function row(n: number): SQLInputValue[] {
  const f = n % FLOWS.length;
  const at = new Date().toISOString();
  const values: Record<string, SQLInputValue> = {
    click_id: ids.next(),
    flow_id: FLOWS[f]!,
    stream_id: STREAMS[f]![n % 3]!,
    created_at: at,
    outcome: 'redirect',
    country: 'US',
    device_type: 'mobile',
    os: 'iOS',
    browser: 'Mobile Safari',
    language: 'en',
    referrer_host: 'news.example.com',
    sub1: n % 3 === 0 ? `campaign-${(n * 7919) % SUBS}` : null,
    is_unique: 1,
    is_bot: 0,
    cost_micros: 12_000,
    ip_prefix: '203.0.113.0',
    server_id: 'bench',
  };
  return COLUMNS.map((c) => values[c] ?? null);
}

async function variant(keep: readonly string[]): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-insert-'));
  try {
    const path = join(dir, 'i.db');
    const storage = openSqlite(path, systemClock);
    await storage.migrate();
    await storage.close();
    const db = new DatabaseSync(path);
    db.exec('PRAGMA journal_mode = WAL; PRAGMA cache_size = -65536');
    for (const ix of SECONDARY) if (!keep.includes(ix)) db.exec(`DROP INDEX ${ix}`);
    const insert = db.prepare(
      `INSERT INTO clicks (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})
       ON CONFLICT (click_id) DO NOTHING`,
    );
    const perRow: number[] = [];
    let n = 0;
    const existing = Math.ceil(EXISTING / ROWS);
    for (let b = 0; b < existing + BATCHES; b++) {
      const rows = Array.from({ length: ROWS }, () => row(n++));
      const start = process.cpuUsage();
      db.exec('BEGIN');
      for (const r of rows) insert.run(...r);
      db.exec('COMMIT');
      const used = process.cpuUsage(start);
      if (b >= existing) perRow.push((used.user + used.system) / ROWS);
    }
    db.close();
    return median(perRow);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(
  `SQLite click INSERT alone: ${BATCHES} transactions of ${ROWS.toLocaleString('en-US')} rows, ${FLOWS.length} flows, ` +
    `${SUBS.toLocaleString('en-US')} sub1 values, after ${EXISTING.toLocaleString('en-US')} rows; CPU µs a row (median)`,
);
for (const keep of [[], ['clicks_created'], ['clicks_created', 'clicks_flow'], SECONDARY]) {
  const us = await variant(keep);
  console.log(
    `  ${(keep.length === 0 ? 'primary key only' : keep.join(' + ')).padEnd(44)} ${us.toFixed(2)} µs`,
  );
}
