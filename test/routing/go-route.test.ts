import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { flowWithDefault, startTestNode, type TestNode } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { USER_AGENTS } from '../helpers/user-agents.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

/** A browser's user agent: a click without one is a bot (docs/routing.md#bots), never a hit. */
const PERSON = { 'user-agent': USER_AGENTS.chromeWindows };

for (const backend of BACKENDS) {
  describe(`flows, streams and /go/:slug on ${backend.name}`, async () => {
    let t: TestNode;
    let admin: string;
    let viewer: string;
    const { it } = await nodeSuite(backend, {
      node: { random: seeded(7), yaml: 'cache:\n  ttl_ms: 60000\n' },
      onStart: async (node) => {
        t = node;
        admin = await t.token('admin');
        viewer = await t.token('viewer');
      },
    });

    const call = async <T>(path: string, body: unknown, token = admin, status = 200): Promise<T> => {
      const res = await t.acp(path, token, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path}: ${JSON.stringify(json)}`);
      return json;
    };
    const go = async (slug: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${t.url}/go/${slug}`, {
        redirect: 'manual',
        headers: { ...PERSON, ...headers },
      });
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
        const res = await fetch(`${t.url}/go/${slug}`, { redirect: 'manual', headers: PERSON });
        const body = (await res.json()) as { error: { code: string } };
        assert.equal(res.status, 404, slug);
        assert.equal(body.error.code, 'resource.not_found');
        assert.equal(t.logs.apiErrors(res.headers.get('x-request-id')!).length, 1);
      }
      await t.node.clickLog.flush();
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
      const before = t.node.ledger.counters.totalHits;
      const N = 200;
      const res = await Promise.all(Array.from({ length: N }, () => go('busy')));
      assert.ok(res.every((r) => r.status === 302));
      await t.node.clickLog.flush();
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
      assert.equal(t.node.ledger.counters.totalHits - before, N);
    });

    it('system metrics: cache, streams and traffic_flows sections follow the clicks', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'sections', name: 's' });
      await call('/acp/streams/create', {
        flow_id: flow.id,
        name: 'd',
        type: 'default',
        target_url: 'https://d.test/',
      });
      type Counts = { entries: number; hits: number; max_entries: number };
      type M = {
        cache: Counts & {
          misses: number;
          hit_ratio: number;
          unknown_slugs: Counts;
          stale: Record<string, number>;
        };
        streams: { hits: number; total: number };
        traffic_flows: { clicks: number; total: number; active: number };
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
        'stale',
        'unknown_slugs',
      ]);
      assert.equal(after.cache.max_entries, 10_000);
      // The unknown slug is kept apart from the flows (docs/routing.md#cache), with counters of its own.
      assert.equal(after.cache.unknown_slugs.max_entries, 10_000);
      assert.equal(after.cache.unknown_slugs.entries - before.cache.unknown_slugs.entries, 1);
      assert.equal(after.cache.unknown_slugs.hits - before.cache.unknown_slugs.hits, 1);
      assert.deepEqual(Object.keys(after.cache.stale).sort(), ['entries', 'max_entries', 'served']);
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
        { filters: { countries_include: ['DEU'] } },
        { filters: { countries_include: ['UK'] } },
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
      // A code in lower case is the same country (as a proxy's `cf-ipcountry: de` is read): stored once, upper case.
      const lower = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'lower',
        type: 'regular',
        target_url: 'https://ok.test/',
        filters: {
          countries_include: ['de', 'DE', 'at'],
          rules: [{ field: 'country', op: 'is_not', values: ['fr', 'FR'] }],
        },
      });
      assert.deepEqual(lower.filters, {
        countries_include: ['DE', 'AT'],
        rules: [{ field: 'country', op: 'is_not', values: ['FR'] }],
      });
      // A refusal names the value as sent, where it was sent.
      const named = await call<{ error: { details: { path: string; message: string }[] } }>(
        '/acp/streams/create',
        {
          flow_id: flow.id,
          name: 'bad',
          type: 'regular',
          target_url: 'https://ok.test/',
          filters: { countries_exclude: ['fr', 'FR', 'Fr', 'xx'] },
        },
        admin,
        400,
      );
      assert.deepEqual(
        named.error.details.map((d) => [d.path, d.message]),
        [['/filters/countries_exclude/3', '"xx" is not an ISO 3166-1 alpha-2 country code']],
      );
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

    it('an IDN target host is stored in punycode and redirects 30x with the normalised Location', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'idn', name: 'i' });
      const s = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'jp',
        type: 'default',
        target_url: 'https://例え.jp/?c={country}',
        redirect_code: 307,
      });
      assert.equal(s.target_url, 'https://xn--r8jz45g.jp/?c={country}');
      const r = await go('idn', { 'cf-ipcountry': 'jp' });
      assert.equal(r.status, 307);
      assert.equal(r.headers.get('location'), 'https://xn--r8jz45g.jp/?c=JP');
      const updated = await call<StreamRecord>('/acp/streams/update', {
        id: s.id,
        target_url: 'https://Bücher.example/{flow}',
      });
      assert.equal(updated.target_url, 'https://xn--bcher-kva.example/{flow}');
      assert.equal((await go('idn')).headers.get('location'), 'https://xn--bcher-kva.example/idn');
    });

    it('a non-Latin-1 target path is stored percent-encoded and redirects with it', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'path-utf8', name: 'p' });
      const s = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'ru',
        type: 'default',
        target_url: 'https://x.test/путь/{stream}?q=ü€#разд',
      });
      const stored =
        'https://x.test/%D0%BF%D1%83%D1%82%D1%8C/{stream}?q=%C3%BC%E2%82%AC#%D1%80%D0%B0%D0%B7%D0%B4';
      assert.equal(s.target_url, stored);
      const r = await go('path-utf8');
      assert.equal(r.status, 302);
      assert.equal(r.headers.get('location'), stored.replace('{stream}', s.id));
    });

    it('CR, LF, NUL, DEL and U+2028 in target_url are refused with 400 validation.invalid_input naming target_url', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'ctl', name: 'c' });
      const ok = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'ok',
        type: 'default',
        target_url: 'https://ok.test/',
      });
      for (const c of ['\r', '\n', '\r\n', '\0', '\x7f', '\u2028', '\u2029', '\x85', '\t']) {
        for (const [path, body] of [
          [
            '/acp/streams/create',
            { flow_id: flow.id, name: 'bad', type: 'regular', target_url: `https://x.test/a${c}b` },
          ],
          ['/acp/streams/update', { id: ok.id, target_url: `https://x.test/?q=${c}` }],
        ] as const) {
          const res = await t.acp(path, admin, body);
          const json = (await res.json()) as {
            error: { code: string; message: string; details: { path: string }[] };
          };
          assert.equal(res.status, 400, `${path} ${JSON.stringify(c)}`);
          assert.equal(json.error.code, 'validation.invalid_input');
          // The schema refuses C0/C1 controls for every text field, the target rule also U+2028/U+2029.
          assert.match(json.error.message, /\/target_url:? must not contain control characters/);
          assert.equal(json.error.details[0]?.path, '/target_url');
          assert.equal(t.logs.apiErrors(res.headers.get('x-request-id')!).length, 1);
        }
      }
      const page = await call<{ items: StreamRecord[] }>(
        '/acp/streams/list',
        { filter: { flow_id: flow.id } },
        viewer,
      );
      assert.deepEqual(
        page.items.map((s) => [s.name, s.target_url, s.version]),
        [['ok', 'https://ok.test/', ok.version]],
        'nothing half-written',
      );
    });

    it('a macro in the host is refused: the client X-Request-Id cannot pick the redirect host', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'host-macro', name: 'h' });
      for (const target_url of [
        'https://example.com{request_id}/',
        'https://{country}.example.com/',
        'https://x.test:{flow}/',
        'https://{stream}@x.test/',
      ]) {
        const res = await t.acp('/acp/streams/create', admin, {
          flow_id: flow.id,
          name: 'h',
          type: 'default',
          target_url,
        });
        const json = (await res.json()) as { error: { code: string; message: string } };
        assert.equal(res.status, 400, target_url);
        assert.equal(json.error.code, 'validation.invalid_input');
        assert.match(
          json.error.message,
          /^\/target_url: macro \{\w+\} stands in the scheme, user info, host or port; macros may stand only in the path, query and fragment$/,
        );
      }
      const r = await go('host-macro', { 'x-request-id': '.evil.net' });
      assert.equal(r.status, 404, 'no stream was stored');
      assert.equal(r.headers.get('location'), null);
    });

    it('a target stored raw (bypassing validation) never makes a click a 500 and a refused one is not counted', async () => {
      const raw = async (slug: string, streams: [string, StreamRecord['type'], string][]) => {
        const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug, name: slug });
        const ids: string[] = [];
        for (const [name, type, target_url] of streams) {
          const s = await t.node.storage.streams.create({
            flow_id: flow.id,
            name,
            type,
            position: ids.length,
            weight: 100,
            status: 'active',
            filters: {},
            target_url,
            redirect_code: 302,
          });
          ids.push(s.id);
        }
        return { flow, ids };
      };
      const mixed = await raw('raw-mixed', [
        ['crlf', 'regular', 'https://x.test/a\r\nset-cookie: a=b'],
        ['fine', 'default', 'https://fine.test/'],
      ]);
      const only = await raw('raw-only', [['del', 'regular', 'https://x.test/\x7f\u2028']]);
      const idn = await raw('raw-idn', [['idn', 'default', 'https://例え.jp/パス']]);
      const hostMacro = await raw('raw-host-macro', [
        ['evil', 'default', 'https://example.com{request_id}/'],
      ]);

      const r1 = await go('raw-mixed');
      assert.equal(r1.status, 302);
      assert.equal(r1.headers.get('location'), 'https://fine.test/');
      assert.equal(r1.headers.get('set-cookie'), null);
      const r2 = await go('raw-idn');
      assert.equal(r2.status, 302);
      assert.equal(r2.headers.get('location'), 'https://xn--r8jz45g.jp/%E3%83%91%E3%82%B9');
      for (const [slug, headers] of [
        ['raw-only', {}],
        ['raw-host-macro', { 'x-request-id': '.evil.example' }],
      ] as const) {
        const res = await fetch(`${t.url}/go/${slug}`, {
          redirect: 'manual',
          headers: { ...PERSON, ...headers },
        });
        const body = (await res.json()) as { error: { code: string; request_id: string } };
        assert.equal(res.status, 404, slug);
        assert.equal(res.statusText, 'Not Found');
        assert.equal(res.headers.get('location'), null);
        assert.equal(res.headers.get('x-server-id'), t.node.serverId);
        const id = res.headers.get('x-request-id')!;
        assert.equal(body.error.code, 'resource.not_found');
        assert.equal(body.error.request_id, id);
        assert.equal(t.logs.apiErrors(id).length, 1);
      }
      const refused = t.logs.lines.filter((l) => String(l.message).startsWith('stream left out of routing'));
      assert.deepEqual(
        refused.map((l) => l.stream_id).sort(),
        [mixed.ids[0], only.ids[0], hostMacro.ids[0]].sort(),
      );

      await t.node.clickLog.flush();
      const hits = async (id: string) => (await t.node.storage.streams.get(id))?.hits;
      assert.equal(await hits(mixed.ids[0]!), 0);
      assert.equal(await hits(mixed.ids[1]!), 1);
      assert.equal(await hits(only.ids[0]!), 0);
      assert.equal(await hits(idn.ids[0]!), 1);
      assert.equal(await hits(hostMacro.ids[0]!), 0);
      assert.equal((await t.node.storage.flows.get(only.flow.id))?.clicks, 0);
    });

    it('a burst of concurrent clicks on a cold slug reads storage once (coalesced), then none', async () => {
      const storage = t.node.storage;
      // Written straight to storage: no invalidation notice can arrive in the middle of the burst.
      const flow = await storage.flows.create({
        slug: 'burst',
        name: 'b',
        status: 'active',
        rotation: 'position',
      });
      await storage.streams.create({
        flow_id: flow.id,
        name: 'd',
        type: 'default',
        position: 0,
        weight: 100,
        status: 'active',
        filters: {},
        target_url: 'https://burst.test/{stream}',
        redirect_code: 302,
      });
      const reads = { flows: 0, streams: 0 };
      const { getBySlug } = storage.flows;
      const { ofFlow } = storage.streams;
      storage.flows.getBySlug = (slug) => {
        if (slug === 'burst') reads.flows++;
        return getBySlug.call(storage.flows, slug);
      };
      storage.streams.ofFlow = (id) => {
        if (id === flow.id) reads.streams++;
        return ofFlow.call(storage.streams, id);
      };
      try {
        const burst = async () =>
          (await Promise.all(Array.from({ length: 50 }, () => go('burst')))).map((r) => r.status);
        assert.deepEqual(new Set(await burst()), new Set([302]));
        assert.deepEqual(reads, { flows: 1, streams: 1 });
        assert.deepEqual(new Set(await burst()), new Set([302]));
        assert.deepEqual(reads, { flows: 1, streams: 1 }, 'cached: no read');
      } finally {
        storage.flows.getBySlug = getBySlug;
        storage.streams.ofFlow = ofFlow;
      }
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
    const flow = await flowWithDefault(t, admin, 'last', 'https://d.test/');
    const N = 120;
    await Promise.all(
      Array.from({ length: N }, () =>
        fetch(`${t.url}/go/last`, { redirect: 'manual', headers: PERSON }).then((r) => r.arrayBuffer()),
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
