import { ApiError } from '../errors/index.ts';
import { TimeSlice } from '../time/index.ts';
import { type BatchColumnType, type BatchRow, BatchStatement, batchJson, jsonRows } from './batch.ts';
import type { BatchGuard } from './batch-guard.ts';
import { PG_COUNT_CTES, pgCountParams, writeCounts } from './counters.ts';
import { fromMicros, toMicros } from './money.ts';
import { decodeCursor, encodeCursor } from './paging.ts';
import { deleteInChunks, type Row, type SqlExecutor, type SqlReader, toIso } from './sql.ts';
import { clickIdProblem, firstChars, storableProblem, storableText } from './storable.ts';
import { SUB_COLUMNS, SUB_ID_MAX_LENGTH, type SubIds } from './sub-ids.ts';
import {
  type BatchResult,
  type ChunkedDelete,
  type ClickBatch,
  type ClickFilter,
  type ClickRecord,
  type ClickStore,
  LOG_TOTAL_CAP,
  type LogPage,
  type LogPageQuery,
  type NewClick,
} from './types.ts';

/** The click columns in insert order, with their batch types. */
const INSERT_COLUMNS: [string, BatchColumnType][] = [
  ['click_id', 'text'],
  ['flow_id', 'text'],
  ['stream_id', 'text'],
  ['created_at', 'timestamptz'],
  ['outcome', 'text'],
  ['country', 'text'],
  ['device_type', 'text'],
  ['os', 'text'],
  ['browser', 'text'],
  ['language', 'text'],
  ['referrer_host', 'text'],
  ...SUB_COLUMNS.map((c): [string, BatchColumnType] => [c, 'text']),
  ['is_unique', 'boolean'],
  ['is_bot', 'boolean'],
  ['cost_micros', 'bigint'],
  ['ip_prefix', 'text'],
  ['server_id', 'text'],
];
const NAMES = INSERT_COLUMNS.map(([n]) => n).join(', ');

// A click id stored already is kept, never an error: a batch that conflicts would otherwise fail
// on every retry and hold up every click behind it.
const INSERT_CLICKS = new BatchStatement({
  columns: INSERT_COLUMNS.map(([, t]) => t),
  sqlite: `INSERT INTO clicks (${NAMES}) VALUES (${INSERT_COLUMNS.map((_, i) => `?${i + 1}`).join(', ')})
    ON CONFLICT (click_id) DO NOTHING`,
  postgres: `INSERT INTO clicks (${NAMES}) SELECT * FROM {rows} AS r (${NAMES})
    ON CONFLICT (click_id) DO NOTHING`,
});

export const CLICK_COLUMNS = `click_id, flow_id, stream_id, created_at, outcome, country, device_type, os, browser,
  language, referrer_host, ${SUB_COLUMNS.join(', ')}, is_unique, is_bot, cost_micros, ip_prefix, server_id`;

/** A boolean as read back: 0/1 from SQLite, true/false from PostgreSQL. */
export const toBool = (v: unknown): boolean => v === true || v === 1 || v === 1n;
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

export function subsOf(r: Row): SubIds {
  const out = {} as SubIds;
  for (const c of SUB_COLUMNS) out[c] = str(r[c]);
  return out;
}

export const toClick = (r: Row): ClickRecord => ({
  click_id: String(r.click_id),
  flow_id: String(r.flow_id),
  stream_id: str(r.stream_id),
  created_at: toIso(r.created_at)!,
  outcome: r.outcome as ClickRecord['outcome'],
  country: str(r.country),
  device_type: r.device_type as ClickRecord['device_type'],
  os: String(r.os),
  browser: String(r.browser),
  language: str(r.language),
  referrer_host: str(r.referrer_host),
  ...subsOf(r),
  is_unique: toBool(r.is_unique),
  is_bot: toBool(r.is_bot),
  cost: fromMicros(r.cost_micros),
  ip_prefix: str(r.ip_prefix),
  server_id: str(r.server_id),
});

/** Text as both backends store it: U+0000 (PostgreSQL refuses it) becomes U+FFFD. */
const text = (v: string | null | undefined): string | null =>
  v === null || v === undefined ? null : storableText(v);
const sub = (v: string | null | undefined): string | null =>
  v === null || v === undefined ? null : storableText(firstChars(v, SUB_ID_MAX_LENGTH));

/**
 * One click to its row. Everything the database could refuse is made storable here, since a batch
 * refused for one row would be retried, and refused, again and again. `iso` is the batch's
 * {@link IsoTimes}: a node makes dozens of clicks a millisecond, and `toISOString` was a fifth of
 * this function's time.
 */
