import { type Static, type TObject, Type } from '@sinclair/typebox';
import { Text } from '../config/index.ts';
import { FLOW_SORT_KEYS, ID_PATTERN, INT4_MAX, STREAM_SORT_KEYS } from '../storage/index.ts';
import { FLOW_LIMITS } from './limits.ts';
import { SLUG_PATTERN } from './validation.ts';

/**
 * ACP body schemas for flows and streams (docs/routing.md). Types, ranges and the sizes of lists
 * ({@link FLOW_LIMITS}) are checked here, by fastify before the handler runs; what JSON Schema
 * cannot say (URL macros, country codes, the limits of a whole flow) is checked by the service. Every value is one both backends store: text without control characters (U+0000
 * would fail on PostgreSQL only), integers within the int4 columns they go to.
 */
const lit = <T extends string | number>(values: readonly T[]) =>
  Type.Union(values.map((v) => Type.Literal(v)));

const Id = Type.String({ pattern: ID_PATTERN });
const Version = Type.Integer({
  minimum: 1,
  maximum: INT4_MAX,
  description: 'expected current version; a stale one is 409 resource.conflict',
});
const Slug = Type.String({
  pattern: SLUG_PATTERN,
  description: '1–64 of a–z, 0–9 and -, starting with a letter or digit (e.g. summer-sale)',
});
const Name = Text({ minLength: 1, maxLength: 200 });
const FlowStatus = lit(['active', 'paused'] as const);
const Rotation = lit(['position', 'weight'] as const);
const StreamType = lit(['forced', 'regular', 'default'] as const);
const StreamStatus = lit(['active', 'paused'] as const);
const RedirectCode = lit([301, 302, 303, 307] as const);
const Position = Type.Integer({ minimum: 0, maximum: 1_000_000 });
const Weight = Type.Integer({ minimum: 0, maximum: 10_000 });
/** Two letters in either case (upper-cased when stored, as `cf-ipcountry: de` is read); assigned codes only, checked by the service. */
const Countries = Type.Array(
  Type.String({ pattern: '^[A-Za-z]{2}$', description: 'a two-letter ISO 3166-1 country code (e.g. DE)' }),
  { maxItems: FLOW_LIMITS.countriesPerList },
);
/** A rule (docs/routing.md#rules); each value's meaning depends on the field and is checked by the service (rules.ts). */
const Rule = Type.Object(
  {
    field: Type.String({ minLength: 1, maxLength: 80 }),
    op: lit(['is', 'is_not'] as const),
    values: Type.Array(
      Type.Union([Text({ minLength: 1, maxLength: FLOW_LIMITS.valueLength }), Type.Boolean()]),
      { minItems: 1, maxItems: FLOW_LIMITS.valuesPerRule },
    ),
  },
  { additionalProperties: false },
);
const Filters = Type.Object(
  {
    countries_include: Type.Optional(Countries),
    countries_exclude: Type.Optional(Countries),
    logic: Type.Optional(lit(['and', 'or'] as const)),
    rules: Type.Optional(Type.Array(Rule, { maxItems: FLOW_LIMITS.rulesPerStream })),
  },
  { additionalProperties: false },
);
const BotAction = lit(['route', 'block', 'stream'] as const);
const RedirectMode = lit(['http', 'meta_refresh', 'js'] as const);
/** An IANA name or a UTC offset; whether ICU knows it is checked by the service. */
const TimeZone = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9_+:/-]+$',
  description: 'a time zone: an IANA name (UTC, Europe/Berlin) or a UTC offset (+02:00)',
});
/** Clicks per day; 0: no cap. */
const DailyCap = Type.Integer({ minimum: 0, maximum: INT4_MAX });
const Money = Type.Number({ minimum: 0, maximum: 1_000_000 });
const Currency = Type.String({
  pattern: '^[A-Z]{3}$',
  description: 'an ISO 4217 currency code in capitals (e.g. USD, EUR)',
});
const TargetUrl = Text({ minLength: 1, maxLength: FLOW_LIMITS.targetUrlLength });
const Order = lit(['asc', 'desc'] as const);
/**
 * `limit` of every keyset-paged ACP list (docs/api.md#conventions): 50 unless given, at most 500.
 */
export const PageLimit = Type.Integer({ minimum: 1, maximum: 500, default: 50 });
/** `cursor` of every keyset-paged ACP list: a `next_cursor`, base64url; the store checks its content. */
export const PageCursor = Type.String({ minLength: 1, maxLength: 1024, pattern: '^[A-Za-z0-9_-]+$' });
const strict = { additionalProperties: false } as const;

