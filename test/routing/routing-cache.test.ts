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
