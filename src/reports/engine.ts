import { ApiError } from '../errors/index.ts';
import {
  fromMicrosSum,
  MICROS,
  type ReportColumn,
  type ReportGroup,
  type ReportSpec,
  ROLLUP_COLUMNS,
  type Storage,
} from '../storage/index.ts';
import { canonicalTimeZone, TIME_ZONE_EXPECTED } from '../time/index.ts';
import {
  DIMENSION_KEYS,
  type Dimension,
  METRICS,
  type Metric,
  type ReportQuery,
  SORT_ALIASES,
} from './schema.ts';
import { localLabels, offsetAt, parseWhen } from './zoned-time.ts';

/** A report row: its dimension keys, then the metrics of §15. */
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
  /** Rows before `limit` cut them. */
  total_rows: number;
  /** Where clicks were summed from: `rollups` (hourly sums) or `clicks` (the click log). */
  source: 'rollups' | 'clicks';
}

/** Days longer than this are refused: a report is a scan of the range. */
const MAX_RANGE_DAYS = 400;
const COLUMN_OF: Partial<Record<Dimension, ReportColumn>> = {
  flow: 'flow_id',
  stream: 'stream_id',
  country: 'country',
  device_type: 'device_type',
  os: 'os',
  browser: 'browser',
  language: 'language',
  sub1: 'sub1',
  sub2: 'sub2',
  sub3: 'sub3',
  sub4: 'sub4',
  sub5: 'sub5',
  sub6: 'sub6',
  sub7: 'sub7',
  sub8: 'sub8',
  sub9: 'sub9',
  sub10: 'sub10',
  outcome: 'outcome',
};

const invalid = (path: string, message: string) =>
  new ApiError('validation.invalid_input', `${path}: ${message}`, { details: [{ path, message }] });

interface Sums {
  clicks: number;
  uniques: number;
  bots: number;
  no_match: number;
  leads: number;
  sales: number;
  rejected: number;
  revenue_micros: bigint;
  cost_micros: bigint;
}
const zero = (): Sums => ({
  clicks: 0,
  uniques: 0,
  bots: 0,
  no_match: 0,
  leads: 0,
  sales: 0,
  rejected: 0,
  revenue_micros: 0n,
  cost_micros: 0n,
});
function add(into: Sums, g: ReportGroup): void {
  into.clicks += g.clicks;
  into.uniques += g.uniques;
  into.bots += g.bots;
  into.no_match += g.no_match;
  into.leads += g.leads;
  into.sales += g.sales;
  into.rejected += g.rejected;
  into.revenue_micros += g.revenue_micros;
  into.cost_micros += g.cost_micros;
}

/** Ratios to six decimals: the JSON and the CSV carry the same figure. */
const ratio = (a: number, b: number) => (b === 0 ? null : Math.round((a / b) * 1e6) / 1e6);

/**
 * The metrics of §15 from sums; a ratio whose denominator is 0 is null, and so is every money
 * figure when `mixed` (the sums hold money in several currencies, which are never added up).
 */
export function metricsOf(s: Sums, mixed = false): Record<Metric, number | null> {
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
  dims: Dimension[];
  timeDim: 'day' | 'hour' | undefined;
  bucketSeconds: number;
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
  const columns = dims.map((d) => COLUMN_OF[d]!);
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
    filter: q.filter ?? {},
    source,
  };
  return { spec, tz, groupBy, dims, timeDim, bucketSeconds, source };
}

/**
 * The currencies the money of a report's selection is in (filter.currency aside), sorted: what a
 * client asks first when it lets a person pick one (the console), since a report whose money is in
 * several adds none of it up (its money figures are null).
 */
export async function reportCurrencies(storage: Storage, q: ReportQuery): Promise<string[]> {
  const { spec } = planReport(q);
  const { currency: _currency, ...filter } = spec.filter;
  return storage.reports.currencies({ ...spec, filter });
}

/** What a report needs to know of the click log beside the query: how far back it holds clicks. */
export interface ClickLogReach {
  /** `clicks.retention_days`. */
  retentionDays: number;
  /** Now, epoch ms (the injected clock). */
  now: number;
}

/**
 * The report engine (§15): validates the query, has storage sum the click log and the conversions
 * by UTC buckets and the asked columns, folds buckets into the report zone's days or hours, names
 * flows and streams, adds the formulas, sorts and cuts. Clicks count at their time, conversions at
 * the postback's arrival (§12), each with the dimensions of its click.
 */