export const FlowCreateBody = Type.Object(
  {
    slug: Slug,
    name: Name,
    status: Type.Optional({ ...FlowStatus, default: 'active' }),
    rotation: Type.Optional({ ...Rotation, default: 'position' }),
    forward_query: Type.Optional(Type.Boolean({ default: false })),
    bot_action: Type.Optional({ ...BotAction, default: 'route' }),
    timezone: Type.Optional({ ...TimeZone, default: 'UTC' }),
    cost_per_click: Type.Optional({ ...Money, default: 0 }),
    currency: Type.Optional({ ...Currency, default: 'USD' }),
  },
  strict,
);
export const FlowUpdateBody = Type.Object(
  {
    id: Id,
    version: Type.Optional(Version),
    slug: Type.Optional(Slug),
    name: Type.Optional(Name),
    status: Type.Optional(FlowStatus),
    rotation: Type.Optional(Rotation),
    forward_query: Type.Optional(Type.Boolean()),
    bot_action: Type.Optional(BotAction),
    timezone: Type.Optional(TimeZone),
    cost_per_click: Type.Optional(Money),
    currency: Type.Optional(Currency),
  },
  strict,
);
export const IdBody = Type.Object({ id: Id }, strict);
export const FlowListBody = Type.Object(
  {
    filter: Type.Optional(
      Type.Object({ status: Type.Optional(FlowStatus), slug: Type.Optional(Slug) }, strict),
    ),
    sort: Type.Optional(Type.Object({ by: lit(FLOW_SORT_KEYS), order: Type.Optional(Order) }, strict)),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(PageCursor),
  },
  strict,
);

export const StreamCreateBody = Type.Object(
  {
    flow_id: Id,
    name: Name,
    type: StreamType,
    position: Type.Optional({ ...Position, default: 0 }),
    weight: Type.Optional({ ...Weight, default: 100 }),
    status: Type.Optional({ ...StreamStatus, default: 'active' }),
    filters: Type.Optional({ ...Filters, default: {} }),
    target_url: TargetUrl,
    redirect_code: Type.Optional({ ...RedirectCode, default: 302 }),
    redirect_mode: Type.Optional({ ...RedirectMode, default: 'http' }),
    daily_cap: Type.Optional({ ...DailyCap, default: 0 }),
  },
  strict,
);
export const StreamUpdateBody = Type.Object(
  {
    id: Id,
    version: Type.Optional(Version),
    name: Type.Optional(Name),
    type: Type.Optional(StreamType),
    position: Type.Optional(Position),
    weight: Type.Optional(Weight),
    status: Type.Optional(StreamStatus),
    filters: Type.Optional(Filters),
    target_url: Type.Optional(TargetUrl),
    redirect_code: Type.Optional(RedirectCode),
    redirect_mode: Type.Optional(RedirectMode),
    daily_cap: Type.Optional(DailyCap),
  },
  strict,
);
export const StreamListBody = Type.Object(
  {
    filter: Type.Optional(
      Type.Object(
        { flow_id: Type.Optional(Id), status: Type.Optional(StreamStatus), type: Type.Optional(StreamType) },
        strict,
      ),
    ),
    sort: Type.Optional(Type.Object({ by: lit(STREAM_SORT_KEYS), order: Type.Optional(Order) }, strict)),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(PageCursor),
  },
  strict,
);

export type FlowCreate = Static<typeof FlowCreateBody>;
export type FlowUpdate = Static<typeof FlowUpdateBody>;
export type FlowList = Static<typeof FlowListBody>;
export type StreamCreate = Static<typeof StreamCreateBody>;
export type StreamUpdate = Static<typeof StreamUpdateBody>;
export type StreamList = Static<typeof StreamListBody>;

type OptionalKeys<S> = { [K in keyof S]-?: object extends Pick<S, K> ? K : never }[keyof S];
/** What a body's left-out fields become. */
type Defaults<S> = { readonly [K in OptionalKeys<S>]-?: Exclude<S[K], undefined> };

/**
 * The defaults a create body's schema declares, read from the schema: fastify fills them in over
 * HTTP, the service applies the same ones to a call made in-process (the demo, tests). Every
 * optional field of such a body has one.
 */
function defaultsOf<T extends TObject>(body: T): Defaults<Static<T>> {
  const required = new Set(body.required ?? []);
  const out: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(body.properties)) {
    if ('default' in schema) out[key] = schema.default;
    else if (!required.has(key))
      throw new Error(`${key}: an optional field of a create body needs a default`);
  }
  return Object.freeze(out) as Defaults<Static<T>>;
}
export const FLOW_DEFAULTS = defaultsOf(FlowCreateBody);
export const STREAM_DEFAULTS = defaultsOf(StreamCreateBody);
/** `limit` of a list when none is given. */
export const PAGE_LIMIT_DEFAULT: number = PageLimit.default;
