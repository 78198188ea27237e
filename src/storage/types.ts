import type { Role } from '../config/index.ts';
import type { ClusterStore, Fence } from './cluster-store.ts';

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

export interface CountryFilters {
  countries_include?: string[];
  countries_exclude?: string[];
}

/** A traffic flow (§8) with its persisted counters and optimistic-concurrency version. */
export interface FlowRecord {
  id: string;
  slug: string;
  name: string;
  status: FlowStatus;
  rotation: Rotation;
  clicks: number;
  no_match: number;
  last_click_at: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

/** A stream (§8) with its persisted counters and optimistic-concurrency version. */
export interface StreamRecord {
  id: string;
  flow_id: string;
  name: string;
  type: StreamType;
  position: number;
  weight: number;
  status: StreamStatus;
  filters: CountryFilters;
  target_url: string;
  redirect_code: RedirectCode;
  hits: number;
  last_hit_at: string | null;
  /** Result of the last `targets.check`: reachable (`ok`), `unreachable`, or never checked (null). */
  target_status: 'ok' | 'unreachable' | null;
  target_checked_at: string | null;
  target_error: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export type FlowInput = Pick<FlowRecord, 'slug' | 'name' | 'status' | 'rotation'>;
export type StreamInput = Pick<
  StreamRecord,
  'flow_id' | 'name' | 'type' | 'position' | 'weight' | 'status' | 'filters' | 'target_url' | 'redirect_code'
>;

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
   * Records a target check, a leader-only write: fenced, false when the fence no longer holds or
   * the stream is gone. Does not change `version`: it is not an edit.
   */
  setTargetStatus(
    id: string,
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

/** Counter deltas accumulated in memory and added atomically, so several nodes sum correctly. */
export interface CounterBatch {
  streams: { id: string; hits: number; last_hit_at: string }[];
  flows: { id: string; clicks: number; no_match: number; last_click_at: string }[];
}

/**
 * How many flows and streams there are, and how many active, across all nodes (the system
 * metrics' `total` and `active`; hits and clicks there are this node's own counters). Kept by the
 * database in a `totals` row per table (migration 5), so reading them is O(1) at any size.
 */
export interface Aggregates {
  streams: { total: number; active: number };
  traffic_flows: { total: number; active: number };
}

/** The `db` section of system metrics (§5). */
export interface DbSection {
  driver: StorageDriver;
  status: 'up' | 'down';
  pool: { size: number; idle: number; waiting: number };
  queries: number;
  errors: number;
  avg_ms: number;
  p95_ms: number;
  last_error: string | null;
}

/** Called with the slug whose routing data changed (on this node or, via PostgreSQL, another). */
export type InvalidationListener = (slug: string) => void;

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
  /** Applies pending versioned migrations; idempotent and safe when nodes start together. */
  migrate(): Promise<void>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /**
   * Adds counter deltas atomically in a fixed number of round trips whatever the batch's size;
   * ids of streams or flows deleted meanwhile are dropped, never an error.
   */
  addCounters(batch: CounterBatch): Promise<void>;
  /** The totals, one small read whatever the number of rows. */
  aggregates(): Promise<Aggregates>;
  /** Announces that a flow's routing data changed, to every node sharing the database. */
  publishInvalidation(slug: string): Promise<void>;
  onInvalidation(listener: InvalidationListener): void;
  stats(): DbSection;
  close(): Promise<void>;
}