export async function runReport(storage: Storage, q: ReportQuery, reach?: ClickLogReach): Promise<Report> {
  const plan = planReport(q);
  const { tz, groupBy, dims, timeDim, bucketSeconds, source } = plan;
  const spec = source === 'clicks' && reach !== undefined ? withinClickLog(q, plan.spec, reach) : plan.spec;
  // Money in several currencies is never added up: such a report still counts clicks and
  // conversions, with every money figure null, and names the currencies (filter.currency narrows
  // it to one). Refusing it instead answered nothing at all to a question the contract allows.
  const currencies = await storage.reports.currencies(spec);
  const mixed = currencies.length > 1;
  const currency = mixed ? null : (q.filter?.currency ?? currencies[0] ?? null);

  const { clicks, conversions } = await storage.reports.aggregate(spec);
  const labels = new Map<number, { day: string; hour: string }>();
  const groups = new Map<string, { time: string | null; values: (string | null)[]; sums: Sums }>();
  const totals = zero();
  for (const g of [...clicks, ...conversions]) {
    let time: string | null = null;
    if (timeDim !== undefined && g.bucket !== null) {
      let l = labels.get(g.bucket);
      if (l === undefined) {
        l = localLabels(g.bucket * bucketSeconds * 1000, tz);
        labels.set(g.bucket, l);
      }
      time = l[timeDim];
    }
    const key = JSON.stringify([time, g.values]);
    let entry = groups.get(key);
    if (entry === undefined) {
      entry = { time, values: g.values, sums: zero() };
      groups.set(key, entry);
    }
    add(entry.sums, g);
    add(totals, g);
  }

  const names = await nameFlowsAndStreams(
    storage,
    dims,
    [...groups.values()].map((e) => e.values),
  );
  const rows: ReportRow[] = [];
  for (const e of groups.values()) {
    const row: ReportRow = {};
    let i = 0;
    for (const d of groupBy) {
      if (d === 'day' || d === 'hour') {
        // Both asked: the hour's day is its first ten characters.
        row[d] = d === timeDim ? e.time : (e.time?.slice(0, 10) ?? null);
        continue;
      }
      const v = e.values[i++] ?? null;
      if (d === 'flow') {
        row.flow_id = v;
        row.flow_slug = v === null ? null : (names.flows.get(v) ?? null);
      } else if (d === 'stream') {
        row.stream_id = v;
        row.stream_name = v === null ? null : (names.streams.get(v) ?? null);
      } else row[d] = v;
    }
    Object.assign(row, metricsOf(e.sums, mixed));
    rows.push(row);
  }
  sortRows(rows, q, groupBy);
  return {
    rows: rows.slice(0, q.limit ?? 1000),
    totals: metricsOf(totals, mixed),
    from: spec.from,
    to: spec.to,
    timezone: tz,
    currency,
    currencies,
    total_rows: rows.length,
    source,
  };
}

async function nameFlowsAndStreams(storage: Storage, dims: Dimension[], values: (string | null)[][]) {
  const flows = new Map<string, string>();
  const streams = new Map<string, string>();
  const fi = dims.indexOf('flow');
  const si = dims.indexOf('stream');
  const ids = (i: number) => [...new Set(values.map((v) => v[i]).filter((v): v is string => v !== null))];
  if (fi !== -1)
    for (const id of ids(fi)) {
      const f = await storage.flows.get(id);
      if (f) flows.set(id, f.slug);
    }
  if (si !== -1)
    for (const id of ids(si)) {
      const s = await storage.streams.get(id);
      if (s) streams.set(id, s.name);
    }
  return { flows, streams };
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

/** By `sort`, else by the time dimension ascending, else by clicks descending; ties by every key. */
function sortRows(rows: ReportRow[], q: ReportQuery, groupBy: readonly Dimension[]): void {
  const keys = groupBy.flatMap((d) => DIMENSION_KEYS[d]);
  const time = groupBy.find((d) => d === 'day' || d === 'hour');
  const asked = q.sort?.by;
  const by = asked === undefined ? (time ?? 'clicks') : (SORT_ALIASES[asked] ?? asked);
  const order = q.sort?.order ?? (q.sort === undefined && time === undefined ? 'desc' : 'asc');
  const sign = order === 'asc' ? 1 : -1;
  const cmp = (a: string | number | null | undefined, b: string | number | null | undefined, dir: number) => {
    if (a === b) return 0;
    // Nulls last whichever the order.
    if (a === null || a === undefined) return 1;
    if (b === null || b === undefined) return -1;
    return (a < b ? -1 : 1) * dir;
  };
  rows.sort((x, y) => {
    const c = cmp(x[by], y[by], sign);
    if (c !== 0) return c;
    // Ties in dimension order, ascending: the same report always lists its rows the same way.
    for (const k of keys) {
      const t = cmp(x[k], y[k], 1);
      if (t !== 0) return t;
    }
    return 0;
  });
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
