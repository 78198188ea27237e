import { TimeSlice } from '../time/index.ts';
import { type BatchColumnType, BatchStatement, batchJson, jsonRows } from './batch.ts';
import type { BatchGuard } from './batch-guard.ts';
import { type SqlExecutor, toNum } from './sql.ts';
import type { CounterBatch, CountRows } from './types.ts';

// The latest timestamp wins: an older batch (a slow node's) never moves `last_*_at` back.
// On PostgreSQL the rows are locked in id order first (the sorted subquery), whatever plan the
// update gets: its join would otherwise visit them in the order of whichever side the planner
// reads first, the table's physical order included, and two nodes flushing overlapping batches
// in different orders could deadlock. The lock is FOR NO KEY UPDATE, the one the UPDATE takes
// anyway, so foreign-key checks (a stream created in a counted flow) do not wait for the flush.
// Ids that match no row (a stream or flow deleted since it was counted) simply join nothing.

const STREAM_COLUMNS: BatchColumnType[] = ['text', 'bigint', 'bigint', 'timestamptz'];
const FLOW_COLUMNS: BatchColumnType[] = ['text', 'bigint', 'bigint', 'bigint', 'bigint', 'timestamptz'];
const DAY_COLUMNS: BatchColumnType[] = ['text', 'text', 'bigint'];

/** PostgreSQL: the stream increments read from `rows`, a relation of (id, hits, uniques, at). */
const pgStreamHits = (
  rows: string,
) => `UPDATE streams AS t SET hits = t.hits + v.hits, uniques = t.uniques + v.uniques,
      last_hit_at = CASE WHEN t.last_hit_at IS NULL OR t.last_hit_at < v.at THEN v.at ELSE t.last_hit_at END
    FROM (SELECT r.id, r.hits, r.uniques, r.at FROM ${rows} AS r (id, hits, uniques, at)
          JOIN streams AS s ON s.id = r.id ORDER BY s.id FOR NO KEY UPDATE OF s) AS v
    WHERE t.id = v.id`;

const pgFlowClicks = (
  rows: string,
) => `UPDATE traffic_flows AS t SET clicks = t.clicks + v.clicks, no_match = t.no_match + v.no_match,
      bots = t.bots + v.bots, uniques = t.uniques + v.uniques,
      last_click_at = CASE WHEN t.last_click_at IS NULL OR t.last_click_at < v.at THEN v.at ELSE t.last_click_at END
    FROM (SELECT r.id, r.clicks, r.no_match, r.bots, r.uniques, r.at
          FROM ${rows} AS r (id, clicks, no_match, bots, uniques, at)
          JOIN traffic_flows AS f ON f.id = r.id ORDER BY f.id FOR NO KEY UPDATE OF f) AS v
    WHERE t.id = v.id`;

// Daily cap counts (docs/routing.md#daily-caps): added per (stream, day), created on first use. Rows are merged per key
// first (one statement may not touch a row twice); PostgreSQL inserts in key order, so two nodes'
// batches lock the same rows in the same order.
const pgStreamDays = (rows: string) => `INSERT INTO stream_days AS t (stream_id, day, clicks)
    SELECT r.stream_id, r.day, r.clicks FROM ${rows} AS r (stream_id, day, clicks) ORDER BY r.stream_id, r.day
    ON CONFLICT (stream_id, day) DO UPDATE SET clicks = t.clicks + excluded.clicks`;

const STREAM_HITS = new BatchStatement({
  columns: STREAM_COLUMNS,
  sqlite: `UPDATE streams SET hits = hits + ?2, uniques = uniques + ?3,
      last_hit_at = CASE WHEN last_hit_at IS NULL OR last_hit_at < ?4 THEN ?4 ELSE last_hit_at END
    WHERE id = ?1`,
  postgres: pgStreamHits('{rows}'),
});

const FLOW_CLICKS = new BatchStatement({
  columns: FLOW_COLUMNS,
  sqlite: `UPDATE traffic_flows SET clicks = clicks + ?2, no_match = no_match + ?3, bots = bots + ?4,
      uniques = uniques + ?5,
      last_click_at = CASE WHEN last_click_at IS NULL OR last_click_at < ?6 THEN ?6 ELSE last_click_at END
    WHERE id = ?1`,
  postgres: pgFlowClicks('{rows}'),
});

const STREAM_DAYS = new BatchStatement({
  columns: DAY_COLUMNS,
  sqlite: `INSERT INTO stream_days (stream_id, day, clicks) VALUES (?1, ?2, ?3)
    ON CONFLICT (stream_id, day) DO UPDATE SET clicks = clicks + excluded.clicks`,
  postgres: pgStreamDays('{rows}'),
});

