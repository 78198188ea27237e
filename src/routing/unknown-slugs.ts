/**
 * Slugs kept as known to have no flow, at most: apart from the flows' cache, so that however many
 * distinct slugs are asked for, they never push a flow out (about 100–200 bytes each, ~2 MB full).
 */
export const UNKNOWN_SLUGS_KEPT = 10_000;

/**
 * The routing cache's negative entries (docs/routing.md#cache): slugs the database said have no
 * flow, each answered from memory for `ttlMs` after it was read. Bounded by {@link UNKNOWN_SLUGS_KEPT}:
 * past it the slug first recorded longest ago is dropped (and read again if asked for again). A
 * flood of distinct slugs therefore costs one database read per slug, churns this map and touches
 * nothing else.
 */
export class UnknownSlugs {
  /** Slug → when its entry expires (`now()`'s scale). Insertion order is the order dropped in. */
  readonly #until = new Map<string, number>();
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;
  hits = 0;
  evictions = 0;

  constructor(opts: { ttlMs: number; maxEntries?: number; now: () => number }) {
    this.#ttlMs = opts.ttlMs;
    this.#max = opts.maxEntries ?? UNKNOWN_SLUGS_KEPT;
    this.#now = opts.now;
  }

  get size(): number {
    return this.#until.size;
  }

  get maxEntries(): number {
    return this.#max;
  }

  /** True (and counted) when `slug` is known to have no flow and its entry is fresh. */
  has(slug: string): boolean {
    const until = this.#until.get(slug);
    if (until === undefined) return false;
    if (until <= this.#now()) {
      this.#until.delete(slug);
      return false;
    }
    this.hits++;
    return true;
  }

  /** Whether `slug` has an entry, fresh or not (the reload asks), without counting. */
  holds(slug: string): boolean {
    return this.#until.has(slug);
  }

  /**
   * Records (or refreshes) that `slug` has no flow. A refreshed entry keeps its place: the reload
   * walks this map while it refreshes it, and must not meet an entry twice.
   */
  add(slug: string): void {
    if (!this.#until.has(slug) && this.#until.size >= this.#max) {
      this.#until.delete(this.#until.keys().next().value!);
      this.evictions++;
    }
    this.#until.set(slug, this.#now() + this.#ttlMs);
  }

  delete(slug: string): void {
    this.#until.delete(slug);
  }

  clear(): void {
    this.#until.clear();
  }

  /** The slugs held, live: safe to walk a piece at a time while entries come and go. */
  slugs(): IterableIterator<string> {
    return this.#until.keys();
  }
}
