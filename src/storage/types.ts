import { POSTBACK_STATUSES, type Role } from '../config/index.ts';
import type { DbSection } from '../telemetry/index.ts';
import type { ClusterStore, Fence } from './cluster-store.ts';
import type { ReportStore } from './report-store.ts';
import type { SubIds } from './sub-ids.ts';

export type StorageDriver = 'sqlite' | 'postgres';

/** An ACP operator kept in storage; the token itself is never stored, only its SHA-256. */
export interface OperatorRecord {
  id: number;
  name: string;
  role: Role;
  created_at: string;
  revoked_at: string | null;
}

export interface OperatorStore {
  /** Throws ApiError `resource.conflict` when an active operator has that name or token. */
  create(name: string, role: Role, tokenSha256: string): Promise<OperatorRecord>;
  list(): Promise<OperatorRecord[]>;
  findActiveByTokenHash(tokenSha256: string): Promise<OperatorRecord | undefined>;
  /** True when an active operator of that name was revoked. */
  revoke(name: string): Promise<boolean>;
  countActive(): Promise<number>;
}

export type FlowStatus = 'active' | 'paused';
export type Rotation = 'position' | 'weight';
export type StreamType = 'forced' | 'regular' | 'default';
export type StreamStatus = 'active' | 'paused';
export type RedirectCode = 301 | 302 | 303 | 307;

/**
 * One targeting rule of a stream (docs/routing.md#rules); checked and compiled by routing
 * (src/routing/rules.ts).
 */
export interface TargetingRule {
  field: string;
  op: 'is' | 'is_not';
  values: (string | boolean)[];
}

/** A stream's filters (docs/routing.md#rules): country lists, and rules joined by `logic` [and]. */
export interface StreamFilters {
  countries_include?: string[];
  countries_exclude?: string[];
  logic?: 'and' | 'or';
  rules?: TargetingRule[];
}
/** The filters as #3 knew them: country lists only (still valid). */
export type CountryFilters = StreamFilters;
/** What a flow does with bots (docs/routing.md#bots). */
export type BotAction = 'route' | 'block' | 'stream';
/** How a stream sends the browser on (docs/routing.md#redirect-modes). */
export type RedirectMode = 'http' | 'meta_refresh' | 'js';

/**
 * A traffic flow (docs/routing.md#flows-and-streams) with its persisted counters and
 * optimistic-concurrency version.
 */