function toRow(c: NewClick, serverId: string | null, iso: IsoTimes): BatchRow {
  const subs = c.subs;
  return [
    c.click_id,
    c.flow_id,
    c.stream_id,
    iso.of(c.at),
    c.outcome,
    text(c.country),
    c.device_type,
    storableText(c.os),
    storableText(c.browser),
    text(c.language),
    text(c.referrer_host),
    // sub1 … sub10 (SUB_ID_COUNT, which docs/clicks.md fixes at ten), written out: no array grown a value at a time.
    subs === null ? null : sub(subs[0]),
    subs === null ? null : sub(subs[1]),
    subs === null ? null : sub(subs[2]),
    subs === null ? null : sub(subs[3]),
    subs === null ? null : sub(subs[4]),
    subs === null ? null : sub(subs[5]),
    subs === null ? null : sub(subs[6]),
    subs === null ? null : sub(subs[7]),
    subs === null ? null : sub(subs[8]),
    subs === null ? null : sub(subs[9]),
    c.is_unique,
    c.is_bot,
    toMicros(c.cost) ?? 0,
    text(c.ip_prefix),
    serverId,
  ];
}

/** ISO texts of click times, the last one kept: a batch's clicks come in time order. */
class IsoTimes {
  #ms = Number.NaN;
  #iso = '';

  of(ms: number): string {
    if (ms !== this.#ms) {
      this.#iso = new Date(ms).toISOString();
      this.#ms = ms;
    }
    return this.#iso;
  }
}

/** The record a buffered click will be once stored (a postback may arrive before the flush). */
export function clickRecordOf(c: NewClick, serverId: string | null): ClickRecord {
  const subs = {} as SubIds;
  SUB_COLUMNS.forEach((name, i) => {
    subs[name] = c.subs === null ? null : sub(c.subs[i]);
  });
  return {
    click_id: c.click_id,
    flow_id: c.flow_id,
    stream_id: c.stream_id,
    created_at: new Date(c.at).toISOString(),
    outcome: c.outcome,
    country: text(c.country),
    device_type: c.device_type,
    os: storableText(c.os),
    browser: storableText(c.browser),
    language: text(c.language),
    referrer_host: text(c.referrer_host),
    ...subs,
    is_unique: c.is_unique,
    is_bot: c.is_bot,
    cost: fromMicros(toMicros(c.cost) ?? 0),
    ip_prefix: text(c.ip_prefix),
    server_id: serverId,
  };
}

/** The WHERE clause of a log list: equality filters, a time range, and the keyset position. */
export function logWhere(
  equal: Record<string, unknown>,
  from: string | undefined,
  to: string | undefined,
): { where: string[]; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  for (const [k, v] of Object.entries(equal)) {
    if (v === undefined) continue;
    where.push(`${k} = ?`);
    params.push(v);
  }
  for (const [name, v, op] of [
    ['from', from, '>='],
    ['to', to, '<'],
  ] as const) {
    if (v === undefined) continue;
    const problem = storableProblem('timestamp', v);
    if (problem !== undefined) {
      throw new ApiError('validation.invalid_input', `/filter/${name}: ${problem}`, {
        details: [{ path: `/filter/${name}`, message: problem }],
      });
    }
    where.push(`created_at ${op} ?`);
    params.push(v);
  }
  return { where, params };
}

/**
 * A newest-first keyset page over (created_at, id column) of a log table: the total counted up to
 * {@link LOG_TOTAL_CAP}, the rows after the cursor compared as a row value (which both backends
 * read off the (…, created_at, id) indexes), one row more than asked to know whether a page follows.
 */
export async function logPage<T extends { created_at: string }>(
  exec: SqlReader,
  q: {
    table: string;
    columns: string;
    idColumn: string;
    where: string[];
    params: unknown[];
    limit: number;
    cursor: string | undefined;
    checkId: (id: unknown) => string | undefined;
    map: (r: Row) => T;
    idOf: (item: T) => string;
  },
): Promise<LogPage<T>> {
  const after =
    q.cursor === undefined
      ? undefined
      : decodeCursor(q.cursor, q.table, 'created_at', 'desc', 'timestamp', q.checkId);
  const filter = q.where.length ? `WHERE ${q.where.join(' AND ')}` : '';
  const [count] = await exec.all<{ n: unknown }>(
    `SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${q.table} ${filter} LIMIT ${LOG_TOTAL_CAP + 1}) AS capped`,
    q.params,
  );
  const where = [...q.where];
  const params = [...q.params];
  if (after !== undefined) {
    where.push(`(created_at, ${q.idColumn}) < (?, ?)`);
    params.push(after.value, after.id);
  }
  const rows = await exec.all(
    `SELECT ${q.columns} FROM ${q.table} ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
     ORDER BY created_at DESC, ${q.idColumn} DESC LIMIT ?`,
    [...params, q.limit + 1],
  );
  const items = rows.slice(0, q.limit).map(q.map);
  const last = items.at(-1);
  const n = Number(count?.n ?? 0);
  return {
    items,
    total: Math.min(n, LOG_TOTAL_CAP),
    total_capped: n > LOG_TOTAL_CAP,
    next_cursor:
      rows.length > q.limit && last !== undefined
        ? encodeCursor({
            list: q.table,
            by: 'created_at',
            order: 'desc',
            value: last.created_at,
            id: q.idOf(last),
          })
        : null,
  };
}

