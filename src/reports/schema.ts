import { type Static, Type } from '@sinclair/typebox';
import { REPORT_COLUMNS, REPORT_METRICS, type ReportColumn } from '../storage/index.ts';

/** The dimension that groups by a click-log column: the ids are grouped as `flow` and `stream`. */
type DimensionOf<C extends ReportColumn> = C extends 'flow_id'
  ? 'flow'
  : C extends 'stream_id'
    ? 'stream'
    : C;
const dimensionOf = <C extends ReportColumn>(c: C) =>
  (c === 'flow_id' ? 'flow' : c === 'stream_id' ? 'stream' : c) as DimensionOf<C>;

/**
 * Dimensions a report groups by (docs/reports.md): local day and hour, then one per column of the
 * click log a report may group by — the storage's list, so a column added there is a dimension here.
 */
export const DIMENSIONS = ['day', 'hour', ...REPORT_COLUMNS.map(dimensionOf)] as const;
export type Dimension = (typeof DIMENSIONS)[number];
/** The click-log column a dimension groups by; the time dimensions have none. */
export const COLUMN_OF: ReadonlyMap<Dimension, ReportColumn> = new Map(
  REPORT_COLUMNS.map((c) => [dimensionOf(c), c]),
);

/** Metrics of every row and of the totals (docs/reports.md#the-metrics), in the order a CSV lists them. */
export const METRICS = REPORT_METRICS;
export type Metric = (typeof METRICS)[number];

/** The keys a dimension gives a row: `flow` → flow_id and flow_slug, `stream` → stream_id and stream_name. */
export const DIMENSION_KEYS: Record<Dimension, readonly string[]> = Object.fromEntries(
  DIMENSIONS.map((d) => [
    d,
    d === 'flow' ? ['flow_id', 'flow_slug'] : d === 'stream' ? ['stream_id', 'stream_name'] : [d],
  ]),
) as unknown as Record<Dimension, readonly string[]>;

const lit = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)));
const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' });
/** ISO-8601: a date (`2026-11-23`), or a date-time with or without an offset. */
const When = Type.String({
  minLength: 10,
  maxLength: 40,
  pattern: '^\\d{4}-\\d{2}-\\d{2}([T ]\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:?\\d{2})?)?$',
});
/**
 * What `sort.by` takes (a metric or a dimension, docs/reports.md#the-query): a metric, a
 * dimension's name, or one of the keys a dimension gives (`flow` sorts by `flow_slug`, `stream` by
 * `stream_name`; see SORT_ALIASES).
 */
const SORT_KEYS = [
  ...METRICS,
  ...new Set([...DIMENSIONS, ...Object.values(DIMENSION_KEYS).flat()]),
] as string[];
/** The key a dimension whose name is not one of its keys sorts by: the name people read. */
export const SORT_ALIASES: Readonly<Record<string, string>> = { flow: 'flow_slug', stream: 'stream_name' };

/** `POST /acp/reports/query` (docs/reports.md#the-query). */
export const ReportQueryBody = Type.Object(
  {
    from: When,
    to: When,
    group_by: Type.Optional(Type.Array(lit(DIMENSIONS), { maxItems: 3, uniqueItems: true, default: [] })),
    filter: Type.Optional(
      Type.Object(
        {
          flow_id: Type.Optional(Id),
          stream_id: Type.Optional(Id),
          country: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$' })),
          is_bot: Type.Optional(Type.Boolean()),
          currency: Type.Optional(Type.String({ pattern: '^[A-Z]{3}$' })),
        },
        { additionalProperties: false },
      ),
    ),
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, default: 'UTC' })),
    sort: Type.Optional(
      Type.Object(
        { by: lit(SORT_KEYS), order: Type.Optional(lit(['asc', 'desc'] as const)) },
        { additionalProperties: false },
      ),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, default: 1000 })),
    format: Type.Optional(lit(['json', 'csv'] as const)),
    /** Extension: where clicks are summed from; `auto` (default) picks the hourly rollups when they can answer. */
    source: Type.Optional(lit(['auto', 'rollups', 'clicks'] as const)),
  },
  { additionalProperties: false },
);
export type ReportQuery = Static<typeof ReportQueryBody>;
