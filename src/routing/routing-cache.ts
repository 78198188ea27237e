import { LRUCache } from 'lru-cache';
import { ApiError, hasCode } from '../errors/index.ts';
import type { CacheSection } from '../telemetry/index.ts';
import { TimeSlice } from '../time/index.ts';
import type { CompiledFlow } from './compiled-flow.ts';

/** Cached answer for a slug that has no flow, so unknown slugs cost one lookup per TTL, not one per click. */
const MISSING = Object.freeze({ missing: true as const });
type Entry = CompiledFlow | typeof MISSING;

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

/**
 * Flows by slug for the hot path (lru-cache, bounded by `cache.max_entries`, fresh for
 * `cache.ttl_ms`). A fresh entry is answered synchronously; a missing or expired one is loaded,
 * and when the database fails the last known entry keeps serving (stale beats down).
 */
export class RoutingCache {
  readonly #lru: LRUCache<string, Entry>;
  readonly #max: number;
  /** What an invalidated slug held, kept only to serve when reloading it fails (database down). */
  readonly #lastKnown = new Map<string, Entry>();
  readonly #loadMany: (slugs: readonly string[], slice: TimeSlice) => Promise<LoadedChunk>;
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

  constructor(opts: {
    maxEntries: number;
    ttlMs: number;
    load: (slug: string) => Promise<CompiledFlow | undefined>;
    /**
     * Reads many slugs at once for {@link reloadAll}, pausing on `slice` between pieces of work;
     * without it, each slug is loaded on its own.
     */
    loadMany?: (slugs: readonly string[], slice: TimeSlice) => Promise<LoadedChunk>;
  }) {
    this.#max = opts.maxEntries;
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
    this.#lru = new LRUCache<string, Entry>({
      max: opts.maxEntries,
      ttl: opts.ttlMs,
      ttlAutopurge: false,
      allowStale: false,
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      noDeleteOnFetchRejection: true,
      fetchMethod: async (slug) => {
        try {
          return (await opts.load(slug)) ?? MISSING;
        } catch (err) {
          this.#lastError = err;
          throw err;
        }
      },
      onInsert: (_v, slug) => {
        this.#slugs.add(slug);
      },
      dispose: (_v, slug, reason) => {
        // 'set': a new value replaced this one; the slug stays.
        if (reason !== 'set') this.#slugs.delete(slug);
        if (reason === 'evict') this.evictions++;
      },
    });
  }

  /** The fresh cached flow, `null` for a known-missing slug, `undefined` when it must be loaded. */
  peek(slug: string): CompiledFlow | null | undefined {
    const e = this.#lru.get(slug);
    if (e === undefined) return undefined;
    this.hits++;
    return e === MISSING ? null : (e as CompiledFlow);
  }

  /** The flow cached for a slug, fresh or stale, without counting a hit (the reload compares with it). */
  current(slug: string): CompiledFlow | undefined {
    const e = this.#lru.peek(slug, { allowStale: true });
    return e === undefined || e === MISSING ? undefined : (e as CompiledFlow);
  }

  /**
   * Loads (once, however many callers wait) and caches. When the load fails, the last known data
   * is served if there is any; otherwise the failure surfaces (`db.unavailable`).
   */
  async load(slug: string): Promise<CompiledFlow | null> {
    this.misses++;
    let e: Entry | undefined;
    for (let attempt = 0; attempt < 2 && e === undefined; attempt++) {
      // A write invalidating the slug aborts an in-flight load; the second attempt reads the new data.
      e = await this.#lru.fetch(slug).catch(() => undefined);
    }
    if (e === undefined) e = this.#lastKnown.get(slug);
    else this.#lastKnown.delete(slug);
    if (e === undefined) {
      const cause = this.#lastError;
      throw cause instanceof ApiError ? cause : new ApiError('db.unavailable', undefined, { cause });
    }
    return e === MISSING ? null : (e as CompiledFlow);
  }

  /**
   * Re-reads every cached slug from storage (`cache.reload`), a chunk of slugs per query pair,
   * yielding the event loop between chunks and between compiled flows so that no turn is held for
   * more than a few ms at any cache size. A chunk that fails leaves its entries as they were
   * (stale beats down); the first failure is thrown after every chunk has been tried. A slug
   * changed (invalidated) or dropped while the reload ran is not put back: the next click loads
   * it fresh. Stops early when `signal` aborts.
   */
  async reloadAll(signal?: AbortSignal): Promise<number> {
    // Live: a slug cached after this point is reloaded too, one evicted meanwhile is not.
    const cached = this.#slugs.values();
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
            if (this.#lru.peek(slug, { allowStale: true }) === undefined) {
              // Gone without a dispose (lru-cache drops an evicted load in flight silently); a
              // load that is still running adds it back when it lands.
              this.#slugs.delete(slug);
              continue;
            }
            if (invalidated.has(slug)) continue;
            this.#lru.set(slug, loaded.flows.get(slug) ?? MISSING);
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

  invalidate(slug: string): void {
    for (const running of this.#reloads) running.add(slug);
    const current = this.#lru.peek(slug, { allowStale: true });
    if (current !== undefined) {
      this.#lastKnown.delete(slug);
      this.#lastKnown.set(slug, current);
      if (this.#lastKnown.size > this.#max) this.#lastKnown.delete(this.#lastKnown.keys().next().value!);
    }
    this.#lru.delete(slug);
  }

  clear(): void {
    this.#lru.clear();
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
    };
  }
}