const ROLLUP_KEY = 'hour, flow_id, stream_id, country, device_type, os, browser, language, outcome';
const ROLLUP_SUMS = ['clicks', 'uniques', 'bots', 'no_match', 'cost_micros'];
/**
 * A batch's clicks summed per UTC hour and report dimensions, added to `report_hours`
 * (docs/reports.md#how-it-is-computed-and-how-it-grows).
 */
const HOUR_ROLLUP = new BatchStatement({
  columns: [
    'timestamptz',
    'text',
    'text',
    'text',
    'text',
    'text',
    'text',
    'text',
    'text',
    'bigint',
    'bigint',
    'bigint',
    'bigint',
    'bigint',
  ],
  sqlite: `INSERT INTO report_hours (${ROLLUP_KEY}, ${ROLLUP_SUMS.join(', ')})
    VALUES (${Array.from({ length: 14 }, (_, i) => `?${i + 1}`).join(', ')})
    ON CONFLICT (${ROLLUP_KEY}) DO UPDATE SET ${ROLLUP_SUMS.map((c) => `${c} = ${c} + excluded.${c}`).join(', ')}`,
  postgres: `INSERT INTO report_hours AS t (${ROLLUP_KEY}, ${ROLLUP_SUMS.join(', ')})
    SELECT * FROM {rows} AS r (${ROLLUP_KEY}, ${ROLLUP_SUMS.join(', ')}) ORDER BY ${ROLLUP_KEY}
    ON CONFLICT (${ROLLUP_KEY}) DO UPDATE SET ${ROLLUP_SUMS.map((c) => `${c} = t.${c} + excluded.${c}`).join(', ')}`,
});

/**
 * PostgreSQL: a batch's clicks, their rollups and their counts in one statement that reads the
 * batch once, the rollups summed by the database (the same sums as {@link HourRollup}, which
 * SQLite's writer thread adds up in JavaScript). Summing them in the node cost it ~1 µs of CPU a
 * click and a second JSON text as long as the first when a batch's clicks spread over many flows
 * and countries (docs/PERFORMANCE.md). The rollup rows are upserted in key order, as two nodes'
 * batches may touch the same rows; the counters are added as the counter flush adds them
 * ({@link PG_COUNT_CTES}). Parameters: the clicks, then the counts' three. The statement's row
 * count is the clicks inserted (the CTEs' rows are not counted).
 */
const INSERT_CLICKS_COUNTS_AND_ROLLUPS = `WITH r AS MATERIALIZED (SELECT * FROM ${jsonRows(INSERT_COLUMNS.map(([, t]) => t))} AS r (${NAMES})),
    sums AS (
      INSERT INTO report_hours AS t (${ROLLUP_KEY}, ${ROLLUP_SUMS.join(', ')})
      SELECT date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', flow_id,
        COALESCE(stream_id, ''), COALESCE(country, ''), device_type, os, browser, COALESCE(language, ''), outcome,
        COUNT(*) FILTER (WHERE outcome = 'redirect'),
        COUNT(*) FILTER (WHERE outcome = 'redirect' AND is_unique),
        COUNT(*) FILTER (WHERE outcome = 'bot'),
        COUNT(*) FILTER (WHERE outcome NOT IN ('redirect', 'bot')),
        SUM(cost_micros)
      FROM r GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9
      ON CONFLICT (${ROLLUP_KEY}) DO UPDATE SET ${ROLLUP_SUMS.map((c) => `${c} = t.${c} + excluded.${c}`).join(', ')}
    ),
    ${PG_COUNT_CTES}
    INSERT INTO clicks (${NAMES}) SELECT * FROM r ON CONFLICT (click_id) DO NOTHING`;

