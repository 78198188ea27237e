import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import type { CompiledFlow } from '../../src/routing/compiled-flow.ts';
import { compileFlow, RoutingCache } from '../../src/routing/index.ts';
import { flowRecord, streamRecord } from '../helpers/records.ts';

/** A compiled flow for `slug`, told apart from another of the same slug by `version` (as its cost). */
const flowOf = (slug: string, version = 1): CompiledFlow =>
  compileFlow(flowRecord({ id: `id-${slug}`, slug, cost_per_click: version }), [
    streamRecord({ id: `s-${slug}`, flow_id: `id-${slug}`, type: 'default' }),
  ]);

/**
 * A cache over a pretend database holding `slugs`, counting what each reload chunk asked for;
 * `version` is what the database answers now.
 */
function cacheOver(slugs: readonly string[], maxEntries = 100) {
  const db = {
    version: 1,
    asked: [] as string[][],
    fail: new Set<string>(),
    /** Every chunk fails as an unreachable database does. */
    down: false,
    /** When set, the next chunk waits for it (a test changes the cache meanwhile). */
    hold: undefined as Promise<void> | undefined,
  };
  const cache = new RoutingCache({
    maxEntries,
    ttlMs: 3_600_000,
    load: async (slug) => (slugs.includes(slug) ? flowOf(slug, db.version) : undefined),
    loadMany: async (part) => {
      db.asked.push([...part]);
      const hold = db.hold;
      db.hold = undefined;
      await hold;
      if (db.down) throw new ApiError('db.unavailable');
      if (part.some((s) => db.fail.has(s))) throw new Error('the database refused the chunk');
      const flows = new Map<string, CompiledFlow>();
      for (const slug of part) if (slugs.includes(slug)) flows.set(slug, flowOf(slug, db.version));
      return { flows, rows: flows.size };
    },
  });
  return { cache, db };
}

const slugs = (n: number) => Array.from({ length: n }, (_, i) => `s${i}`);
const versionOf = (cache: RoutingCache, slug: string) => cache.current(slug)?.cost;

describe('routing cache: reloading every cached slug (cache.reload)', () => {
  test('every cached slug is read again, in chunks, and what changed is served', async () => {
    const all = slugs(250);
    const { cache, db } = cacheOver(all, 1000);
    for (const s of all) await cache.load(s);
    await cache.load('nope'); // known missing: reloaded too, still missing
    db.version = 2;
    assert.equal(await cache.reloadAll(), 251);
    const asked = db.asked.flat();
    assert.deepEqual([...asked].sort(), [...all, 'nope'].sort(), 'each cached slug once');
    assert.ok(db.asked.length > 1, 'in more than one chunk');
    for (const s of all) assert.equal(versionOf(cache, s), 2);
    assert.equal(await cache.load('nope'), null);
  });

  test('slugs evicted or invalidated before the reload are not read; the count is what is cached', async () => {
    const all = slugs(10);
    const { cache, db } = cacheOver(all, 6);
    for (const s of all) await cache.load(s); // s0…s3 evicted
    cache.invalidate('s9');
    assert.equal(cache.section().entries, 5);
    assert.equal(await cache.reloadAll(), 5);
    assert.deepEqual(db.asked.flat().sort(), ['s4', 's5', 's6', 's7', 's8']);
  });

  test('a slug cached while the reload runs is read too; one dropped meanwhile is not', async () => {
    const all = slugs(60);
    const { cache, db } = cacheOver(all, 50);
    for (const s of all.slice(0, 40)) await cache.load(s);
    db.version = 2;
    let release!: () => void;
    db.hold = new Promise((r) => {
      release = r;
    });
    const reload = cache.reloadAll();
    // While the first chunk is being read: ten slugs more, and s39 (not read yet) invalidated.
    await new Promise((r) => setImmediate(r));
    for (const s of all.slice(40, 50)) await cache.load(s);
    cache.invalidate('s39');
    release();
    await reload;
    const asked = db.asked.flat();
    assert.ok(!asked.includes('s39'), 's39 was dropped before its turn');
    for (const s of all.slice(40, 50))
      assert.ok(asked.includes(s), `${s}, cached during the reload, was read`);
    assert.equal(new Set(asked).size, asked.length, 'no slug twice');
    assert.equal(versionOf(cache, 's0'), 2);
  });

  test('a chunk that fails keeps its entries (stale beats down); the others are reloaded, then the failure is thrown', async () => {
    const all = slugs(120);
    const { cache, db } = cacheOver(all, 1000);
    for (const s of all) await cache.load(s);
    db.version = 2;
    db.fail.add('s0');
    await assert.rejects(cache.reloadAll(), /the database refused the chunk/);
    assert.equal(versionOf(cache, 's0'), 1, 'kept as it was');
    assert.equal(versionOf(cache, 's119'), 2, 'the later chunks were still reloaded');
  });

  test('a database that cannot be reached ends the reload at its first chunk: the rest would only wait', async () => {
    const all = slugs(120);
    const { cache, db } = cacheOver(all, 1000);
    for (const s of all) await cache.load(s);
    db.asked.length = 0;
    db.down = true;
    await assert.rejects(
      cache.reloadAll(),
      (err: unknown) => err instanceof ApiError && err.code === 'db.unavailable',
    );
    assert.equal(db.asked.length, 1, 'one chunk asked');
    assert.equal(versionOf(cache, 's119'), 1, 'everything cached is kept');
  });

  test('an abort stops the reload between chunks', async () => {
    const all = slugs(200);
    const { cache, db } = cacheOver(all, 1000);
    for (const s of all) await cache.load(s);
    const ac = new AbortController();
    const reload = cache.reloadAll(ac.signal);
    ac.abort();
    await reload;
    assert.ok(db.asked.flat().length < 200, `${db.asked.flat().length} slugs read after the abort`);
  });
});

