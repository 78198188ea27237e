import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { BACKENDS } from '../storage/backends.ts';

for (const backend of BACKENDS) {
  describe(`flows, streams and /go/:slug on ${backend.name}`, async () => {
    const available = await backend.available();
    const it = (name: string, fn: () => Promise<void>) =>
      test(name, { skip: !available && `${backend.name} unavailable` }, fn);
    let t: TestNode;
    let admin: string;
    let viewer: string;
    before(async () => {
      if (!available) return;
      t = await backend.startNode({ random: seeded(7), yaml: 'cache:\n  ttl_ms: 60000\n' });
      admin = await t.token('admin');
      viewer = await t.token('viewer');
    });
    after(async () => {
      if (available) await t.close();
    });

    const call = async <T>(path: string, body: unknown, token = admin, status = 200): Promise<T> => {
      const res = await t.acp(path, token, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path}: ${JSON.stringify(json)}`);
      return json;
    };
    const go = async (slug: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${t.url}/go/${slug}`, { redirect: 'manual', headers });
      await res.arrayBuffer();
      return res;
    };

    it('an admin builds a flow; the redirect follows forced, regular, default and the country', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'spring', name: 'Spring' });
      assert.equal(flow.status, 'active');
      assert.equal(flow.rotation, 'position');
      const mk = (s: Record<string, unknown>) =>
        call<StreamRecord>('/acp/streams/create', { flow_id: flow.id, ...s });
      const de = await mk({
        name: 'de',
        type: 'forced',
        filters: { countries_include: ['DE'] },
        target_url: 'https://de.test/?c={country}',
      });
      await mk({
        name: 'reg',
        type: 'regular',
        position: 1,
        target_url: 'https://reg.test/{flow}',
        redirect_code: 301,
      });
      assert.equal(de.redirect_code, 302, 'default redirect code');

      const r1 = await go('spring', { 'cf-ipcountry': 'de' });
      assert.equal(r1.status, 302);
      assert.equal(r1.headers.get('location'), 'https://de.test/?c=DE');
      const r2 = await go('spring', { 'cf-ipcountry': 'FR' });
      assert.equal(r2.status, 301);
      assert.equal(r2.headers.get('location'), 'https://reg.test/spring');
    });

    it('a write through the ACP takes effect on the next click (cache invalidated at once)', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'invalidate-me', name: 'x' });
      const s = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'one',
        type: 'default',
        target_url: 'https://one.test/',
      });
      assert.equal((await go('invalidate-me')).headers.get('location'), 'https://one.test/');
      await call('/acp/streams/update', { id: s.id, target_url: 'https://two.test/' });
      assert.equal((await go('invalidate-me')).headers.get('location'), 'https://two.test/');
      await call('/acp/traffic-flows/update', { id: flow.id, status: 'paused' });
      assert.equal((await go('invalidate-me')).status, 404);
      await call('/acp/traffic-flows/update', { id: flow.id, status: 'active', slug: 'renamed' });
      assert.equal((await go('invalidate-me')).status, 404);
      assert.equal((await go('renamed')).status, 302);
      await call('/acp/traffic-flows/delete', { id: flow.id });
      assert.equal((await go('renamed')).status, 404);
      await call('/acp/streams/update', { id: s.id, name: 'gone' }, admin, 404);
    });

    it('no flow, a paused flow and no matching stream are 404 resource.not_found; no-match is counted', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'picky', name: 'p' });
      await call('/acp/streams/create', {
        flow_id: flow.id,
        name: 'jp',
        type: 'regular',
        filters: { countries_include: ['JP'] },
        target_url: 'https://jp.test/',
      });
      for (const slug of ['nope', 'picky', 'UPPER', 'a'.repeat(70)]) {
        const res = await fetch(`${t.url}/go/${slug}`, { redirect: 'manual' });
        const body = (await res.json()) as { error: { code: string } };
        assert.equal(res.status, 404, slug);
        assert.equal(body.error.code, 'resource.not_found');
        assert.equal(t.logs.apiErrors(res.headers.get('x-request-id')!).length, 1);
      }
      await t.node.routing.flush();
      const list = await call<{ items: FlowRecord[] }>(
        '/acp/traffic-flows/list',
        { filter: { slug: 'picky' } },
        viewer,
      );
      assert.equal(list.items[0]?.no_match, 1);
      assert.equal(list.items[0]?.clicks, 0);
    });

    it('counters are exact after N concurrent clicks, in items and sections', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', {
        slug: 'busy',
        name: 'b',
        rotation: 'weight',
      });
      const a = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'a',
        type: 'regular',
        weight: 1,
        target_url: 'https://a.test/',
      });
      const b = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'b',
        type: 'regular',
        weight: 3,
        target_url: 'https://b.test/',
      });
      const before = t.node.routing.streamsSection().hits;
      const N = 200;
      const res = await Promise.all(Array.from({ length: N }, () => go('busy')));
      assert.ok(res.every((r) => r.status === 302));
      await t.node.routing.flush();
      const page = await call<{ items: StreamRecord[]; total: number }>(
        '/acp/streams/list',
        { filter: { flow_id: flow.id }, sort: { by: 'hits', order: 'desc' } },
        viewer,
      );
      const hits = Object.fromEntries(page.items.map((s) => [s.id, s.hits]));
      assert.equal((hits[a.id] ?? 0) + (hits[b.id] ?? 0), N);
      assert.ok((hits[b.id] ?? 0) > (hits[a.id] ?? 0), 'weight 3 beats weight 1');
      assert.equal(page.items[0]?.id, b.id, 'sorted by hits desc');
      assert.ok(page.items[0]?.last_hit_at);
      const flows = await call<{ items: FlowRecord[] }>(
        '/acp/traffic-flows/list',
        { filter: { slug: 'busy' } },
        viewer,
      );
      assert.equal(flows.items[0]?.clicks, N);
      assert.equal(t.node.routing.streamsSection().hits - before, N);
    });

    it('system metrics: cache, streams and traffic_flows sections follow the clicks', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'sections', name: 's' });
      await call('/acp/streams/create', {
        flow_id: flow.id,
        name: 'd',
        type: 'default',
        target_url: 'https://d.test/',
      });
      type M = {
        cache: Record<string, number>;
        streams: Record<string, number>;
        traffic_flows: Record<string, number>;
      };
      const before = await call<M>('/acp/system/metrics', {}, viewer);
      for (let i = 0; i < 3; i++) await go('sections');
      await go('sections-unknown');
      await go('sections-unknown');
      await t.node.routing.refreshAggregates();
      const after = await call<M>('/acp/system/metrics', {}, viewer);
      assert.deepEqual(Object.keys(after.cache).sort(), [
        'entries',
        'evictions',
        'hit_ratio',
        'hits',
        'max_entries',
        'misses',
      ]);
      assert.equal(after.cache.max_entries, 10_000);
      assert.equal(after.cache.misses - before.cache.misses, 2, 'one load per slug');
      assert.equal(
        after.cache.hits - before.cache.hits,
        3,
        'then served from the cache, unknown slug included',
      );
      assert.equal(
        after.cache.hit_ratio,
        Math.round((after.cache.hits / (after.cache.hits + after.cache.misses)) * 10_000) / 10_000,
      );
      assert.equal(after.streams.hits - before.streams.hits, 3);
      assert.equal(after.traffic_flows.clicks - before.traffic_flows.clicks, 3);
      const agg = await t.node.storage.aggregates();
      assert.equal(after.streams.total, agg.streams.total);
      assert.equal(after.traffic_flows.total, agg.traffic_flows.total);
      assert.equal(after.traffic_flows.active, agg.traffic_flows.active);
    });

    it('list responses carry runtime equal to controllers[path] and commit', async () => {
      for (const path of ['/acp/streams/list', '/acp/traffic-flows/list'] as const) {
        await call(path, { filter: { status: 'paused' } }, viewer);
        await call(path, { limit: 0 }, viewer, 400);
        // A list call is recorded when it has been answered: the next call's runtime sees it,
        // exactly as a system metrics call made in between does.
        const m = await call<{ controllers: Record<string, { count: number; errors: number }> }>(
          '/acp/system/metrics',
          {},
          viewer,
        );
        const body = await call<{ runtime: unknown; commit: string; total: number; next_cursor: unknown }>(
          path,
          {},
          viewer,
        );
        assert.deepEqual(body.runtime, m.controllers[path]);
        assert.ok(m.controllers[path]!.count >= 2);
        assert.ok(m.controllers[path]!.errors >= 1);
        assert.equal(body.commit, t.node.telemetry.commit);
        assert.equal(typeof body.total, 'number');
      }
    });

    it('writes need admin; lists any operator; validation errors name the field', async () => {
      const operator = await t.token('operator');
      await call('/acp/traffic-flows/create', { slug: 'x1', name: 'x' }, viewer, 403);
      await call('/acp/traffic-flows/create', { slug: 'x1', name: 'x' }, operator, 403);
      await call('/acp/traffic-flows/list', {}, operator, 200);
      const bad = await call<{ error: { code: string; details: { path: string }[] } }>(
        '/acp/traffic-flows/create',
        { slug: 'Bad Slug', name: 'x' },
        admin,
        400,
      );
      assert.equal(bad.error.code, 'validation.invalid_input');
      assert.equal(bad.error.details[0]?.path, '/slug');
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'valid', name: 'v' });
      await call('/acp/traffic-flows/create', { slug: 'valid', name: 'dup' }, admin, 409);
      for (const body of [
        { weight: 10_001 },
        { redirect_code: 308 },
        { type: 'sometimes' },
        { filters: { countries_include: ['de'] } },
        { target_url: 'https://x.test/{nope}' },
        { filters: { countries_exclude: ['QQ'] } },
      ]) {
        await call(
          '/acp/streams/create',
          { flow_id: flow.id, name: 'n', type: 'regular', target_url: 'https://ok.test/', ...body },
          admin,
          400,
        );
      }
      await call(
        '/acp/streams/create',
        {
          flow_id: '00000000-0000-0000-0000-000000000000',
          name: 'n',
          type: 'regular',
          target_url: 'https://ok.test/',
        },
        admin,
        404,
      );
      await call('/acp/traffic-flows/update', { id: flow.id, version: 99, name: 'stale' }, admin, 409);
      const updated = await call<FlowRecord>('/acp/traffic-flows/update', {
        id: flow.id,
        version: flow.version,
        name: 'fresh',
      });
      assert.equal(updated.version, flow.version + 1);
      await call('/acp/traffic-flows/delete', { id: '00000000-0000-0000-0000-000000000000' }, admin, 404);
    });

    it('paging with limit and cursor walks every flow once', async () => {
      for (let i = 0; i < 7; i++)
        await call('/acp/traffic-flows/create', { slug: `walk-${i}`, name: `w${i}` });
      const slugs: string[] = [];
      let cursor: string | undefined;
      do {
        const page: { items: FlowRecord[]; next_cursor: string | null } = await call(
          '/acp/traffic-flows/list',
          { sort: { by: 'slug', order: 'asc' }, limit: 3, ...(cursor ? { cursor } : {}) },
          viewer,
        );
        assert.ok(page.items.length <= 3);
        slugs.push(...page.items.map((f) => f.slug));
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      assert.deepEqual(slugs, [...slugs].sort());
      assert.equal(new Set(slugs).size, slugs.length);
      for (let i = 0; i < 7; i++) assert.ok(slugs.includes(`walk-${i}`));
      await call('/acp/traffic-flows/list', { limit: 501 }, viewer, 400);
      await call('/acp/traffic-flows/list', { cursor: 'not-a-cursor' }, viewer, 400);
    });
  });
}

describe('graceful stop persists every counted click', () => {
  test('N clicks, stop, reopen: the store has exactly N', async () => {
    const t = await startTestNode();
    const admin = await t.token('admin');
    const flow = (await (
      await t.acp('/acp/traffic-flows/create', admin, { slug: 'last', name: 'l' })
    ).json()) as FlowRecord;
    await (
      await t.acp('/acp/streams/create', admin, {
        flow_id: flow.id,
        name: 'd',
        type: 'default',
        target_url: 'https://d.test/',
      })
    ).json();
    const N = 120;
    await Promise.all(
      Array.from({ length: N }, () =>
        fetch(`${t.url}/go/last`, { redirect: 'manual' }).then((r) => r.arrayBuffer()),
      ),
    );
    await t.node.stop();
    const { openSqlite } = await import('../../src/storage/index.ts');
    const { systemClock } = await import('../../src/time/index.ts');
    const store = openSqlite(t.node.config.storage.sqlite.path, systemClock);
    try {
      assert.equal((await store.flows.get(flow.id))?.clicks, N);
      const [s] = await store.streams.ofFlow(flow.id);
      assert.equal(s?.hits, N);
    } finally {
      await store.close();
      await t.close();
    }
  });
});
