import { LRUCache } from 'lru-cache';
import { ApiError, hasCode } from '../errors/index.ts';
import type { CacheSection } from '../telemetry/index.ts';
import { TimeSlice } from '../time/index.ts';
import type { CompiledFlow } from './compiled-flow.ts';
import { UnknownSlugs } from './unknown-slugs.ts';

/** What a bulk load returns: the flows found by slug, and how many stream rows it read for them. */
export interface LoadedChunk {
  flows: Map<string, CompiledFlow>;
  rows: number;
}

/** Up to `n` more values of `it`. */
function take(it: Iterator<string>, n: number): string[] {
  const out: string[] = [];
  while (out.length < n) {
    const next = it.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}

/** How many stream rows one reload query should read: a few ms of synchronous SQLite work. */
const RELOAD_ROWS_PER_QUERY = 100;
/** Bounds of the slugs asked for in one reload query (below the storage's IN-list limit). */
const RELOAD_CHUNK_MIN = 1;
const RELOAD_CHUNK_MAX = 100;

export type { CacheSection };

/** What a read of one slug came to, for everyone waiting on it. */
type Read = { flow: CompiledFlow | undefined } | { failed: unknown };
/** A read of one slug in flight; `superseded` when a write invalidated the slug meanwhile. */
interface Reading {
  done: Promise<Read>;
  superseded: boolean;
}

/**
 * Flows by slug for the hot path (lru-cache, bounded by `cache.max_entries`, fresh for
 * `cache.ttl_ms`). A fresh entry is answered synchronously; a missing or expired one is loaded,
 * and when the database fails the last known flow keeps serving (stale beats down).
 *
 * Slugs with no flow are kept apart ({@link UnknownSlugs}, bounded on its own), so that no number
 * of unknown slugs evicts a flow, and a load never takes a place in the LRU before it found a
 * flow. A flow dropped from the LRU for size (or invalidated) is kept as the stale fallback, at
 * most `cache.max_entries` of them, the oldest dropped first: while the database is down it still
 * answers (docs/routing.md#cache).
 */
export class RoutingCache {
  readonly #lru: LRUCache<string, CompiledFlow>;
  readonly #max: number;
  readonly #unknown: UnknownSlugs;
  /**
   * Flows evicted for size, expired or invalidated, kept only to serve when reading them again
   * fails (database down); at most #max, insertion order is the order dropped in.
   */
  readonly #lastKnown = new Map<string, CompiledFlow>();
  readonly #load: (slug: string) => Promise<CompiledFlow | undefined>;
  readonly #loadMany: (slugs: readonly string[], slice: TimeSlice) => Promise<LoadedChunk>;
  /** One read per slug at a time, however many clicks wait for it. */
  readonly #reading = new Map<string, Reading>();
  /** Per running reload, the slugs invalidated since it started: it must not put back what it read before. */
  readonly #reloads = new Set<Set<string>>();
  /**
   * The cached slugs, kept beside the LRU for {@link reloadAll}: listing 100,000 keys through
   * lru-cache's iterator (which checks each entry's age) took 12–40 ms in one go, and that iterator
   * is not safe to resume after an eviction; a Set's is, so the reload walks this one a chunk at a
   * time.
   */
  readonly #slugs = new Set<string>();
  #lastError: unknown;
  hits = 0;
  misses = 0;
  evictions = 0;
  /** Loads that failed and were answered with a stale flow. */
  staleServed = 0;

  constructor(opts: {
    maxEntries: number;
    ttlMs: number;
    load: (slug: string) => Promise<CompiledFlow | undefined>;
    /**
     * Reads many slugs at once for {@link reloadAll}, pausing on `slice` between pieces of work;
     * without it, each slug is loaded on its own.
     */
    loadMany?: (slugs: readonly string[], slice: TimeSlice) => Promise<LoadedChunk>;
    /** The clock of unknown slugs' entries (milliseconds); `performance.now` as lru-cache's. */
    now?: () => number;
    /** Unknown slugs kept at most (tests); {@link UNKNOWN_SLUGS_KEPT} by default. */
    unknownMaxEntries?: number;
  }) {
    this.#max = opts.maxEntries;
    this.#load = opts.load;
    this.#unknown = new UnknownSlugs({
      ttlMs: opts.ttlMs,
      maxEntries: opts.unknownMaxEntries,
      now: opts.now ?? (() => performance.now()),
    });
    this.#loadMany =
      opts.loadMany ??
      (async (slugs, slice) => {
        const flows = new Map<string, CompiledFlow>();
        for (const slug of slugs) {
          const flow = await opts.load(slug);
          if (flow !== undefined) flows.set(slug, flow);
          await slice.pause();
        }
        return { flows, rows: 0 };
      });
    this.#lru = new LRUCache<string, CompiledFlow>({
      max: opts.maxEntries,
      ttl: opts.ttlMs,
      ttlAutopurge: false,
      allowStale: false,
      // An expired flow stays until it is read again or evicted: the fallback while that read fails.
      noDeleteOnStaleGet: true,
      onInsert: (_v, slug) => {
        this.#slugs.add(slug);
      },
      dispose: (flow, slug, reason) => {
        // 'set': a new value replaced this one; the slug stays.
        if (reason !== 'set') this.#slugs.delete(slug);
        if (reason === 'evict' || reason === 'expire') this.#keepStale(slug, flow);
        if (reason === 'evict') this.evictions++;
      },
    });
  }

  /** The fresh cached flow, `null` for a known-missing slug, `undefined` when it must be loaded. */
  peek(slug: string): CompiledFlow | null | undefined {
    const flow = this.#lru.get(slug);
    if (flow !== undefined) {
      this.hits++;
      return flow;
    }
    if (!this.#unknown.has(slug)) return undefined;
    this.hits++;
    return null;
  }

  /** The flow cached for a slug, fresh or stale, without counting a hit (the reload compares with it). */
  current(slug: string): CompiledFlow | undefined {
    return this.#lru.peek(slug, { allowStale: true });
  }

  /**
   * Loads (once, however many callers wait) and caches. When the load fails, the last known flow
   * is served if there is one (expired, evicted or invalidated); otherwise the failure surfaces
   * (`db.unavailable`).
   */
  async load(slug: string): Promise<CompiledFlow | null> {
    this.misses++;
    let superseded: CompiledFlow | undefined | null = null;
    // A write invalidating the slug while it is read: the second attempt reads the new data.
    for (let attempt = 0; attempt < 2; attempt++) {
      const reading = this.#read(slug);
      const read = await reading.done;
      if ('failed' in read) break;
      if (!reading.superseded) return read.flow ?? null;
      superseded = read.flow;
    }
    // Written to again during each read, the database answering: the last read, which began after
    // every write but those made while it ran (a click racing a write sees either side of it).
    // Not the stale fallback, which is older still (a flow deleted since, a paused one active).
    if (superseded !== null) return superseded ?? null;
    const stale = this.#lru.peek(slug, { allowStale: true }) ?? this.#lastKnown.get(slug);
    if (stale !== undefined) {
      this.staleServed++;
      return stale;
    }
    const cause = this.#lastError;
    throw cause instanceof ApiError ? cause : new ApiError('db.unavailable', undefined, { cause });
  }

  #read(slug: string): Reading {
    const running = this.#reading.get(slug);
    if (running !== undefined) return running;
    const reading: Reading = { done: undefined as unknown as Promise<Read>, superseded: false };
    reading.done = this.#load(slug).then(
      (flow): Read => {
        if (this.#reading.get(slug) === reading) this.#reading.delete(slug);
        if (reading.superseded) return { flow };
        this.#lastKnown.delete(slug);
        if (flow === undefined) {
          // Deleted meanwhile: what was cached must not be served again.
          this.#lru.delete(slug);
          this.#unknown.add(slug);
        } else {
          this.#unknown.delete(slug);
          this.#lru.set(slug, flow);
        }
        return { flow };
      },
      (err: unknown): Read => {
        if (this.#reading.get(slug) === reading) this.#reading.delete(slug);
        this.#lastError = err;
        return { failed: err };
      },
    );
    this.#reading.set(slug, reading);
    return reading;
  }

  /** Keeps a flow leaving the LRU as the fallback for when it cannot be read again. */
  #keepStale(slug: string, flow: CompiledFlow): void {
    this.#lastKnown.delete(slug);
    this.#lastKnown.set(slug, flow);
    if (this.#lastKnown.size > this.#max) this.#lastKnown.delete(this.#lastKnown.keys().next().value!);
  }

  /**
   * Re-reads every cached slug from storage (`cache.reload`), flows and unknown slugs alike, a
   * chunk of slugs per query pair, yielding the event loop between chunks and between compiled
   * flows so that no turn is held for more than a few ms at any cache size. A chunk that fails
   * leaves its entries as they were (stale beats down); the first failure is thrown after every
   * chunk has been tried. A slug changed (invalidated) or dropped while the reload ran is not put
   * back: the next click loads it fresh. Stops early when `signal` aborts.
   */
  async reloadAll(signal?: AbortSignal): Promise<number> {
    // Live: a slug cached after this point is reloaded too, one evicted meanwhile is not.
    const cached = both(this.#slugs.values(), this.#unknown.slugs());
    const invalidated = new Set<string>();
    this.#reloads.add(invalidated);
    const slice = new TimeSlice();
    let failure: unknown;
    let reloaded = 0;
    let chunk = 25;
    try {
      while (!signal?.aborted) {
        const part = take(cached, chunk);
        if (part.length === 0) break;
        try {
          const loaded = await this.#loadMany(part, slice);
          for (const slug of part) {
            const wasFlow = this.#lru.peek(slug, { allowStale: true }) !== undefined;
            if (!wasFlow && !this.#unknown.holds(slug)) {
              // Evicted or dropped meanwhile; a load that is still running adds it back when it lands.
              this.#slugs.delete(slug);
              continue;
            }
            if (invalidated.has(slug)) continue;
            const flow = loaded.flows.get(slug);
            if (flow !== undefined) {
              this.#unknown.delete(slug);
              this.#lru.set(slug, flow);
            } else {
              if (wasFlow) this.#lru.delete(slug);
              this.#lastKnown.delete(slug);
              this.#unknown.add(slug);
            }
            reloaded++;
          }
          // Sized so that the next query reads about RELOAD_ROWS_PER_QUERY stream rows.
          if (loaded.rows > 0) {
            const perFlow = loaded.rows / Math.max(1, loaded.flows.size);
            chunk = Math.round(RELOAD_ROWS_PER_QUERY / perFlow);
            chunk = Math.min(RELOAD_CHUNK_MAX, Math.max(RELOAD_CHUNK_MIN, chunk));
          }
        } catch (err) {
          this.#lastError = err;
          failure ??= err;
          // The database cannot be reached: every chunk left would wait out its query timeout in
          // turn (a hung network held a reload to its task's 30 s timeout). What is cached stays.
          if (hasCode(err, 'db.unavailable')) break;
        }
        await slice.pause();
      }
    } finally {
      this.#reloads.delete(invalidated);
    }
    if (failure !== undefined) throw failure;
    return reloaded;
  }

  /**
   * A write changed the slug's flow: what is cached (or being read) is not served again, but as the
   * fallback, unless `gone`: the write left the slug routing nowhere (its flow deleted, paused or
   * given another slug), and no outage may bring the flow back there.
   */
  invalidate(slug: string, gone = false): void {
    for (const running of this.#reloads) running.add(slug);
    const reading = this.#reading.get(slug);
    if (reading !== undefined) {
      reading.superseded = true;
      this.#reading.delete(slug);
    }
    const current = this.#lru.peek(slug, { allowStale: true });
    if (gone) this.#lastKnown.delete(slug);
    else if (current !== undefined) this.#keepStale(slug, current);
    this.#lru.delete(slug);
    this.#unknown.delete(slug);
  }

  clear(): void {
    this.#lru.clear();
    this.#unknown.clear();
  }

  section(): CacheSection {
    const looked = this.hits + this.misses;
    return {
      entries: this.#lru.size,
      max_entries: this.#max,
      hits: this.hits,
      misses: this.misses,
      evictions: this.evictions,
      hit_ratio: looked === 0 ? 0 : Math.round((this.hits / looked) * 10_000) / 10_000,
      unknown_slugs: {
        entries: this.#unknown.size,
        max_entries: this.#unknown.maxEntries,
        hits: this.#unknown.hits,
        evictions: this.#unknown.evictions,
      },
      stale: { entries: this.#lastKnown.size, max_entries: this.#max, served: this.staleServed },
    };
  }
}

/** The values of `a`, then those of `b` (each walked live). */
function* both(a: Iterator<string>, b: Iterator<string>): Generator<string> {
  for (let n = a.next(); !n.done; n = a.next()) yield n.value;
  for (let n = b.next(); !n.done; n = b.next()) yield n.value;
}