describe('routing cache: unknown slugs and the stale fallback', () => {
  /** A cache over a pretend database of `known` slugs whose reads fail while `db.down`. */
  function over(known: string[], opts: { maxEntries: number; unknownMaxEntries?: number }) {
    const db = { down: false, reads: 0, now: 0 };
    const cache = new RoutingCache({
      maxEntries: opts.maxEntries,
      unknownMaxEntries: opts.unknownMaxEntries,
      ttlMs: 60_000,
      now: () => db.now,
      load: async (slug) => {
        db.reads++;
        if (db.down) throw new ApiError('db.unavailable');
        return known.includes(slug) ? flowOf(slug) : undefined;
      },
    });
    return { cache, db };
  }

  // Unknown slugs were entries of the flows' LRU: a flood of them evicted every flow.
  test('no number of unknown slugs evicts a flow; they are bounded on their own', async () => {
    const flows = slugs(10);
    const { cache, db } = over(flows, { maxEntries: 10, unknownMaxEntries: 100 });
    for (const s of flows) await cache.load(s);
    for (let i = 0; i < 1000; i++) assert.equal(await cache.load(`nope-${i}`), null);
    const section = cache.section();
    assert.equal(section.evictions, 0);
    assert.equal(section.entries, 10);
    for (const s of flows) assert.ok(cache.peek(s), `${s} still cached`);
    assert.deepEqual(section.unknown_slugs, { entries: 100, max_entries: 100, hits: 0, evictions: 900 });
    // The most recent unknown slugs answer from memory, with no read.
    const reads = db.reads;
    assert.equal(cache.peek('nope-999'), null);
    assert.equal(cache.peek('nope-0'), undefined, 'the oldest was dropped');
    assert.equal(db.reads, reads);
    assert.equal(cache.section().unknown_slugs.hits, 1);
  });

  test('a flow evicted for size is served stale while the database is down', async () => {
    const { cache, db } = over(['a', 'b', 'c'], { maxEntries: 2 });
    for (const s of ['a', 'b', 'c']) await cache.load(s);
    assert.equal(cache.current('a'), undefined, 'evicted');
    db.down = true;
    assert.equal((await cache.load('a'))?.slug, 'a');
    assert.equal(cache.section().stale.served, 1);
    await assert.rejects(cache.load('never-seen'), /db\.unavailable|unavailable/i);
    db.down = false;
    assert.equal((await cache.load('a'))?.slug, 'a');
    assert.ok(cache.peek('a'), 'cached again once read');
    assert.equal(cache.section().stale.entries <= 2, true);
  });

  test('an unknown slug is read again after its TTL, and at once when a write invalidates it', async () => {
    const known: string[] = [];
    const { cache, db } = over(known, { maxEntries: 10 });
    assert.equal(await cache.load('late'), null);
    assert.equal(cache.peek('late'), null);
    db.now += 60_000;
    assert.equal(cache.peek('late'), undefined, 'expired');
    assert.equal(await cache.load('late'), null);
    known.push('late');
    cache.invalidate('late');
    assert.equal(cache.peek('late'), undefined);
    assert.equal((await cache.load('late'))?.slug, 'late');
  });

  test('a slug invalidated while it is read is read again: the read before the write is not cached', async () => {
    const known: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let first = true;
    const cache = new RoutingCache({
      maxEntries: 10,
      ttlMs: 60_000,
      load: async (slug) => {
        const answer = known.includes(slug) ? flowOf(slug) : undefined;
        if (first) {
          first = false;
          await gate;
        }
        return answer;
      },
    });
    const loading = cache.load('new');
    known.push('new');
    cache.invalidate('new');
    release();
    assert.equal((await loading)?.slug, 'new');
    assert.ok(cache.peek('new'));
  });
});

// A click's read of a slug was tried twice when writes superseded it; superseded both times, the
// click was answered from the stale fallback (or 503 without one) while the database answered:
// a flow deleted meanwhile was served again (review-30).
describe('routing cache: a slug written to during each of its reads', () => {
  test('is answered from the last read, not from the stale fallback', async () => {
    let exists = true;
    const gates: (() => void)[] = [];
    const cache = new RoutingCache({
      maxEntries: 10,
      ttlMs: 60_000,
      load: async (slug) => {
        const answer = exists ? flowOf(slug) : undefined;
        await new Promise<void>((r) => gates.push(r));
        return answer;
      },
    });
    const readsBegun = async (n: number) => {
      while (gates.length < n) await new Promise((r) => setImmediate(r));
    };
    const cached = cache.load('x');
    await readsBegun(1);
    gates.shift()!();
    assert.equal((await cached)?.slug, 'x');
    // Deleted: the cached flow is now only the fallback for an outage.
    exists = false;
    cache.invalidate('x');
    const click = cache.load('x');
    await readsBegun(1);
    cache.invalidate('x');
    gates.shift()!();
    await readsBegun(1);
    cache.invalidate('x');
    gates.shift()!();
    assert.equal(await click, null);
    assert.equal(cache.section().stale.served, 0);
  });
});
