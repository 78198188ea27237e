import type { ClickWriter } from './clicks.ts';
import { isStatementTimeout } from './postgres-executor.ts';
import type {
  ReportAnswer,
  ReportPage,
  ReportSortKey,
  ReportSpec,
  ReportStore,
  ReportSums,
} from './report-store.ts';
import type { Row, SqlExecutor, SqlReader } from './sql.ts';
import { deleteInChunks, microsOf, QueryTimeout, toNum } from './sql.ts';

/** Every flow's currency, the deleted ones' included: the currency of a click's money. */
const FLOW_CURRENCIES =
  '(SELECT id, currency FROM traffic_flows UNION ALL SELECT id, currency FROM deleted_flows)';

/**
 * Reports read the click log (or its hourly rollups) and the conversions directly
 * (docs/reports.md): grouped, merged, sorted and cut by the database in one statement, so only
 * the rows a report shows reach the node; the report engine (src/reports) names local days and
 * hours and adds the formulas.
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

  /**
   * One statement: the rows of each source (the clicks or their hourly rollups, and the
   * conversions) grouped together by the database, named (flows' slugs,
   * streams' names), counted and summed over every group by window functions, then sorted and cut
   * to the page. The node holds the page's groups only: a report grouped by a sub-id of a million
   * distinct values held them all in JavaScript (2–4 GB).
   */
  async aggregate(spec: ReportSpec, page: ReportPage): Promise<ReportAnswer> {
    const cols = spec.columns;
    const params: unknown[] = [];
    // Grouped by a sub-id (visitors choose its values: up to a group a click), the sources' rows
    // go to the report's grouping as they are: grouped first as well, they were grouped
    // twice (1,000,000 sub-ids: 16 s against 6 s on PostgreSQL). Other dimensions have few
    // values, and grouping the table itself first lets the database aggregate it where it lies
    // (day × country over 1,000,000 clicks: 1.3–1.5 s, against 2–4 s through the union).
    const byVisitors = cols.some((c) => c.startsWith('sub'));
    const clickScan = this.#scan(
      spec,
      spec.source === 'rollups' ? 'report_hours' : 'clicks',
      !byVisitors,
      params,
    );
    const conversionScan = this.#scan(spec, 'conversions', !byVisitors, params);
    const keys = ['t', ...cols];
    const flows = cols.includes('flow_id');
    const streams = cols.includes('stream_id');
    const totals = SUMS.map((m) =>
      MONEY_PARTS.includes(m)
        ? `CAST(SUM(g.${m}) OVER () AS TEXT) AS all_${m}`
        : `SUM(g.${m}) OVER () AS all_${m}`,
    );
    const order = page.order.map(
      ({ key, desc }) => `${this.#sortExpr(key, spec)} ${desc ? 'DESC' : 'ASC'} NULLS LAST`,
    );
    params.push(page.limit);
    const sql = `SELECT ${keys.map((k) => `g.${k}`).join(', ')}${flows ? ', f.slug AS flow_slug' : ''}${streams ? ', s.name AS stream_name' : ''},
         ${SUMS.map((m) => (MONEY_PARTS.includes(m) ? `CAST(g.${m} AS TEXT) AS ${m}` : `g.${m}`)).join(', ')},
         COUNT(*) OVER () AS total_groups, ${totals.join(', ')}
       FROM (
         SELECT ${keys.join(', ')}, ${SUMS.map((m) => `SUM(${m}) AS ${m}`).join(', ')}
         FROM (${clickScan} UNION ALL ${conversionScan}) AS u
         GROUP BY ${keys.join(', ')}
       ) AS g${flows ? ' LEFT JOIN traffic_flows AS f ON f.id = g.flow_id' : ''}${streams ? ' LEFT JOIN streams AS s ON s.id = g.stream_id' : ''}
       WHERE ${BUDGET}
       ORDER BY ${order.length === 0 ? keys.map((k) => `g.${k}`).join(', ') : order.join(', ')}
       LIMIT ?`;
    const rows = await this.#budgeted(sql, params, page.timeoutMs);
    const first = rows[0];
    return {
      groups: rows.map((r) => ({
        time: spec.time === undefined || r.t === null || r.t === undefined ? null : toNum(r.t),
        values: cols.map((c) => (r[c] === null || r[c] === undefined ? null : String(r[c]))),
        flow_slug: r.flow_slug === null || r.flow_slug === undefined ? null : String(r.flow_slug),
        stream_name: r.stream_name === null || r.stream_name === undefined ? null : String(r.stream_name),
        ...sumsOf(r, ''),
      })),
      totals: first === undefined ? sumsOf({}, 'all_') : sumsOf(first, 'all_'),
      total_groups: first === undefined ? 0 : toNum(first.total_groups),
    };
  }

  /**
   * One source in the report's keys: `t` (the local day or hour, 0 without), the columns ('' read
   * as none, so the click log, the conversions and the rollups agree), then {@link SUMS}; grouped
   * by the keys when `grouped`, else row by row for the report's grouping to sum.
   */
  #scan(
    spec: ReportSpec,
    table: 'clicks' | 'report_hours' | 'conversions',
    grouped: boolean,
    params: unknown[],
  ): string {
    const t = this.#timeKey(spec, table === 'report_hours' ? 'hour' : 'created_at', params);
    const w = this.#where(spec, table);
    params.push(...w.params);
    const cols = spec.columns.map((c) => `, NULLIF(${c}, '') AS ${c}`).join('');
    const sums = SOURCE_SUMS[table]
      .map((e, i) => `${grouped && e !== '0' ? `SUM(${e})` : e} AS ${SUMS[i]}`)
      .join(', ');
    const groupBy = grouped ? ` GROUP BY ${['1', ...spec.columns.map((_, i) => `${i + 2}`)].join(', ')}` : '';
    return `SELECT ${t} AS t${cols}, ${sums} FROM ${table} WHERE ${w.sql} AND ${BUDGET}${groupBy}`;
  }

  /**
   * The local day or hour of a row: its bucket's start plus the zone's offset at that start (a
   * CASE over the offset's runs), in local days or hours since 1970-01-01.
   */
  #timeKey(spec: ReportSpec, column: string, params: unknown[]): string {
    if (spec.bucketSeconds === 0 || spec.time === undefined) return '0';
    const runs = spec.time.offsets;
    let offset = 'CAST(? AS INTEGER)';
    if (runs.length > 1) {
      const whens = runs.slice(1).map((r, i) => {
        params.push(r.at, runs[i]!.seconds);
        return `WHEN ${column} < ? THEN CAST(? AS INTEGER)`;
      });
      offset = `CASE ${whens.join(' ')} ELSE CAST(? AS INTEGER) END`;
    }
    params.push(runs.at(-1)!.seconds);
    const unit = spec.time.unit === 'day' ? 86_400 : 3600;
    return `((${this.#bucket(spec.bucketSeconds, column)}) * ${spec.bucketSeconds} + ${offset}) / ${unit}`;
  }

  /**
   * A sort key as the report shows it: ratios rounded as `metricsOf` rounds them (half up), so
   * rows whose shown figures tie are ordered by their dimensions, as they were in JavaScript;
   * text in code-point order (PostgreSQL's "C" collation, SQLite's binary one), on both backends.
   */
  #sortExpr(key: ReportSortKey, spec: ReportSpec): string {
    const real = (e: string) => `CAST(${e} AS ${this.#x.dialect === 'sqlite' ? 'REAL' : 'DOUBLE PRECISION'})`;
    const text = (e: string) => (this.#x.dialect === 'postgres' ? `${e} COLLATE "C"` : e);
    const revenue = `(${real('g.revenue_units')} * 1000000 + g.revenue_rest)`;
    const cost = `(${real('g.cost_units')} * 1000000 + g.cost_rest)`;
    const round = (e: string) => `FLOOR(${e} + 0.5)`;
    switch (key) {
      case 'clicks':
      case 'uniques':
      case 'bots':
      case 'no_match':
      case 'leads':
      case 'sales':
      case 'rejected':
        return `g.${key}`;
      case 'conversions':
        return '(g.leads + g.sales)';
      case 'revenue':
        return revenue;
      case 'cost':
        return cost;
      case 'profit':
        return `(${revenue} - ${cost})`;
      case 'cr':
        return `CASE WHEN g.clicks = 0 THEN NULL ELSE ${round(`${real('g.leads + g.sales')} / g.clicks * 1000000`)} END`;
      case 'epc':
        return `CASE WHEN g.clicks = 0 THEN NULL ELSE ${round(`${revenue} / g.clicks`)} END`;
      case 'roi':
        return `CASE WHEN ${cost} = 0 THEN NULL ELSE ${round(`(${revenue} - ${cost}) / ${cost} * 1000000`)} END`;
      case 'day':
        if (spec.time === undefined) break;
        return spec.time.unit === 'hour' ? 'g.t / 24' : 'g.t';
      case 'hour':
        if (spec.time?.unit !== 'hour') break;
        return 'g.t';
      case 'flow_slug':
        if (!spec.columns.includes('flow_id')) break;
        return text('f.slug');
      case 'stream_name':
        if (!spec.columns.includes('stream_id')) break;
        return text('s.name');
      default:
        if (!spec.columns.includes(key)) break;
        return text(`g.${key}`);
    }
    throw new Error(`a report grouped by ${spec.columns.join(', ') || 'nothing'} cannot sort by ${key}`);
  }

  /**
   * A report's read, with its time budget when it has one: on PostgreSQL the transaction's
   * `statement_timeout`; on SQLite the reader thread's clock, read by `sluice_in_budget()` as the
   * statement scans (an in-memory database, which has no reader thread, reads without one). Past
   * it: {@link QueryTimeout}. PostgreSQL also reads without JIT: it cannot know how many groups a
   * report makes, guesses too many, and compiled a day × country report for 1.4 s that ran in 1.2 s.
   */
  async #budgeted(sql: string, params: readonly unknown[], budgetMs: number | undefined): Promise<Row[]> {
    if (this.#x.dialect === 'postgres') {
      const text = sql.replaceAll(BUDGET, '1 = 1');
      // Without a budget the role's own statement_timeout, if any, stays.
      const settings =
        budgetMs === undefined
          ? "SELECT set_config('jit', 'off', true)"
          : `SELECT set_config('jit', 'off', true), set_config('statement_timeout', '${Math.max(1, Math.floor(budgetMs))}', true)`;
      try {
        return await this.#x.transaction(async (tx) => {
          await tx.all(settings);
          return tx.all(text, params);
        });
      } catch (err) {
        if (budgetMs !== undefined && isStatementTimeout(err)) throw new QueryTimeout(budgetMs);
        throw err;
      }
    }
    if (budgetMs !== undefined && this.#read.allWithin !== undefined)
      return this.#read.allWithin(budgetMs, sql.replaceAll(BUDGET, 'sluice_in_budget()'), params);
    return this.#read.all(sql.replaceAll(BUDGET, '1 = 1'), params);
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
  async currencies(spec: ReportSpec, timeoutMs?: number): Promise<string[]> {
    const table = spec.source === 'rollups' ? 'report_hours' : 'clicks';
    const cw = this.#where(spec, table);
    const vw = this.#where(spec, 'conversions');
    const rows = await this.#budgeted(
      `SELECT currency FROM ${FLOW_CURRENCIES} AS f
         WHERE id IN (SELECT DISTINCT flow_id FROM ${table} WHERE ${cw.sql} AND cost_micros > 0 AND ${BUDGET})
       UNION
       SELECT DISTINCT currency FROM conversions
         WHERE ${vw.sql} AND status <> 'rejected' AND payout_micros > 0 AND ${BUDGET}`,
      [...cw.params, ...vw.params],
      timeoutMs,
    );
    return rows.map((r) => String(r.currency)).sort();
  }
}

