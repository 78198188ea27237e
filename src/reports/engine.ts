import { ApiError } from '../errors/index.ts';
import {
  fromMicrosSum,
  MICROS,
  QueryTimeout,
  type ReportPage,
  type ReportSortKey,
  type ReportSpec,
  type ReportSums,
  ROLLUP_COLUMNS,
  type Storage,
} from '../storage/index.ts';
import { canonicalTimeZone, TIME_ZONE_EXPECTED } from '../time/index.ts';
import {
  COLUMN_OF,
  DIMENSION_KEYS,
  type Dimension,
  METRICS,
  type Metric,
  type ReportQuery,
  SORT_ALIASES,
} from './schema.ts';
import { offsetAt, offsetRuns, parseWhen } from './zoned-time.ts';

/** A report row: its dimension keys, then the metrics (docs/reports.md#the-metrics). */
export type ReportRow = Record<string, string | number | null>;

export interface Report {
  rows: ReportRow[];
  totals: Record<Metric, number | null>;
  from: string;
  to: string;
  timezone: string;
  /**
   * The one currency of the money in it (revenue, cost, profit, epc, roi), or null when there is
   * none or several (then every money figure is null: money in several currencies is never added up).
   */
  currency: string | null;
  /** Extension: the currencies the selection's money is in (two or more: its money figures are null). */
  currencies: string[];
  /** Rows before they were cut (see `truncated`). */
  total_rows: number;
  /**
   * Whether rows were cut off, by `limit` or by `reports.max_rows` (`total_rows` says how many there
   * were; `totals` count them all).
   */
  truncated: boolean;
  /** Where clicks were summed from: `rollups` (hourly sums) or `clicks` (the click log). */
  source: 'rollups' | 'clicks';
}

/** Days longer than this are refused: a report is a scan of the range. */
const MAX_RANGE_DAYS = 400;

const invalid = (path: string, message: string) =>
  new ApiError('validation.invalid_input', `${path}: ${message}`, { details: [{ path, message }] });

/** Ratios to six decimals: the JSON and the CSV carry the same figure. */
const ratio = (a: number, b: number) => (b === 0 ? null : Math.round((a / b) * 1e6) / 1e6);

/**
 * The metrics (docs/reports.md#the-metrics) from sums; a ratio whose denominator is 0 is null, and
 * so is every money figure when `mixed` (the sums hold money in several currencies, which are never
 * added up).
 */
export function metricsOf(s: ReportSums, mixed = false): Record<Metric, number | null> {
  const conversions = s.leads + s.sales;
  const profit = s.revenue_micros - s.cost_micros;
  return {
    clicks: s.clicks,
    uniques: s.uniques,
    bots: s.bots,
    no_match: s.no_match,
    leads: s.leads,
    sales: s.sales,
    rejected: s.rejected,
    conversions,
    // Money summed exactly in micro-units, shown as the number nearest the exact decimal.
    revenue: fromMicrosSum(s.revenue_micros),
    cost: fromMicrosSum(s.cost_micros),
    profit: fromMicrosSum(profit),
    cr: ratio(conversions, s.clicks),
    epc: s.clicks === 0 ? null : Math.round(Number(s.revenue_micros) / s.clicks) / MICROS,
    roi: ratio(Number(profit), Number(s.cost_micros)),
    ...(mixed ? { revenue: null, cost: null, profit: null, epc: null, roi: null } : {}),
  };
}

/** What a report query asks, validated: the storage spec and what the engine folds it by. */
interface ReportPlan {
  spec: ReportSpec;
  tz: string;
  groupBy: readonly Dimension[];
  timeDim: 'day' | 'hour' | undefined;
  source: ReportSpec['source'];
}

