/**
 * The sections of the system metrics object (docs/telemetry.md#system-metrics) that capabilities
 * provide, typed once here: each provider (storage, routing, cron, the click log) returns its type,
 * `Telemetry.setSection` takes only a provider of the right one, and the doctor and the console
 * read them typed.
 */

/** The routing cache (`cache` of docs/telemetry.md#system-metrics). */
export interface CacheSection {
  entries: number;
  max_entries: number;
  hits: number;
  misses: number;
  evictions: number;
  hit_ratio: number;
  /** Slugs known to have no flow, kept apart from the flows so that they never evict one. */
  unknown_slugs: { entries: number; max_entries: number; hits: number; evictions: number };
  /** Flows evicted, expired or invalidated, kept to answer while the database cannot be read. */
  stale: { entries: number; max_entries: number; served: number };
}

/** Storage (`db`); `driver` is `none` until storage is wired. */
export interface DbSection {
  driver: 'sqlite' | 'postgres' | 'none';
  status: 'up' | 'down';
  pool: { size: number; idle: number; waiting: number };
  queries: number;
  errors: number;
  avg_ms: number;
  p95_ms: number;
  last_error: string | null;
  /**
   * SQLite on a file with its checkpoint thread (#12): checkpoints run and failed, and the log pages
   * the last one left behind. Null where nothing checkpoints (PostgreSQL, a one-off command's
   * SQLite): the key is there on every backend, so the object has one shape.
   */
  checkpoints: { runs: number; failures: number; backlog_pages: number; last_error: string | null } | null;
}

/** One cron task (`tasks.<name>`). */
export interface TaskSectionEntry {
  runs: number;
  failures: number;
  running: boolean;
  p95_duration_ms: number;
  /** Runs that finished in the last hour; 0 when none did. */
  p95_last_hour: number;
  last_duration_ms: number | null;
  last_error: string | null;
}
export type TasksSection = Record<string, TaskSectionEntry>;

/** `streams`: totals from storage, hits and uniques of this node since it started. */
export interface StreamsSection {
  total: number;
  active: number;
  hits: number;
  uniques: number;
}

/** `traffic_flows` (with `bots`, `uniques` and `without_default_stream`). */
/** One slug `/go` was asked for that routes nowhere (no flow has it, or its flow is paused). */
export interface SlugMiss {
  slug: string;
  /** Requests for it since it was first kept (it may have been dropped and kept again). */
  count: number;
  /** `paused`: a flow has the slug but is paused; `unknown`: no flow has it. */
  flow: 'paused' | 'unknown';
  last_seen_at: string;
}

export interface FlowsSection {
  total: number;
  active: number;
  clicks: number;
  no_match: number;
  bots: number;
  uniques: number;
  /**
   * Active flows this node has compiled (the ones that get traffic) with no active default stream:
   * a click no other stream takes is lost to them (404, or `routing.fallback_url`). Slugs: the first 10.
   */
  without_default_stream: { count: number; slugs: string[] };
  /**
   * Requests for slugs that route nowhere since the node started: `unknown` (no flow has the slug),
   * `paused` (its flow is paused), and the last 20 such slugs, most recent first.
   */
  unknown_slugs: {
    unknown: number;
    paused: number;
    /** Bots' requests for such slugs (scanners): counted apart, never named. */
    bots: number;
    recent: SlugMiss[];
  };
}

/**
 * The click log of this node (never silent about what it drops or holds:
 * docs/clicks.md#the-click-log-srcclicksclick-logts).
 */
export interface ClicksSection {
  /** Clicks in the buffer, not yet cut into a batch (gauge). */
  buffered: number;
  /** Clicks in batches cut and not yet acknowledged (gauge). */
  unacked: number;
  buffer_max: number;
  /** Clicks whose batch the database acknowledged. */
  persisted: number;
  /** Clicks lost: the buffer was full, a batch was given up, or the node stopped with the database down. */
  dropped: number;
  /** Flush attempts that failed (each is retried). */
  failed_flushes: number;
  last_error: string | null;
  /**
   * When writes began failing: the first failed attempt since a flush last ended with nothing
   * left to send (ISO time); null while writes go through. `last_error` stays after a recovery,
   * this does not: it is what says the log is failing now.
   */
  failing_since: string | null;
  /**
   * The uniqueness table of this node (docs/clicks.md#uniqueness): (flow, visitor) pairs held, the
   * bound (`routing.uniqueness_max_entries`), and pairs evicted before their window ended because
   * it was full — each may count a visitor's later click unique again (an over-count).
   */
  uniqueness: UniquenessSection;
}

/** The uniqueness table in the `clicks` section. */
export interface UniquenessSection {
  entries: number;
  max_entries: number;
  early_evictions: number;
}

/**
 * How this node authenticates postbacks (docs/clicks.md#postback-keys): the
 * doctor's procedure 6 reads it, a node that takes postbacks without a key is a finding.
 */
export interface PostbacksSection {
  /** Whether `/postback` refuses a request without the right `key`. */
  key_required: boolean;
  /** Where the accepted key's hash comes from: the configuration, the database, or nowhere yet. */
  key_source: 'configured' | 'stored' | 'none';
}

/** Every provided section by name. */
export interface Sections {
  cache: CacheSection;
  db: DbSection;
  tasks: TasksSection;
  streams: StreamsSection;
  traffic_flows: FlowsSection;
  clicks: ClicksSection;
  postbacks: PostbacksSection;
}
export type SectionName = keyof Sections;

/** What a section shows before its provider is wired (zeros; `db` down). */
export const EMPTY_SECTIONS: { readonly [K in SectionName]: () => Sections[K] } = {
  cache: () => ({
    entries: 0,
    max_entries: 0,
    hits: 0,
    misses: 0,
    evictions: 0,
    hit_ratio: 0,
    unknown_slugs: { entries: 0, max_entries: 0, hits: 0, evictions: 0 },
    stale: { entries: 0, max_entries: 0, served: 0 },
  }),
  db: () => ({
    driver: 'none',
    status: 'down',
    pool: { size: 0, idle: 0, waiting: 0 },
    queries: 0,
    errors: 0,
    avg_ms: 0,
    p95_ms: 0,
    last_error: null,
    checkpoints: null,
  }),
  tasks: () => ({}),
  streams: () => ({ total: 0, active: 0, hits: 0, uniques: 0 }),
  traffic_flows: () => ({
    total: 0,
    active: 0,
    clicks: 0,
    no_match: 0,
    bots: 0,
    uniques: 0,
    without_default_stream: { count: 0, slugs: [] },
    unknown_slugs: { unknown: 0, paused: 0, bots: 0, recent: [] },
  }),
  clicks: () => ({
    buffered: 0,
    unacked: 0,
    buffer_max: 0,
    persisted: 0,
    dropped: 0,
    failed_flushes: 0,
    last_error: null,
    failing_since: null,
    uniqueness: { entries: 0, max_entries: 0, early_evictions: 0 },
  }),
  postbacks: () => ({ key_required: true, key_source: 'none' }),
};

/**
 * Another node's system metrics as read over its ACP: the same type, every field possibly absent
 * (an older build lacks the newer ones), so readers say what they do without one.
 */
export type Partially<T> = T extends readonly (infer U)[]
  ? readonly Partially<U>[]
  : T extends object
    ? { [K in keyof T]?: Partially<T[K]> }
    : T;
