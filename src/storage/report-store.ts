import { SUB_COLUMNS } from './sub-ids.ts';

/**
 * Click-log columns a report may group by (docs/reports.md); the same names exist on `conversions`. The
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

/**
 * Local time grouping: each bucket's start plus the zone's offset there, counted in local days or
 * hours since 1970-01-01 (the report engine names them `YYYY-MM-DD` and `YYYY-MM-DDTHH:00`).
 */
export interface ReportTime {
  unit: 'day' | 'hour';
  /**
   * The zone's offset (seconds) at each bucket's start, as runs: the first from the range's first
   * bucket, each next one from the instant (ISO, a bucket's start) it takes over.
   */
  offsets: readonly { at: string; seconds: number }[];
}

/** One aggregation over the click log and the conversions, in UTC, by fixed-size time buckets. */
export interface ReportSpec {
  /** UTC instants, ISO-8601; `to` exclusive. */
  from: string;
  to: string;
  columns: readonly ReportColumn[];
  /** Seconds per time bucket (900 or 3600), or 0 for no time grouping. */
  bucketSeconds: number;
  /** How buckets fold into local days or hours; required with a `bucketSeconds`. */
  time?: ReportTime | undefined;
  filter: ReportFilter;
  /**
   * Where clicks are summed from: the hourly rollups (`report_hours`: no sub-id columns, whole UTC
   * hours, hour buckets at most), or the click log itself (any column, any bucket).
   */
  source: 'rollups' | 'clicks';
}

/**
 * The metrics of every report row and of its totals, in the order a CSV lists them; a report sorts
 * by any of them (ratios as the report rounds them: cr and roi to 1e-6, epc to the micro-unit).
 */
export const REPORT_METRICS = [
  'clicks',
  'uniques',
  'bots',
  'no_match',
  'leads',
  'sales',
  'rejected',
  'conversions',
  'revenue',
  'cost',
  'profit',
  'cr',
  'epc',
  'roi',
] as const;
/** What a report's rows are ordered by: a metric, a grouped column, a flow's slug, a stream's name, a local day or hour. */
export type ReportSortKey =
  | (typeof REPORT_METRICS)[number]
  | ReportColumn
  | 'flow_slug'
  | 'stream_name'
  | 'day'
  | 'hour';

/** Which groups of a report come back: the first `limit` in `order` (nulls last in each key). */
export interface ReportPage {
  order: readonly { key: ReportSortKey; desc: boolean }[];
  limit: number;
  /** The database's time for the report, ms: past it `aggregate` rejects with a `QueryTimeout`. */
  timeoutMs?: number | undefined;
}

/** Sums of a group or of the whole report. */
export interface ReportSums {
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

/** A group as the database sums it: its local day or hour, the columns, the names, sums. */
export interface ReportGroup extends ReportSums {
  /** Local days or hours since 1970-01-01 ({@link ReportTime}), null without time grouping. */
  time: number | null;
  values: (string | null)[];
  /** With `flow_id` among the columns: the flow's slug (null once it is deleted). */
  flow_slug: string | null;
  /** With `stream_id` among the columns: the stream's name (null once it is deleted). */
  stream_name: string | null;
}

/** A page of groups, and what the database summed over all of them. */
export interface ReportAnswer {
  groups: ReportGroup[];
  totals: ReportSums;
  /** Groups in the report, before `limit`. */
  total_groups: number;
}

export interface ReportStore {
  /**
   * Clicks and conversions (by the postback's arrival) summed into groups, sorted and cut by the
   * database: only the page's groups come back, whatever the number of groups, with the totals.
   */
  aggregate(spec: ReportSpec, page: ReportPage): Promise<ReportAnswer>;
  /** Currencies with money in the selection: flows with a cost per click that had clicks, conversions paid. */
  currencies(spec: ReportSpec, timeoutMs?: number): Promise<string[]>;
  /**
   * Deletes the hourly rollups of hours before `before` (ISO), an hour at a time, oldest first,
   * stopping between hours when the signal fires; returns the rows deleted.
   */
  deleteRollupsBefore(before: string, opts?: { signal?: AbortSignal }): Promise<number>;
}