/**
 * PostgreSQL: the three counter statements as data-modifying CTEs of a click batch's statement
 * (`WITH …, <these>, … INSERT INTO clicks …`), their rows read from three `?` parameters in the
 * order streams, flows, days (each {@link batchJson} text): a batch's clicks and counts are one
 * statement, one round trip.
 */
export const PG_COUNT_CTES = `counted_streams AS (${pgStreamHits(jsonRows(STREAM_COLUMNS))}),
    counted_flows AS (${pgFlowClicks(jsonRows(FLOW_COLUMNS))}),
    counted_days AS (${pgStreamDays(jsonRows(DAY_COLUMNS))})`;

/** The parameters of {@link PG_COUNT_CTES}, in their order. */
export async function pgCountParams(c: CountRows | undefined): Promise<string[]> {
  if (c === undefined) return ['[]', '[]', '[]'];
  return [await batchJson(c.streams), await batchJson(c.flows), await batchJson(c.days)];
}

/** Adds counter rows inside the caller's transaction, one batch statement per kind that has rows. */
export async function writeCounts(tx: SqlExecutor, c: CountRows): Promise<void> {
  await tx.batch(STREAM_HITS, c.streams);
  await tx.batch(FLOW_CLICKS, c.flows);
  await tx.batch(STREAM_DAYS, c.days);
}

/**
 * Adds a batch of counter deltas in one transaction: the batch's guard row, then at most three batch
 * statements (streams, flows, then the daily cap counts), so a flush is a fixed number of round
 * trips on PostgreSQL whatever its size, and all of it or none of it is written. A batch id already applied writes nothing and
 * returns false (a retry of a batch whose commit went through). An id given twice is added twice,
 * as two separate batches would be: the rows are merged first, since one `UPDATE ... FROM` applies
 * only one of several matches.
 */
export async function addCounters(guard: BatchGuard, batch: CounterBatch): Promise<boolean> {
  // Merged a slice at a time, so a batch of 100k rows does not hold the event loop (#12).
  const slice = new TimeSlice();
  let n = 0;
  const streams = new Map<string, [id: string, hits: number, uniques: number, at: string]>();
  for (const s of batch.streams) {
    const row = streams.get(s.id);
    if (row === undefined) streams.set(s.id, [s.id, s.hits, s.uniques ?? 0, s.last_hit_at]);
    else {
      row[1] += s.hits;
      row[2] += s.uniques ?? 0;
      if (s.last_hit_at > row[3]) row[3] = s.last_hit_at;
    }
    if ((++n & 255) === 0) await slice.pause();
  }
  const flows = new Map<
    string,
    [id: string, clicks: number, noMatch: number, bots: number, uniques: number, at: string]
  >();
  for (const f of batch.flows) {
    const row = flows.get(f.id);
    if (row === undefined)
      flows.set(f.id, [f.id, f.clicks, f.no_match, f.bots ?? 0, f.uniques ?? 0, f.last_click_at]);
    else {
      row[1] += f.clicks;
      row[2] += f.no_match;
      row[3] += f.bots ?? 0;
      row[4] += f.uniques ?? 0;
      if (f.last_click_at > row[5]) row[5] = f.last_click_at;
    }
    if ((++n & 255) === 0) await slice.pause();
  }
  const days = new Map<string, [streamId: string, day: string, clicks: number]>();
  for (const d of batch.days ?? []) {
    const key = `${d.stream_id}\u0000${d.day}`;
    const row = days.get(key);
    if (row === undefined) days.set(key, [d.stream_id, d.day, d.clicks]);
    else row[2] += d.clicks;
  }
  if (streams.size === 0 && flows.size === 0 && days.size === 0) return true;
  return guard.once(batch.id, 'counters', (tx) =>
    writeCounts(tx, { streams: [...streams.values()], flows: [...flows.values()], days: [...days.values()] }),
  );
}

/** Clicks counted on (stream, day) pairs, keyed `stream_id + "\u0000" + day`; pairs with none are absent. */
export async function streamDays(
  x: SqlExecutor,
  pairs: readonly { stream_id: string; day: string }[],
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const ids = [...new Set(pairs.map((p) => p.stream_id))];
  const dayList = [...new Set(pairs.map((p) => p.day))];
  for (let i = 0; i < ids.length; i += 500) {
    const part = ids.slice(i, i + 500);
    const rows = await x.all(
      `SELECT stream_id, day, clicks FROM stream_days WHERE stream_id IN (${part.map(() => '?').join(', ')})
         AND day IN (${dayList.map(() => '?').join(', ')})`,
      [...part, ...dayList],
    );
    for (const r of rows) out.set(`${r.stream_id}\u0000${r.day}`, toNum(r.clicks));
  }
  return out;
}