function planReport(q: ReportQuery): ReportPlan {
  const tz = canonicalTimeZone(q.timezone ?? 'UTC');
  if (tz === undefined) throw invalid('/timezone', `"${q.timezone}" ${TIME_ZONE_EXPECTED}`);
  const from = parseWhen(q.from, tz);
  const to = parseWhen(q.to, tz);
  if (Number.isNaN(from)) throw invalid('/from', `"${q.from}" is not an ISO-8601 date or date-time`);
  if (Number.isNaN(to)) throw invalid('/to', `"${q.to}" is not an ISO-8601 date or date-time`);
  if (to <= from) throw invalid('/to', 'must be after from (to is exclusive)');
  if (to - from > MAX_RANGE_DAYS * 86_400_000)
    throw invalid('/to', `a report spans at most ${MAX_RANGE_DAYS} days`);
  const groupBy = q.group_by ?? [];
  const sortBy = q.sort?.by;
  if (sortBy !== undefined && !(METRICS as readonly string[]).includes(sortBy)) {
    const sortable = groupBy.flatMap((d) => [d, ...DIMENSION_KEYS[d]]);
    if (!sortable.includes(sortBy))
      throw invalid(
        '/sort/by',
        `"${sortBy}" is not a dimension of this report (group_by: ${groupBy.length === 0 ? 'none' : groupBy.join(', ')}): sort by a metric or a grouped dimension`,
      );
  }
  const timeDim = groupBy.includes('hour') ? 'hour' : groupBy.includes('day') ? 'day' : undefined;
  // Hour buckets in UTC fold exactly into local days and hours when the zone's offsets are whole
  // hours over the range; a zone such as Asia/Kolkata (+05:30) gets quarter-hour buckets.
  const wholeHours = [from, to, (from + to) / 2].every((t) => offsetAt(t, tz) % 3_600_000 === 0);
  const bucketSeconds = timeDim === undefined ? 0 : wholeHours ? 3600 : 900;
  const dims = groupBy.filter((d) => d !== 'day' && d !== 'hour');
  // Every dimension but day and hour is a column's.
  const columns = dims.map((d) => COLUMN_OF.get(d)!);
  // The hourly rollups answer whatever needs no sub-id, no quarter-hour bucket and no partial
  // hour; the rest scans the click log. Both give the same figures (a test holds them equal).
  const rollupable =
    columns.every((c) => (ROLLUP_COLUMNS as readonly string[]).includes(c)) &&
    bucketSeconds !== 900 &&
    from % 3_600_000 === 0 &&
    to % 3_600_000 === 0;
  if (q.source === 'rollups' && !rollupable)
    throw invalid(
      '/source',
      'the hourly rollups hold no sub-ids and whole UTC hours only: group by no sub-id, in a zone of whole-hour offsets, from and to on the hour',
    );
  const source: ReportSpec['source'] = q.source === 'clicks' || !rollupable ? 'clicks' : 'rollups';
  const spec: ReportSpec = {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    columns,
    bucketSeconds,
    time:
      timeDim === undefined
        ? undefined
        : {
            unit: timeDim,
            offsets: offsetRuns(from, to, bucketSeconds * 1000, tz).map((r) => ({
              at: new Date(r.at).toISOString(),
              seconds: r.seconds,
            })),
          },
    filter: q.filter ?? {},
    source,
  };
  return { spec, tz, groupBy, timeDim, source };
}

/**
 * The currencies the money of a report's selection is in (filter.currency aside), sorted: what a
 * client asks first when it lets a person pick one (the console), since a report whose money is in
 * several adds none of it up (its money figures are null).
 */
export async function reportCurrencies(
  storage: Storage,
  q: ReportQuery,
  bounds: ReportBounds = {},
): Promise<string[]> {
  const { spec } = planReport(q);
  const { currency: _currency, ...filter } = spec.filter;
  return withinBudget(() => storage.reports.currencies({ ...spec, filter }, bounds.timeoutMs));
}

/** What a report needs to know of the click log beside the query: how far back it holds clicks. */
export interface ClickLogReach {
  /** `clicks.retention_days`. */
  retentionDays: number;
  /** Now, epoch ms (the injected clock). */
  now: number;
}

/** What one report may cost the node (docs/reports.md#bounds); none given: unbounded. */
export interface ReportBounds {
  /** `reports.query_timeout_ms`: the database's time for it, past which it is refused. */
  timeoutMs?: number | undefined;
  /** `reports.max_rows`: rows it answers at most, whatever its `limit` (then `truncated: true`). */
  maxRows?: number | undefined;
}

/**
 * The report engine (docs/reports.md): validates the query; has storage sum the click log (or its
 * hourly rollups) and the conversions into the report's groups (local days or hours and the asked
 * columns), sort them and cut them to `limit` (and `bounds.maxRows`), so the node holds the rows
 * it answers and no more whatever the number of groups; then adds the formulas. Clicks count at
 * their time, conversions at the postback's arrival, each with the dimensions of its click.
 */
export async function runReport(
  storage: Storage,
  q: ReportQuery,
  reach?: ClickLogReach,
  bounds: ReportBounds = {},
): Promise<Report> {
  const plan = planReport(q);
  const { tz, groupBy, timeDim, source } = plan;
  const spec = source === 'clicks' && reach !== undefined ? withinClickLog(q, plan.spec, reach) : plan.spec;
  // Money in several currencies is never added up: such a report still counts clicks and
  // conversions, with every money figure null, and names the currencies (filter.currency narrows
  // it to one). Refusing it instead answered nothing at all to a question the contract allows.
  const { timeoutMs, maxRows } = bounds;
  const currencies = await withinBudget(() => storage.reports.currencies(spec, timeoutMs));
  const mixed = currencies.length > 1;
  const currency = mixed ? null : (q.filter?.currency ?? currencies[0] ?? null);

  const limit = Math.min(q.limit ?? 1000, maxRows ?? Number.POSITIVE_INFINITY);
  const answer = await withinBudget(() =>
    storage.reports.aggregate(spec, { order: orderOf(q, groupBy, mixed), limit, timeoutMs }),
  );
  const rows: ReportRow[] = answer.groups.map((g) => {
    const row: ReportRow = {};
    const time = g.time === null || timeDim === undefined ? null : timeLabel(g.time, timeDim);
    let i = 0;
    for (const d of groupBy) {
      if (d === 'day' || d === 'hour') {
        // Both asked: the hour's day is its first ten characters.
        row[d] = d === timeDim ? time : (time?.slice(0, 10) ?? null);
        continue;
      }
      const v = g.values[i++] ?? null;
      if (d === 'flow') {
        row.flow_id = v;
        row.flow_slug = g.flow_slug;
      } else if (d === 'stream') {
        row.stream_id = v;
        row.stream_name = g.stream_name;
      } else row[d] = v;
    }
    Object.assign(row, metricsOf(g, mixed));
    return row;
  });
  return {
    rows,
    totals: metricsOf(answer.totals, mixed),
    from: spec.from,
    to: spec.to,
    timezone: tz,
    currency,
    currencies,
    total_rows: answer.total_groups,
    truncated: answer.total_groups > rows.length,
    source,
  };
}