const HOUR_MS = 3_600_000;
/**
 * The rollup rows of a batch: one per (UTC hour, flow, stream, country, device, os, browser,
 * language, outcome), '' for an absent value, with the sums the reports read. Rows are keyed once
 * per click (a string and a map lookup, in the flush, not on the hot path).
 */
export function hourRollups(clicks: readonly NewClick[]): BatchRow[] {
  const rollup = new HourRollup();
  for (const c of clicks) rollup.add(c);
  return rollup.rows();
}

/** {@link hourRollups} a click at a time, so a batch's bookkeeping can yield between clicks. */
class HourRollup {
  readonly #groups = new Map<string, unknown[]>();
  readonly #hours = new Map<number, string>();

  add(c: NewClick): void {
    const h = Math.floor(c.at / HOUR_MS);
    let hour = this.#hours.get(h);
    if (hour === undefined) {
      hour = new Date(h * HOUR_MS).toISOString();
      this.#hours.set(h, hour);
    }
    const country = text(c.country) ?? '';
    const language = text(c.language) ?? '';
    const os = storableText(c.os);
    const browser = storableText(c.browser);
    const stream = c.stream_id ?? '';
    const key = `${hour}\u0000${c.flow_id}\u0000${stream}\u0000${country}\u0000${c.device_type}\u0000${os}\u0000${browser}\u0000${language}\u0000${c.outcome}`;
    let g = this.#groups.get(key);
    if (g === undefined) {
      g = [hour, c.flow_id, stream, country, c.device_type, os, browser, language, c.outcome, 0, 0, 0, 0, 0];
      this.#groups.set(key, g);
    }
    if (c.outcome === 'redirect') {
      (g[9] as number)++;
      if (c.is_unique) (g[10] as number)++;
    } else if (c.outcome === 'bot') (g[11] as number)++;
    else (g[12] as number)++;
    (g[13] as number) += toMicros(c.cost) ?? 0;
  }

  /**
   * The rows in key order (their text keys sorted, which orders them as `report_hours`' primary
   * key for ASCII values). Upserted in that order each lands next to the last one in the index: a
   * batch spread over 1,000 flows × 10 streams × 20 countries upserts about a row a click, and in
   * the order the clicks came that cost SQLite's writer ~8 µs a click against ~4.5 sorted, the sort
   * included at under 1 µs (docs/PERFORMANCE.md).
   */
  rows(): BatchRow[] {
    const keys = [...this.#groups.keys()].sort();
    const rows = new Array<BatchRow>(keys.length);
    for (let i = 0; i < keys.length; i++) rows[i] = this.#groups.get(keys[i]!)!;
    return rows;
  }
}

/**
 * A batch's rows (and its clicks added to `rollup`, when given), built with the event loop let go
 * every few hundred clicks: for 10,000 clicks rows and rollups took ~20 ms in one go (the
 * PostgreSQL flush, measured by the stall test).
 */
async function batchRows(batch: ClickBatch, rollup: HourRollup | undefined): Promise<BatchRow[]> {
  const slice = new TimeSlice();
  const iso = new IsoTimes();
  const rows = new Array<BatchRow>(batch.rows.length);
  for (let i = 0; i < batch.rows.length; i++) {
    const c = batch.rows[i]!;
    rows[i] = toRow(c, batch.server_id, iso);
    rollup?.add(c);
    if ((i & 255) === 255) await slice.pause();
  }
  return rows;
}

const DELETE_CHUNK = 2000;

/**
 * Clicks a batch holds at most, as the click log cuts its buffer (bounded statements, short
 * transactions). On PostgreSQL a batch's parameters are built as text and `pg` writes them in one
 * synchronous call: ~4 MB at this size.
 */
export const CLICK_BATCH_MAX_ROWS = 10_000;

/**
 * The same for a SQLite node's writer thread. A batch is one transaction, and its `COMMIT` writes
 * every page it dirtied: the end of each index keyed by time, one page for each of its flows in
 * `clicks_flow`, a page for almost every sub1 it holds in `clicks_sub1`. Five times the clicks
 * dirty far fewer than five times the pages, so a node that is behind catches up: at a log of a
 * million clicks over 1,000 flows, 39.9k clicks/s in batches of 10,000 and 58.7k in batches of
 * 50,000 (docs/PERFORMANCE.md). Nothing of it runs on the event loop; an ACP save on the node's
 * own connection may wait behind one such transaction (~1 s at that size).
 */
export const WRITER_CLICK_BATCH_MAX_ROWS = 50_000;

/**
 * Where a SQLite node writes the click log instead of the node's connection: its writer thread
 * (`SqliteWriter`), which runs this class itself there.
 */
export interface ClickWriter {
  insertBatch(batch: ClickBatch): Promise<BatchResult>;
  run(sql: string, params: readonly unknown[]): Promise<number>;
}

export class SqlClicks implements ClickStore {
  readonly #x: SqlExecutor;
  readonly #guard: BatchGuard;
  /**
   * Where the list reads (SQLite: the reader thread). A filter the indexes cannot narrow (a
   * country no click has, a deleted stream) walks the whole log, ~0.5 s at a million clicks.
   */
  readonly #read: SqlReader;
  /** Where batches and retention are written instead of `x` (a SQLite node's writer thread). */
  readonly #writer: ClickWriter | undefined;

