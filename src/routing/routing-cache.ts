import { LRUCache } from 'lru-cache';
import { ApiError } from '../errors/index.ts';
import type { CompiledFlow } from './compiled-flow.ts';

/** Cached answer for a slug that has no flow, so unknown slugs cost one lookup per TTL, not one per click. */
const MISSING = Object.freeze({ missing: true as const });
type Entry = CompiledFlow | typeof MISSING;

export interface CacheSection {
  entries: number;
  max_entries: number;
  hits: number;
  misses: number;
  evictions: number;
  hit_ratio: number;
}

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
  #lastError: unknown;
  hits = 0;
  misses = 0;
  evictions = 0;

  constructor(opts: {
    maxEntries: number;
    ttlMs: number;
    load: (slug: string) => Promise<CompiledFlow | undefined>;
  }) {
    this.#max = opts.maxEntries;
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
      dispose: (_v, _k, reason) => {
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

  /** Re-reads every cached slug from storage (`cache.reload`); throws the first failure after trying all. */
  async reloadAll(signal?: AbortSignal): Promise<number> {
    let failure: unknown;
    let reloaded = 0;
    for (const slug of [...this.#lru.keys()]) {
      if (signal?.aborted) break;
      try {
        await this.#lru.fetch(slug, { forceRefresh: true, allowStaleOnFetchRejection: false });
        reloaded++;
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure !== undefined) throw failure;
    return reloaded;
  }

  invalidate(slug: string): void {
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
