import { type ClickWriter, SUB_COLUMNS } from './clicks.ts';
import type { Row, SqlExecutor, SqlReader } from './sql.ts';
import { deleteInChunks, microsOf, sumMicros, toNum } from './sql.ts';

/**
 * Click-log columns a report may group by (§15); the same names exist on `conversions`. The
 * hourly rollups hold all but the sub-ids ({@link ROLLUP_COLUMNS}).
 */
export const ROLLUP_COLUMNS = [
  'flow_id',
  'stream_id',
  'country',
  'device_type',
  'os',
  'browser',
  'language',
  'outcome',
] as const;
export const REPORT_COLUMNS = [...ROLLUP_COLUMNS, ...SUB_COLUMNS] as const;
export type ReportColumn = (typeof REPORT_COLUMNS)[number];

export interface ReportFilter {
  flow_id?: string | undefined;
  stream_id?: string | undefined;
  country?: string | undefined;
  is_bot?: boolean | undefined;
  /**
   * Only money in this currency: clicks of flows whose `currency` it is (a deleted flow's is kept
   * in `deleted_flows`), conversions paid in it.
   */
  currency?: string | undefined;
}

/** One aggregation over the click log and the conversions, in UTC, by fixed-size time buckets. */
export interface ReportSpec {
  /** UTC instants, ISO-8601; `to` exclusive. */
  from: string;
  to: string;
  columns: readonly ReportColumn[];
  /** Seconds per time bucket (900 or 3600), or 0 for no time grouping. */
  bucketSeconds: number;
  filter: ReportFilter;
  /**
   * Where clicks are summed from: the hourly rollups (`report_hours`: no sub-id columns, whole UTC
   * hours, hour buckets at most), or the click log itself (any column, any bucket).
   */
  source: 'rollups' | 'clicks';
}

/** A group as the database sums it: the bucket (epoch seconds / bucketSeconds), the columns, sums. */
export interface ReportGroup {
  bucket: number | null;
  values: (string | null)[];
  clicks: number;
  uniques: number;
  bots: number;
  no_match: number;
  /** Exact: a sum of money may pass 2^53 micro-units. */
  cost_micros: bigint;
  leads: number;
  sales: number;
  rejected: number;
  revenue_micros: bigint;
}

export interface ReportStore {
  /** Click groups and conversion groups (by the postback's arrival), summed by the database. */
  aggregate(spec: ReportSpec): Promise<{ clicks: ReportGroup[]; conversions: ReportGroup[] }>;
  /** Currencies with money in the selection: flows with a cost per click that had clicks, conversions paid. */
  currencies(spec: ReportSpec): Promise<string[]>;
  /**
   * Deletes the hourly rollups of hours before `before` (ISO), an hour at a time, oldest first,
   * stopping between hours when the signal fires; returns the rows deleted.
   */
  deleteRollupsBefore(before: string, opts?: { signal?: AbortSignal }): Promise<number>;
}

/** Every flow's currency, the deleted ones' included: the currency of a click's money. */
const FLOW_CURRENCIES =
  '(SELECT id, currency FROM traffic_flows UNION ALL SELECT id, currency FROM deleted_flows)';

/**
 * Reports read the click log and the conversions directly (§15): one grouped scan of each over the
 * range's index, summed by the database; the report engine (src/reports) turns buckets into days
 * and hours of the report's time zone and adds the formulas.
 */

/** Rollup rows a SQLite retention statement deletes at most: a few ms each, whatever an hour holds. */
const ROLLUP_DELETE_CHUNK = 2000;

export class SqlReports implements ReportStore {
  readonly #x: SqlExecutor;
  /** Where the scans run: a reader thread on SQLite (they would hold the event loop), else `x`. */
  readonly #read: SqlReader;
  /** Where a SQLite node's retention deletes run: its writer thread, which also writes the rollups. */
  readonly #writer: Pick<ClickWriter, 'run'> | undefined;
  constructor(x: SqlExecutor, reader?: SqlReader, writer?: Pick<ClickWriter, 'run'>) {
    this.#x = x;
    this.#read = reader ?? x;
    this.#writer = writer;
  }