/** Where a budgeted statement checks its clock ({@link SqlReports} `#budgeted`). */
const BUDGET = '/* budget */ 1 = 1';

/** The sums every source gives, in this order (money as whole units and the rest: see `sumMicros`). */
const SUMS = [
  'clicks',
  'uniques',
  'bots',
  'no_match',
  'leads',
  'sales',
  'rejected',
  'cost_units',
  'cost_rest',
  'revenue_units',
  'revenue_rest',
] as const;
const MONEY_PARTS: readonly string[] = ['cost_units', 'cost_rest', 'revenue_units', 'revenue_rest'];

const REVENUE = "CASE WHEN status = 'rejected' THEN 0 ELSE payout_micros END";
/** Each of {@link SUMS} for one row of each source, in that order. */
const SOURCE_SUMS: Record<'clicks' | 'report_hours' | 'conversions', readonly string[]> = {
  clicks: [
    "CASE WHEN outcome = 'redirect' THEN 1 ELSE 0 END",
    "CASE WHEN outcome = 'redirect' AND is_unique THEN 1 ELSE 0 END",
    "CASE WHEN outcome = 'bot' THEN 1 ELSE 0 END",
    "CASE WHEN outcome = 'no_match' THEN 1 ELSE 0 END",
    '0',
    '0',
    '0',
    'cost_micros / 1000000',
    'cost_micros % 1000000',
    '0',
    '0',
  ],
  report_hours: [
    'clicks',
    'uniques',
    'bots',
    'no_match',
    '0',
    '0',
    '0',
    'cost_micros / 1000000',
    'cost_micros % 1000000',
    '0',
    '0',
  ],
  conversions: [
    '0',
    '0',
    '0',
    '0',
    "CASE WHEN status = 'lead' THEN 1 ELSE 0 END",
    "CASE WHEN status = 'sale' THEN 1 ELSE 0 END",
    "CASE WHEN status = 'rejected' THEN 1 ELSE 0 END",
    '0',
    '0',
    `(${REVENUE}) / 1000000`,
    `(${REVENUE}) % 1000000`,
  ],
};

/** The sums of a row, read from the columns named `<prefix><sum>`. */
function sumsOf(r: Row, prefix: string): ReportSums {
  return {
    clicks: toNum(r[`${prefix}clicks`]),
    uniques: toNum(r[`${prefix}uniques`]),
    bots: toNum(r[`${prefix}bots`]),
    no_match: toNum(r[`${prefix}no_match`]),
    cost_micros: microsOf(r, `${prefix}cost`),
    leads: toNum(r[`${prefix}leads`]),
    sales: toNum(r[`${prefix}sales`]),
    rejected: toNum(r[`${prefix}rejected`]),
    revenue_micros: microsOf(r, `${prefix}revenue`),
  };
}