  constructor(x: SqlExecutor, guard: BatchGuard, read: SqlReader = x, writer?: ClickWriter) {
    this.#x = x;
    this.#guard = guard;
    this.#read = read;
    this.#writer = writer;
  }

  get batchMaxRows(): number {
    return this.#writer === undefined ? CLICK_BATCH_MAX_ROWS : WRITER_CLICK_BATCH_MAX_ROWS;
  }

  async insertBatch(batch: ClickBatch): Promise<BatchResult> {
    const counts = batch.counts;
    if (batch.rows.length === 0 && counts === undefined) return { applied: true, rows: 0 };
    if (this.#writer !== undefined) return this.#writer.insertBatch(batch);
    let written = 0;
    // The rollups and the counts go in the same transaction and under the same guard: a batch
    // sent again adds neither clicks, sums nor counts twice, and a crash loses all or none of them.
    if (this.#x.dialect === 'postgres') {
      const params = [await batchJson(await batchRows(batch, undefined)), ...(await pgCountParams(counts))];
      const applied = await this.#guard.once(batch.id, 'clicks', async (tx) => {
        written = await tx.run(INSERT_CLICKS_COUNTS_AND_ROLLUPS, params);
      });
      return { applied, rows: written };
    }
    const rollup = new HourRollup();
    const rows = await batchRows(batch, rollup);
    const hours = rollup.rows();
    const applied = await this.#guard.once(batch.id, 'clicks', async (tx) => {
      written = await tx.batch(INSERT_CLICKS, rows);
      await tx.batch(HOUR_ROLLUP, hours);
      if (counts !== undefined) await writeCounts(tx, counts);
    });
    return { applied, rows: written };
  }

  async get(clickId: string): Promise<ClickRecord | undefined> {
    if (clickIdProblem(clickId) !== undefined) return undefined;
    const [row] = await this.#x.all(`SELECT ${CLICK_COLUMNS} FROM clicks WHERE click_id = ?`, [clickId]);
    return row && toClick(row);
  }

  async list(q: LogPageQuery<ClickFilter>): Promise<LogPage<ClickRecord>> {
    const f = q.filter;
    // No index leads with stream_id (migration 15): a stream's clicks are among its flow's, so the
    // list walks clicks_flow when the stream still exists (a deleted one's are found by time).
    let flowId = f.flow_id;
    if (flowId === undefined && f.stream_id !== undefined) {
      const [stream] = await this.#x.all<{ flow_id: string }>('SELECT flow_id FROM streams WHERE id = ?', [
        f.stream_id,
      ]);
      flowId = stream?.flow_id;
    }
    const { where, params } = logWhere(
      {
        flow_id: flowId,
        stream_id: f.stream_id,
        outcome: f.outcome,
        country: f.country,
        is_bot: f.is_bot,
        sub1: f.sub1,
      },
      f.from,
      f.to,
    );
    return logPage(this.#read, {
      table: 'clicks',
      columns: CLICK_COLUMNS,
      idColumn: 'click_id',
      where,
      params,
      limit: q.limit,
      cursor: q.cursor,
      checkId: clickIdProblem,
      map: toClick,
      idOf: (c) => c.click_id,
    });
  }

  async deleteOlderThan(before: string, opts: ChunkedDelete = {}): Promise<number> {
    const problem = storableProblem('timestamp', before);
    if (problem !== undefined) throw new Error(`deleteOlderThan: before ${problem}`);
    // Oldest first along the created_at index. On a SQLite node, on its writer thread: a chunk on
    // a log spread over many flows and sub-ids takes ~100 ms, the deletes touching as many index
    // pages as the inserts did.
    return deleteInChunks(
      this.#writer ?? this.#x,
      `DELETE FROM clicks WHERE click_id IN
         (SELECT click_id FROM clicks WHERE created_at < ? ORDER BY created_at LIMIT ?)`,
      [before],
      opts.chunkRows ?? DELETE_CHUNK,
      opts.signal,
    );
  }
}