  #bucket(seconds: number, column = 'created_at'): string {
    if (seconds === 0) return 'NULL';
    return this.#x.dialect === 'sqlite'
      ? `(CAST(strftime('%s', ${column}) AS INTEGER) / ${seconds})`
      : `FLOOR(EXTRACT(EPOCH FROM ${column}) / ${seconds})::bigint`;
  }

  #where(
    spec: ReportSpec,
    table: 'clicks' | 'conversions' | 'report_hours',
  ): { sql: string; params: unknown[] } {
    const f = spec.filter;
    const time = table === 'report_hours' ? 'hour' : 'created_at';
    const parts = [`${time} >= ?`, `${time} < ?`];
    const params: unknown[] = [spec.from, spec.to];
    if (f.flow_id !== undefined) {
      parts.push('flow_id = ?');
      params.push(f.flow_id);
    }
    if (f.stream_id !== undefined) {
      parts.push('stream_id = ?');
      params.push(f.stream_id);
    }
    if (f.country !== undefined) {
      parts.push('country = ?');
      params.push(f.country);
    }
    if (f.is_bot !== undefined) {
      if (table === 'report_hours') parts.push(f.is_bot ? "outcome = 'bot'" : "outcome <> 'bot'");
      else {
        parts.push('is_bot = ?');
        params.push(this.#x.dialect === 'sqlite' ? (f.is_bot ? 1 : 0) : f.is_bot);
      }
    }
    if (f.currency !== undefined) {
      // A click's currency is its flow's, deleted or not (FLOW_CURRENCIES).
      if (table !== 'conversions') {
        parts.push(`flow_id IN (SELECT id FROM ${FLOW_CURRENCIES} AS fc WHERE currency = ?)`);
      } else parts.push('currency = ?');
      params.push(f.currency);
    }
    return { sql: parts.join(' AND '), params };
  }

  async aggregate(spec: ReportSpec): Promise<{ clicks: ReportGroup[]; conversions: ReportGroup[] }> {
    const cols = spec.columns;
    const select = columnsOf(cols);
    const group = groupKey(cols);
    const bucket = this.#bucket(spec.bucketSeconds);
    const clickRows =
      spec.source === 'rollups' ? await this.#fromRollups(spec) : await this.#fromClicks(spec);
    const vw = this.#where(spec, 'conversions');
    const conversionRows = await this.#read.all(
      `SELECT ${bucket} AS bucket${select},
         SUM(CASE WHEN status = 'lead' THEN 1 ELSE 0 END) AS leads,
         SUM(CASE WHEN status = 'sale' THEN 1 ELSE 0 END) AS sales,
         SUM(CASE WHEN status = 'rejected' THEN 1 ELSE 0 END) AS rejected,
         ${sumMicros("CASE WHEN status = 'rejected' THEN 0 ELSE payout_micros END", 'revenue_micros')}
       FROM conversions WHERE ${vw.sql} GROUP BY ${group}`,
      vw.params,
    );
    return {
      clicks: clickRows.map((r) => groupOf(r, cols)),
      conversions: conversionRows.map((r) => groupOf(r, cols)),
    };
  }

  #fromClicks(spec: ReportSpec): Promise<Row[]> {
    const cols = spec.columns;
    const select = columnsOf(cols);
    const cw = this.#where(spec, 'clicks');
    return this.#read.all(
      `SELECT ${this.#bucket(spec.bucketSeconds)} AS bucket${select},
         SUM(CASE WHEN outcome = 'redirect' THEN 1 ELSE 0 END) AS clicks,
         SUM(CASE WHEN outcome = 'redirect' AND is_unique THEN 1 ELSE 0 END) AS uniques,
         SUM(CASE WHEN outcome = 'bot' THEN 1 ELSE 0 END) AS bots,
         SUM(CASE WHEN outcome = 'no_match' THEN 1 ELSE 0 END) AS no_match,
         ${sumMicros('cost_micros', 'cost_micros')}
       FROM clicks WHERE ${cw.sql} GROUP BY ${groupKey(cols)}`,
      cw.params,
    );
  }

  /** The same sums from the hourly rollups ('' in a key column is read back as none). */
  #fromRollups(spec: ReportSpec): Promise<Row[]> {
    const cols = spec.columns;
    const select = columnsOf(cols);
    const w = this.#where(spec, 'report_hours');
    return this.#read.all(
      `SELECT ${this.#bucket(spec.bucketSeconds, 'hour')} AS bucket${select},
         SUM(clicks) AS clicks, SUM(uniques) AS uniques, SUM(bots) AS bots, SUM(no_match) AS no_match,
         ${sumMicros('cost_micros', 'cost_micros')}
       FROM report_hours WHERE ${w.sql} GROUP BY ${groupKey(cols)}`,
      w.params,
    );
  }

  async deleteRollupsBefore(before: string, opts: { signal?: AbortSignal } = {}): Promise<number> {
    if (this.#x.dialect === 'sqlite') return this.#deleteChunks(before, opts.signal);
    let total = 0;
    while (!opts.signal?.aborted) {
      // One hour a statement, along the primary key (hour first): the database works apart from
      // the event loop, and an hour is one short transaction beside the current hour's upserts.
      const [oldest] = await this.#x.all(
        'SELECT hour FROM report_hours WHERE hour < ? ORDER BY hour LIMIT 1',
        [before],
      );
      if (oldest === undefined) break;
      total += await this.#x.run('DELETE FROM report_hours WHERE hour = ?', [oldest.hour]);
      await new Promise<void>((r) => setImmediate(r));
    }
    return total;
  }

  /**
   * SQLite runs in-process: a busy hour (one rollup row per flow, stream, country, device, os,
   * browser, language and outcome in it) deleted in one statement held the loop ~60 ms at 100,000
   * rows. So a chunk a statement, oldest first along the primary key, on the writer thread when
   * the node has one.
   */
  #deleteChunks(before: string, signal: AbortSignal | undefined): Promise<number> {
    return deleteInChunks(
      this.#writer ?? this.#x,
      `DELETE FROM report_hours WHERE rowid IN
         (SELECT rowid FROM report_hours WHERE hour < ? ORDER BY hour LIMIT ?)`,
      [before],
      ROLLUP_DELETE_CHUNK,
      signal,
    );
  }

  /**
   * The currencies of the selection's money. Clicks' money is their flow's currency (a deleted
   * flow's from `deleted_flows`), read off whichever source the report sums.
   */
  async currencies(spec: ReportSpec): Promise<string[]> {
    const table = spec.source === 'rollups' ? 'report_hours' : 'clicks';
    const cw = this.#where(spec, table);
    const vw = this.#where(spec, 'conversions');
    const rows = await this.#read.all(
      `SELECT currency FROM ${FLOW_CURRENCIES} AS f
         WHERE id IN (SELECT DISTINCT flow_id FROM ${table} WHERE ${cw.sql} AND cost_micros > 0)
       UNION
       SELECT DISTINCT currency FROM conversions WHERE ${vw.sql} AND status <> 'rejected' AND payout_micros > 0`,
      [...cw.params, ...vw.params],
    );
    return rows.map((r) => String(r.currency)).sort();
  }
}

/**
 * The grouped columns as every source reads them: '' (an unknown OS or browser in the click log,
 * "none" in a rollup key) is none, so the click log, the conversions and the rollups agree.
 */
const columnsOf = (cols: readonly ReportColumn[]) => cols.map((c) => `, NULLIF(${c}, '') AS ${c}`).join('');
const groupKey = (cols: readonly ReportColumn[]) =>
  ['bucket', ...cols.map((c) => `NULLIF(${c}, '')`)].join(', ');

function groupOf(r: Row, cols: readonly ReportColumn[]): ReportGroup {
  return {
    bucket: r.bucket === null || r.bucket === undefined ? null : toNum(r.bucket),
    values: cols.map((c) => (r[c] === null || r[c] === undefined ? null : String(r[c]))),
    clicks: toNum(r.clicks),
    uniques: toNum(r.uniques),
    bots: toNum(r.bots),
    no_match: toNum(r.no_match),
    cost_micros: microsOf(r, 'cost_micros'),
    leads: toNum(r.leads),
    sales: toNum(r.sales),
    rejected: toNum(r.rejected),
    revenue_micros: microsOf(r, 'revenue_micros'),
  };
}
