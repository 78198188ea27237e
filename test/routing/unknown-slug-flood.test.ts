import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { flowWithDefault, startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, pgBehindProxy, testSchema } from '../helpers/postgres.ts';
import type { TcpProxy } from '../helpers/tcp-proxy.ts';
import { BACKENDS } from '../storage/backends.ts';

/**
 * Unknown slugs used to be cached as entries of the flows' own LRU: 12,000 distinct ones (bots,
 * stale links, a scanner) pushed the real flows out (cache.max_entries is 10,000 by default), each
 * later click read the database again, and on PostgreSQL with the database briefly unreachable a
 * real flow answered 503 instead of its redirect. Unknown slugs now have a bounded cache of their
 * own, and a flow evicted for size is kept as a stale fallback.
 */
const FLOOD = 12_000;

const go = (t: TestNode, slug: string) => fetch(`${t.url}/go/${slug}`, { redirect: 'manual' });

/** `n` distinct unknown slugs asked for, `width` at a time: how many answered each status. */
async function flood(t: TestNode, n: number, width = 32): Promise<Record<number, number>> {
  let next = 0;
  const statuses: Record<number, number> = {};
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const res = await go(t, `nope-${next++}`);
        await res.arrayBuffer();
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      }
    }),
  );
  return statuses;
}

type CacheStats = {
  entries: number;
  misses: number;
  evictions: number;
  unknown_slugs: { entries: number; max_entries: number };
};
const stats = (t: TestNode) => t.node.routing.cache.section() as unknown as CacheStats;

for (const backend of BACKENDS) {
  const skip = !(await backend.available()) && `${backend.label} unavailable`;
  describe(`routing cache under a flood of unknown slugs (${backend.label})`, { skip }, () => {
    let t: TestNode;
    before(async () => {
      t = await backend.startNode();
    });
    after(async () => {
      await t?.close();
    });

    test(`${FLOOD} distinct unknown slugs do not evict a real flow: its clicks read no database`, async () => {
      const admin = await t.token('admin', 'ops');
      await flowWithDefault(t, admin, 'real');
      assert.equal((await go(t, 'real')).status, 302);
      const answered = await flood(t, FLOOD);
      const before = stats(t);
      assert.equal(before.evictions, 0, 'no flow was evicted');
      assert.ok(t.node.routing.cache.current('real') !== undefined, 'the real flow is still cached');
      for (let i = 0; i < 5; i++) assert.equal((await go(t, 'real')).status, 302);
      assert.equal(stats(t).misses, before.misses, 'the real flow was served from memory');
      assert.ok(before.unknown_slugs.entries <= before.unknown_slugs.max_entries);
      assert.deepEqual(answered, { 404: FLOOD });
    });
  });
}

describe('routing cache with PostgreSQL cut', {
  skip: !(await pgAvailable()) && 'PostgreSQL unavailable',
}, () => {
  let proxy: TcpProxy;
  let cut = false;
  let schema: string;
  let t: TestNode | undefined;
  before(async () => {
    const behind = await pgBehindProxy();
    proxy = behind.proxy;
    schema = testSchema();
    t = await startTestNode({
      yaml:
        `storage:\n  driver: postgres\n  postgres:\n    url: ${behind.url}\n    schema: ${schema}\n` +
        '    query_timeout_ms: 2000\ncache:\n  max_entries: 3\n',
    });
  });
  after(async () => {
    if (cut) await proxy.up();
    await t?.close();
    await proxy?.down();
    await dropSchema(schema);
  });

  test(`after ${FLOOD} unknown slugs, and a flow evicted for size, clicks still redirect with the database cut`, async () => {
    const node = t!;
    const admin = await node.token('admin', 'ops');
    for (const slug of ['real', 'other-1', 'other-2', 'other-3'])
      await flowWithDefault(node, admin, slug, `https://${slug}.example/`);
    // `real` is clicked first: three other flows then fill the three entries and evict it.
    for (const slug of ['real', 'other-1', 'other-2', 'other-3'])
      assert.equal((await go(node, slug)).status, 302);
    assert.equal(node.node.routing.cache.current('real'), undefined, 'evicted for size');
    // Many at once: on the old cache each load in flight held an LRU place, evicting flows and
    // one another's loads (which then answered 503).
    const answered = await flood(node, FLOOD);
    await proxy.down();
    cut = true;
    const during: Record<string, number> = {};
    for (const slug of ['other-3', 'real']) {
      const res = await go(node, slug);
      during[slug] = res.status;
      if (res.status === 302) assert.equal(res.headers.get('location'), `https://${slug}.example/`);
    }
    assert.deepEqual(during, { 'other-3': 302, real: 302 }, 'clicks while the database is cut');
    assert.deepEqual(answered, { 404: FLOOD });
    const cache = stats(node) as CacheStats & { stale: { served: number } };
    assert.ok(cache.stale.served >= 1, 'the evicted flow was served stale');
  });
});
