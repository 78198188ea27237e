import { LRUCache } from 'lru-cache';
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
      fetchMethod: async (slug) => (await opts.load(slug)) ?? MISSING,
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

  /** Loads (once, however many callers wait) and caches; stale data when the load fails. */
  async load(slug: string): Promise<CompiledFlow | null> {
    this.misses++;
    const e = await this.#lru.fetch(slug);
    return e === undefined || e === MISSING ? null : (e as CompiledFlow);
  }

  invalidate(slug: string): void {
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