export interface FlowRecord {
  id: string;
  slug: string;
  name: string;
  status: FlowStatus;
  rotation: Rotation;
  /** Append the incoming query string to the target's (docs/routing.md#forward_query). */
  forward_query: boolean;
  /** What bots get: routed like people, blocked (404), or only streams that accept them. */
  bot_action: BotAction;
  /** IANA time zone of the flow's `weekday`/`hour` rules and daily caps. */
  timezone: string;
  /** Cost of each non-bot click, a decimal in `currency`. */
  cost_per_click: number;
  /** ISO 4217 code of `cost_per_click`. */
  currency: string;
  /** Non-bot clicks a stream took (redirected). */
  clicks: number;
  no_match: number;
  /** Bot clicks: answered and logged, never in `clicks` or `no_match`. */
  bots: number;
  /** Redirected non-bot clicks that were unique; never more than `clicks`. */
  uniques: number;
  last_click_at: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

/** A stream with its persisted counters and optimistic-concurrency version. */
export interface StreamRecord {
  id: string;
  flow_id: string;
  name: string;
  type: StreamType;
  position: number;
  weight: number;
  status: StreamStatus;
  filters: StreamFilters;
  target_url: string;
  redirect_code: RedirectCode;
  /** `http` (status and Location), or a 200 page that moves on by `meta_refresh` or `js`. */
  redirect_mode: RedirectMode;
  /** Clicks per day in the flow's time zone after which the stream is skipped; 0: no cap. */
  daily_cap: number;
  hits: number;
  /** Hits that were unique clicks; never more than `hits`. */
  uniques: number;
  last_hit_at: string | null;
  /** Result of the last `targets.check`: reachable (`ok`), `unreachable`, or never checked (null). */
  target_status: 'ok' | 'unreachable' | null;
  target_checked_at: string | null;
  target_error: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export type FlowInput = Pick<FlowRecord, 'slug' | 'name' | 'status' | 'rotation'> & {
  /** Absent: false. */
  forward_query?: boolean;
  /** Absent: the defaults of migration 11 (route, UTC, 0, USD). */
  bot_action?: BotAction;
  timezone?: string;
  cost_per_click?: number;
  currency?: string;
};
export type StreamInput = Pick<
  StreamRecord,
  'flow_id' | 'name' | 'type' | 'position' | 'weight' | 'status' | 'filters' | 'target_url' | 'redirect_code'
> & {
  /** Absent: http. */
  redirect_mode?: RedirectMode;
  /** Absent: 0 (no cap). */
  daily_cap?: number;
};

export type SortOrder = 'asc' | 'desc';
export const FLOW_SORT_KEYS = ['created_at', 'slug', 'name', 'clicks'] as const;
export const STREAM_SORT_KEYS = ['position', 'created_at', 'name', 'hits'] as const;
export type FlowSortKey = (typeof FLOW_SORT_KEYS)[number];
export type StreamSortKey = (typeof STREAM_SORT_KEYS)[number];

export interface PageQuery<F, K extends string> {
  filter: F;
  sort: { by: K; order: SortOrder };
  limit: number;
  /** Opaque cursor from a previous page's `next_cursor`. */
  cursor?: string | undefined;
}

export interface Page<T> {
  items: T[];
  total: number;
  next_cursor: string | null;
}

export interface FlowFilter {
  status?: FlowStatus | undefined;
  slug?: string | undefined;
}

export interface StreamFilter {
  flow_id?: string | undefined;
  status?: StreamStatus | undefined;
  type?: StreamType | undefined;
}

export interface FlowStore {
  create(input: FlowInput): Promise<FlowRecord>;
  get(id: string): Promise<FlowRecord | undefined>;
  getBySlug(slug: string): Promise<FlowRecord | undefined>;
  /**
   * The flows of several slugs in one query (the routing cache's reload reads a chunk at a time);
   * slugs with no flow are simply absent. At most {@link MAX_IN_LIST} slugs.
   */
  bySlugs(slugs: readonly string[]): Promise<FlowRecord[]>;
  /** Applies changes; `expectedVersion` makes a stale update a `resource.conflict`. */
  update(id: string, changes: Partial<FlowInput>, expectedVersion?: number): Promise<FlowRecord | undefined>;
  /** Deletes the flow and its streams; the deleted flow, or undefined when there was none. */
  delete(id: string): Promise<FlowRecord | undefined>;
  list(q: PageQuery<FlowFilter, FlowSortKey>): Promise<Page<FlowRecord>>;
}

export interface StreamStore {
  create(input: StreamInput): Promise<StreamRecord>;
  get(id: string): Promise<StreamRecord | undefined>;
  update(
    id: string,
    changes: Partial<Omit<StreamInput, 'flow_id'>>,
    expectedVersion?: number,
  ): Promise<StreamRecord | undefined>;
  delete(id: string): Promise<StreamRecord | undefined>;
  list(q: PageQuery<StreamFilter, StreamSortKey>): Promise<Page<StreamRecord>>;
  /** Every stream of a flow, in position order (for the routing cache). */
  ofFlow(flowId: string): Promise<StreamRecord[]>;
  /** Every stream of several flows in one query, by flow then position. At most {@link MAX_IN_LIST} ids. */
  ofFlows(flowIds: readonly string[]): Promise<StreamRecord[]>;
  /**
   * Active streams with an id after `afterId` (all when undefined), in id order, at most `limit`,
   * with their flow's slug: `targets.check` walks them page by page on an index, with no count and
   * no sort of the table, so a page costs the same at any size.
   */
  activeTargets(afterId: string | undefined, limit: number): Promise<StreamTarget[]>;
  /**
   * Records a check of `targetUrl`, a leader-only write: fenced, false when the fence no longer
   * holds, the stream is gone or its target is no longer `targetUrl` (changed while it was checked:
   * an update clears the result, and the old URL's must not come back). Does not change `version`:
   * it is not an edit.
   */
  setTargetStatus(
    id: string,
    targetUrl: string,
    status: 'ok' | 'unreachable',
    error: string | null,
    checkedAt: string,
    fence?: Fence,
  ): Promise<boolean>;
}

/** What `targets.check` needs of an active stream. */
export interface StreamTarget {
  id: string;
  flow_id: string;
  flow_slug: string;
  target_url: string;
}

/** Most values one `IN (...)` list may hold (well under both backends' parameter limits). */
export const MAX_IN_LIST = 1000;

/**
 * Counter deltas accumulated in memory and added atomically, so several nodes sum correctly. `id`
 * (from `newBatchId`, made when the batch is cut) makes it idempotent: a retry sends the same id
 * and is applied at most once.
 */
export interface CounterBatch {
  id: string;
  /** `uniques`, `bots`: absent is 0 (writers from before #14). */
  streams: { id: string; hits: number; uniques?: number; last_hit_at: string }[];
  flows: {
    id: string;
    clicks: number;
    no_match: number;
    bots?: number;
    uniques?: number;
    last_click_at: string;
  }[];
  /** Clicks per stream per local day, for daily caps; absent: none. */
  days?: { stream_id: string; day: string; clicks: number }[];
}

export const CLICK_OUTCOMES = ['redirect', 'no_match', 'bot'] as const;
export const DEVICE_TYPES = ['desktop', 'mobile', 'tablet', 'other'] as const;
/**
 * The postback statuses (docs/clicks.md#postbacks): the configuration's list (`postback.statuses`
 * maps a network's values to them).
 */
export const CONVERSION_STATUSES = POSTBACK_STATUSES;
export type ClickOutcome = (typeof CLICK_OUTCOMES)[number];
export type DeviceType = (typeof DEVICE_TYPES)[number];
export type ConversionStatus = (typeof CONVERSION_STATUSES)[number];

/**
 * A click as the hot path hands it to the click log: the stored record in the compact form that a
 * buffer holds cheaply (a timestamp as a number, the sub-ids as one array or null, strings such as
 * os and browser shared with the user-agent cache). The node id is the batch's, not the row's.
 */
export interface NewClick {
  click_id: string;
  flow_id: string;
  stream_id: string | null;
  /** Epoch milliseconds of the request. */
  at: number;
  outcome: ClickOutcome;
  country: string | null;
  device_type: DeviceType;
  os: string;
  browser: string;
  language: string | null;
  referrer_host: string | null;
  /** `sub1` … `sub10` in order (shorter arrays mean the rest are null); null when the click had none. */
  subs: readonly (string | null | undefined)[] | null;
  is_unique: boolean;
  is_bot: boolean;
  /** The flow's cost per click, a decimal in its currency (0 for bots). Stored exactly to 6 places. */
  cost: number;
  /** The client address cut to its /24 (IPv4) or /48 (IPv6), e.g. `203.0.113.0/24`. */
  ip_prefix: string | null;
}

/** A stored click, as `/acp/clicks/get` and `/acp/clicks/list` show it. */
export interface ClickRecord extends SubIds {
  click_id: string;
  flow_id: string;
  stream_id: string | null;
  created_at: string;
  outcome: ClickOutcome;
  country: string | null;
  device_type: DeviceType;
  os: string;
  browser: string;
  language: string | null;
  referrer_host: string | null;
  is_unique: boolean;
  is_bot: boolean;
  cost: number;
  ip_prefix: string | null;
  /** The node that took the click. */
  server_id: string | null;
}

/**
 * Clicks cut from the buffer as one idempotent batch: `id` from `newBatchId`, kept across retries.
 * `counts`: what those clicks counted (the routing counters), added in the same transaction, so a
 * batch writes its clicks and their counts together or neither.
 */
export interface ClickBatch {
  id: string;
  server_id: string | null;
  rows: readonly NewClick[];
  counts?: CountRows;
}

/**
 * Counter increments as the counter statements take them: one row per stream, per flow, and per
 * (capped stream, local day), each key once.
 */
export interface CountRows {
  streams: [id: string, hits: number, uniques: number, last_hit_at: string][];
  flows: [
    id: string,
    clicks: number,
    no_match: number,
    bots: number,
    uniques: number,
    last_click_at: string,
  ][];
  days: [stream_id: string, day: string, clicks: number][];
}

/** What applying a batch did: `applied` false when its id had been applied before (nothing written). */
export interface BatchResult {
  applied: boolean;
  /** Rows written now (a click id already stored is kept, not written twice). */
  rows: number;
}

export interface ClickFilter {
  flow_id?: string | undefined;
  stream_id?: string | undefined;
  outcome?: ClickOutcome | undefined;
  country?: string | undefined;
  is_bot?: boolean | undefined;
  /** ISO timestamp, inclusive. */
  from?: string | undefined;
  /** ISO timestamp, exclusive. */
  to?: string | undefined;
  sub1?: string | undefined;
}

export interface ConversionFilter {
  flow_id?: string | undefined;
  stream_id?: string | undefined;
  status?: ConversionStatus | undefined;
  from?: string | undefined;
  to?: string | undefined;
}

/** A newest-first keyset page query over a log table (clicks, conversions). */
export interface LogPageQuery<F> {
  filter: F;
  limit: number;
  cursor?: string | undefined;
}

/**
 * A page of a log table. Counting millions of rows for every page would cost seconds, so `total`
 * counts at most {@link LOG_TOTAL_CAP} rows; `total_capped` says there are more.
 */
export interface LogPage<T> extends Page<T> {
  total_capped: boolean;
}
export const LOG_TOTAL_CAP = 10_000;

export interface ChunkedDelete {
  /** Rows per statement (default 2,000): each is its own short transaction. */
  chunkRows?: number;
  /** Stops between chunks (a task's timeout or a graceful stop); what was deleted stays deleted. */
  signal?: AbortSignal;
}

export interface ClickStore {
  /**
   * Writes a batch idempotently: multi-row, in one transaction of a fixed number of statements
   * whatever its size; a batch id already applied writes nothing (`applied: false`).
   */
  insertBatch(batch: ClickBatch): Promise<BatchResult>;
  /** Clicks a batch should hold at most here: what the click log cuts its buffer into. */
  readonly batchMaxRows: number;
  get(clickId: string): Promise<ClickRecord | undefined>;
  /** Newest first, keyset-paged on (created_at, click_id). */
  list(q: LogPageQuery<ClickFilter>): Promise<LogPage<ClickRecord>>;
  /**
   * Deletes clicks created before `before` (ISO), oldest first, in small transactions with the
   * event loop let go between them; returns how many went.
   */
  deleteOlderThan(before: string, opts?: ChunkedDelete): Promise<number>;
}

/**
 * A (flow, visitor) pair first seen by a node: the start of its uniqueness window
 * (docs/clicks.md#uniqueness).
 */
export interface Sighting {
  flow_id: string;
  /** The visitor key: a 52-bit integer (src/clicks/visitor-key.ts). */
  visitor_key: number;
  /** Epoch milliseconds of the click that opened the window. */
  first_seen_at: number;
}

/** Sightings read, and where the next read starts (opaque). */
export interface SightingPage {
  rows: Sighting[];
  cursor: string;
  /** A page was full: read again from `cursor` for the rest. */
  more: boolean;
  /**
   * `open` only: where the next page of open windows starts (pass it as `after`); absent when
   * this page was the last.
   */
  next?: string;
}

/**
 * First sightings nodes sharing a database tell each other, so they agree on uniques
 * (docs/clicks.md#across-nodes). Each node adds its own and reads everybody else's after its
 * cursor; each row is read once by each reader, in commit order, however concurrent inserts
 * interleave.
 */
export interface SightingStore {
  /** Adds this node's sightings in one statement; returns how many. */
  add(serverId: string, rows: readonly Sighting[]): Promise<number>;
  /**
   * Every node's sightings at or after `since` (epoch ms), oldest first, `limit` of them from
   * `after` (a starting node's open windows, a page at a time), and a cursor for {@link after} to
   * follow on from.
   */
  open(since: number, limit: number, after?: string): Promise<SightingPage>;
  /** Where to start `open` so that only the newest `keep` open windows come; undefined: from the oldest. */
  openStart(since: number, keep: number): Promise<string | undefined>;
  /** Other nodes' sightings committed after `cursor`, at most `limit`, in commit order. */
  after(cursor: string, serverId: string, limit: number): Promise<SightingPage>;
  /** Deletes sightings first seen before `before` (epoch ms), in chunks; returns how many went. */
  prune(before: number, opts?: ChunkedDelete): Promise<number>;
}

/** A postback's values. */
export interface ConversionInput {
  click_id: string;
  /** Absent (null or empty): one conversion per click. */
  txid: string | null;
  status: ConversionStatus;
  /** Decimal ≥ 0; stored exactly to 6 places. */
  payout: number;
  currency: string;
}

/**
 * A conversion (docs/clicks.md#postbacks): one per (click_id, txid), with its latest status and
 * payout, the number of postbacks that set it, and the attribution of its click copied in (the
 * click may be deleted by retention long before its conversions are; reports read conversions
 * without a join).
 */
export interface ConversionRecord extends SubIds {
  conversion_id: string;
  click_id: string;
  txid: string | null;
  status: ConversionStatus;
  payout: number;
  currency: string;
  postbacks: number;
  /** The first postback's arrival. */
  created_at: string;
  updated_at: string;
  click_created_at: string;
  flow_id: string;
  stream_id: string | null;
  outcome: ClickOutcome;
  country: string | null;
  device_type: DeviceType;
  os: string;
  browser: string;
  language: string | null;
  referrer_host: string | null;
  is_unique: boolean;
  is_bot: boolean;
}

export interface ConversionStore {
  /**
   * Records a postback idempotently by (click_id, txid): the first creates the conversion
   * (`created: true`), later ones update its status, payout and currency and count one more
   * postback. The click is read from the click log, or taken from `click` when the caller has it
   * (a click still in a node's buffer). Undefined when the click is unknown.
   */
  upsert(
    input: ConversionInput,
    click?: ClickRecord,
  ): Promise<{ conversion: ConversionRecord; created: boolean } | undefined>;
  /** Newest first by created_at, keyset-paged. */
  list(q: LogPageQuery<ConversionFilter>): Promise<LogPage<ConversionRecord>>;
  /** A click's conversions, oldest first. */
  ofClick(clickId: string): Promise<ConversionRecord[]>;
  /**
   * Leads and sales and their revenue per currency for each of the given flows (`flow_id`) or
   * streams (`stream_id`): one grouped query over one list page's ids, read along the
   * `conversions_flow` / `conversions_stream` indexes. Ids without conversions are absent. At most
   * {@link MAX_IN_LIST} ids.
   */
  sumsBy(column: 'flow_id' | 'stream_id', ids: readonly string[]): Promise<Map<string, ConversionSums>>;
}

/**
 * What one audited ACP write says (docs/audit.md#what-is-audited): who, what, on what, in which
 * request.
 */
export interface AuditEntry {
  /** The operator's name (a configured or a stored one). */
  operator: string;
  /** `<target_type>.<verb>`: `flow.create`, `stream.delete`, `task.run`, `operator.revoke`, … */
  action: string;
  target_type: string;
  target_id: string;
  request_id: string;
  /** The node that served the write. */
  server_id: string;
}

/** A stored audit row. */
export interface AuditRecord extends AuditEntry {
  id: string;
  created_at: string;
}

export interface AuditFilter {
  operator?: string | undefined;
  action?: string | undefined;
  target_type?: string | undefined;
  target_id?: string | undefined;
  /** ISO timestamp, inclusive. */
  from?: string | undefined;
  /** ISO timestamp, exclusive. */
  to?: string | undefined;
}

/** The audit log: appended to by the ACP on every successful write, read by admins, kept a week. */
export interface AuditStore {
  append(entry: AuditEntry): Promise<AuditRecord>;
  /** Newest first, keyset-paged on (created_at, id). */
  list(q: LogPageQuery<AuditFilter>): Promise<LogPage<AuditRecord>>;
  /** Deletes the rows created before `before` (ISO); returns how many went. */
  deleteOlderThan(before: string): Promise<number>;
}

/**
 * What a flow or stream earned (flows and streams lists): `conversions` counts leads and sales
 * (rejected ones count in neither, as in reports, docs/reports.md#the-metrics); `revenue` is their
 * payout summed per currency, keys in alphabetical order (`{}` when none): amounts in different
 * currencies are never added together, and no exchange rate is assumed.
 */
export interface ConversionSums {
  conversions: number;
  revenue: Record<string, number>;
}

/** No conversions: what a flow or stream without any shows. */
export const NO_CONVERSIONS: Readonly<ConversionSums> = Object.freeze({
  conversions: 0,
  revenue: Object.freeze({}) as Record<string, number>,
});

/**
 * How many flows and streams there are, and how many active, across all nodes (the system
 * metrics' `total` and `active`; hits and clicks there are this node's own counters). Kept by the
 * database in a `totals` row per table (migration 6), so reading them is O(1) at any size.
 */
export interface Aggregates {
  streams: { total: number; active: number };
  traffic_flows: { total: number; active: number };
}

/** The `db` section of system metrics. */
/**
 * The `db` section (docs/telemetry.md#system-metrics), typed with the other sections in telemetry.
 */
export type { DbSection };

/**
 * Called with the slug whose routing data changed (on this node or, via PostgreSQL, another); with
 * undefined when notices may have been missed (the listening connection was lost and is back): any
 * cached flow may then be stale.
 */
export type InvalidationListener = (slug: string | undefined) => void;

/**
 * One interface over the embedded SQLite file and a shared PostgreSQL. Every query is timed into
 * the `db` section. A backend that cannot reach its database throws ApiError `db.unavailable`.
 */
export interface Storage {
  readonly driver: StorageDriver;
  readonly operators: OperatorStore;
  readonly flows: FlowStore;
  readonly streams: StreamStore;
  /** Leader lease (PostgreSQL), node registry and the journal of leader-task runs. */
  readonly cluster: ClusterStore;
  /** The click log (docs/clicks.md#the-click-log-srcclicksclick-logts). */
  readonly clicks: ClickStore;
  /** Conversions from postbacks (docs/clicks.md#postbacks). */
  readonly conversions: ConversionStore;
  /** Who changed what over the ACP (docs/audit.md). */
  readonly audit: AuditStore;
  /** First sightings of visitors that nodes share for uniqueness (docs/clicks.md#across-nodes). */
  readonly sightings: SightingStore;
  /** Grouped sums over the click log and the conversions (docs/reports.md). */
  readonly reports: ReportStore;
  /** Applies pending versioned migrations; idempotent and safe when nodes start together. */
  migrate(): Promise<void>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /**
   * The deployment secret kept under `name`: the one stored, or `make()`'s, stored now if no node
   * stored one first (every node sharing the database gets the same). Never logged or shown.
   */
  secret(name: string, make: () => string): Promise<string>;
  /** The deployment secret kept under `name`, or undefined while no node has stored one. */
  readSecret(name: string): Promise<string | undefined>;
  /**
   * Stores `value` under `name` if its value is still `expected` (null: if none is stored), in one
   * conditional statement: false when another node changed it first, and nothing was written.
   */
  replaceSecret(name: string, expected: string | null, value: string): Promise<boolean>;
  /**
   * Adds counter deltas atomically in a fixed number of round trips whatever the batch's size;
   * ids of streams or flows deleted meanwhile are dropped, never an error. Idempotent by batch id:
   * false when that batch had been applied before and nothing was written now.
   */
  addCounters(batch: CounterBatch): Promise<boolean>;
  /**
   * Deletes the guard rows of batches applied before `before` (ISO); each node also does it
   * itself every few minutes. Returns how many went.
   */
  pruneAppliedBatches(before: string): Promise<number>;
  /** The totals, one small read whatever the number of rows. */
  aggregates(): Promise<Aggregates>;
  /**
   * Clicks counted so far on these (stream, local day) pairs by every node
   * (docs/routing.md#daily-caps).
   */
  streamDays(pairs: readonly { stream_id: string; day: string }[]): Promise<Map<string, number>>;
  /** Announces that a flow's routing data changed, to every node sharing the database. */
  publishInvalidation(slug: string): Promise<void>;
  onInvalidation(listener: InvalidationListener): void;
  stats(): DbSection;
  close(): Promise<void>;
}