/** A local day or hour (days or hours since 1970-01-01 in the report's zone) as the rows name it. */
function timeLabel(t: number, unit: 'day' | 'hour'): string {
  const iso = new Date(t * (unit === 'day' ? 86_400_000 : 3_600_000)).toISOString();
  return unit === 'day' ? iso.slice(0, 10) : `${iso.slice(0, 13)}:00`;
}

/** The database's time for a report ran out: refused, saying what makes a report cheaper. */
async function withinBudget<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!(err instanceof QueryTimeout)) throw err;
    const message = `the report took longer than reports.query_timeout_ms (${err.budgetMs} ms): narrow from and to, add a filter, or group by fewer distinct values`;
    throw new ApiError('validation.invalid_input', message, { details: [{ path: '', message }], cause: err });
  }
}

/**
 * A report read from the click log cannot reach back past `clicks.retention_days`: the clicks are
 * deleted there while their conversions stay, so such a report would show revenue with no clicks
 * and no cost. A `from` up to a day older than the cutoff (a "last 30 days" from a local midnight
 * across a change of clocks, a browser's clock a little behind) is moved to the cutoff, which the
 * answer's `from` then says; an older one is refused, saying why this report needs the click log
 * and what reaches further back.
 */
function withinClickLog(q: ReportQuery, spec: ReportSpec, reach: ClickLogReach): ReportSpec {
  const cutoff = reach.now - reach.retentionDays * 86_400_000;
  const from = Date.parse(spec.from);
  if (from >= cutoff) return spec;
  if (from >= cutoff - 86_400_000) return { ...spec, from: new Date(cutoff).toISOString() };
  const why =
    q.source === 'clicks'
      ? 'source: clicks'
      : (q.group_by ?? []).some((d) => d.startsWith('sub'))
        ? 'it groups by a sub-id'
        : 'its zone or range is not on whole UTC hours';
  throw invalid(
    '/from',
    `this report reads the click log (${why}), which keeps clicks for clicks.retention_days (${reach.retentionDays}): from must be on or after ${new Date(cutoff).toISOString()}; the hourly rollups reach further back for reports without sub-ids, by whole UTC hours`,
  );
}

/** Money figures: all null in a report whose money is in several currencies. */
const MONEY_METRICS: readonly string[] = ['revenue', 'cost', 'profit', 'epc', 'roi'];

/**
 * By `sort`, else by the time dimension ascending, else by clicks descending; nulls last whichever
 * the order; ties by every key of the dimensions in order, ascending, so the same report always
 * lists its rows the same way. The database sorts (see `ReportStore.aggregate`).
 */
function orderOf(q: ReportQuery, groupBy: readonly Dimension[], mixed: boolean): ReportPage['order'] {
  const keys = groupBy.flatMap((d) => DIMENSION_KEYS[d]) as ReportSortKey[];
  const time = groupBy.find((d) => d === 'day' || d === 'hour');
  const asked = q.sort?.by;
  const by = (asked === undefined ? (time ?? 'clicks') : (SORT_ALIASES[asked] ?? asked)) as ReportSortKey;
  const order = q.sort?.order ?? (q.sort === undefined && time === undefined ? 'desc' : 'asc');
  // Money that is null in every row orders nothing: the ties decide.
  const primary = mixed && MONEY_METRICS.includes(by) ? [] : [{ key: by, desc: order === 'desc' }];
  return [...primary, ...keys.map((key) => ({ key, desc: false }))];
}

/** The report as CSV (RFC 4180): a header row, then the rows; numbers as in the JSON, null empty. */
export function reportCsv(report: Report, groupBy: readonly Dimension[]): string {
  const header = [...groupBy.flatMap((d) => DIMENSION_KEYS[d]), ...METRICS];
  const cell = (v: unknown) => {
    if (v === null || v === undefined) return '';
    const s = String(v);
    // A text cell a spreadsheet would run as a formula is quoted and prefixed (sub-ids are
    // visitor-supplied); numbers are written as they are.
    if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) return `"'${s.replace(/"/g, '""')}"`;
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  const lines = [header.join(',')];
  for (const r of report.rows) lines.push(header.map((h) => cell(r[h])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
