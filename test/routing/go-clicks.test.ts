import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe } from 'node:test';
import { CLICK_ID_RE } from '../../src/clicks/index.ts';
import type { FlowRecord, Page, StreamRecord } from '../../src/storage/index.ts';
import { persistCounts, type TestNode, withPostbackKey } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';

for (const backend of BACKENDS) {
  describe(`clicks on /go/:slug on ${backend.name} (#14)`, async () => {
    let t: TestNode;
    let admin: string;
    const { it } = await nodeSuite(backend, {
      node: { random: seeded(3) },
      onStart: async (node) => {
        t = node;
        admin = await t.token('admin');
      },
    });

    const call = async <T>(path: string, body: unknown, status = 200): Promise<T> => {
      const res = await t.acp(path, admin, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path}: ${JSON.stringify(json)}`);
      return json;
    };
    const go = async (path: string, headers: Record<string, string> = {}, method = 'GET') => {
      const res = await fetch(`${t.url}/go/${path}`, { redirect: 'manual', headers, method });
      await res.arrayBuffer();
      return res;
    };
    const flowNamed = async (slug: string) =>
      (await call<Page<FlowRecord>>('/acp/traffic-flows/list', { filter: { slug } })).items[0]!;
    const streamOf = async (flowId: string) =>
      (await call<Page<StreamRecord>>('/acp/streams/list', { filter: { flow_id: flowId } })).items[0]!;
    const stored = async (clickId: string) => {
      await t.node.clickLog.persist();
      const click = await t.node.storage.clicks.get(clickId);
      assert.ok(click, `click ${clickId} stored`);
      return click;
    };

    it('the loop: the click id and sub1 reach the offer, the click is stored, a postback converts it', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'loop', name: 'Loop' });
      const stream = await call<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'offer',
        type: 'default',
        target_url: 'https://offer.test/?aff_sub={click_id}&s={sub1}',
      });
      const res = await go('loop?sub1=abc&other=1', {
        'user-agent': CHROME,
        'accept-language': 'de-CH,de;q=0.9,en;q=0.5',
        referer: 'https://News.Example/article?id=1',
        'cf-ipcountry': 'DE',
      });
      assert.equal(res.status, 302);
      const clickId = res.headers.get('x-click-id')!;
      assert.match(clickId, CLICK_ID_RE);
      assert.equal(res.headers.get('location'), `https://offer.test/?aff_sub=${clickId}&s=abc`);

      const click = await stored(clickId);
      assert.deepEqual(
        {
          flow_id: click.flow_id,
          stream_id: click.stream_id,
          outcome: click.outcome,
          device_type: click.device_type,
          os: click.os,
          browser: click.browser,
          language: click.language,
          referrer_host: click.referrer_host,
          sub1: click.sub1,
          sub2: click.sub2,
          is_unique: click.is_unique,
          is_bot: click.is_bot,
          cost: click.cost,
          ip_prefix: click.ip_prefix,
          server_id: click.server_id,
        },
        {
          flow_id: flow.id,
          stream_id: stream.id,
          outcome: 'redirect',
          device_type: 'desktop',
          os: 'Windows',
          browser: 'Chrome',
          language: 'de',
          referrer_host: 'news.example',
          sub1: 'abc',
          sub2: null,
          is_unique: true,
          is_bot: false,
          cost: 0,
          ip_prefix: '127.0.0.0/24',
          server_id: t.node.serverId,
        },
      );
      // The test node trusts loopback as its proxy: the country header is believed.
      assert.equal(click.country, 'DE');

      const pb = await fetch(
        `${t.url}${withPostbackKey(t, `/postback?click_id=${clickId}&payout=4.20&status=sale`)}`,
      );
      assert.equal(pb.status, 200);
      const body = (await pb.json()) as { click_id: string; status: string };
      assert.deepEqual([body.click_id, body.status], [clickId, 'sale']);
      const [conversion] = await t.node.storage.conversions.ofClick(clickId);
      assert.deepEqual(
        [conversion?.flow_id, conversion?.stream_id, conversion?.sub1, conversion?.payout],
        [flow.id, stream.id, 'abc', 4.2],
      );

      // The same visitor again: a click, not a unique one; another user agent is another visitor.
      const again = await go('loop?sub1=abc', { 'user-agent': CHROME });
      assert.notEqual(again.headers.get('x-click-id'), clickId);
      assert.equal((await stored(again.headers.get('x-click-id')!)).is_unique, false);
      const phone = await go('loop', { 'user-agent': IPHONE });
      const phoneClick = await stored(phone.headers.get('x-click-id')!);
      assert.deepEqual(
        [phoneClick.is_unique, phoneClick.device_type, phoneClick.os, phoneClick.sub1],
        [true, 'mobile', 'iOS', null],
      );
      assert.equal(phone.headers.get('location'), `https://offer.test/?aff_sub=${phoneClick.click_id}&s=`);

      await persistCounts(t.node);
      const listed = await flowNamed('loop');
      assert.deepEqual([listed.clicks, listed.uniques, listed.bots], [3, 2, 0]);
      const s = await streamOf(flow.id);
      assert.deepEqual([s.hits, s.uniques], [3, 2]);
    });

    it('bots (HEAD, link previewers, no user agent) are answered like people, flagged, never counted as clicks', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'bots', name: 'Bots' });
      await call('/acp/streams/create', {
        flow_id: flow.id,
        name: 'page',
        type: 'default',
        target_url: 'https://page.test/{click_id}',
      });
      const before = (await call<{ traffic_flows: Record<string, number> }>('/acp/system/metrics', {}))
        .traffic_flows;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await go('bots', { 'user-agent': 'facebookexternalhit/1.1' }, 'HEAD');
        assert.equal(res.status, 302, 'routed like a person (bot_action: route)');
        const id = res.headers.get('x-click-id')!;
        assert.equal(res.headers.get('location'), `https://page.test/${id}`);
        ids.push(id);
      }
      const empty = await go('bots', { 'user-agent': '' });
      ids.push(empty.headers.get('x-click-id')!);
      assert.equal(new Set(ids).size, 6);
      for (const id of ids) {
        const click = await stored(id);
        assert.deepEqual([click.outcome, click.is_bot, click.is_unique], ['bot', true, false]);
      }
      // A user agent that names no OS or browser is stored as '' on both backends.
      assert.deepEqual([(await stored(ids[5]!)).os, (await stored(ids[5]!)).browser], ['', '']);

      await persistCounts(t.node);
      const listed = await flowNamed('bots');
      assert.deepEqual([listed.clicks, listed.no_match, listed.bots, listed.uniques], [0, 0, 6, 0]);
      assert.equal((await streamOf(flow.id)).hits, 0);
      const after = (await call<{ traffic_flows: Record<string, number> }>('/acp/system/metrics', {}))
        .traffic_flows;
      assert.equal(after.bots! - before.bots!, 6);
      assert.equal(after.clicks, before.clicks);
    });

    it('a flow no stream takes answers 404 with a click id and logs a no_match; an unknown slug is no click', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'picky', name: 'Picky' });
      await call('/acp/streams/create', {
        flow_id: flow.id,
        name: 'jp',
        type: 'forced',
        filters: { countries_include: ['JP'] },
        target_url: 'https://jp.test/',
      });
      for (const attempt of ['cold', 'cached']) {
        const res = await go('picky', { 'user-agent': CHROME });
        assert.equal(res.status, 404, attempt);
        const click = await stored(res.headers.get('x-click-id')!);
        assert.deepEqual([click.outcome, click.stream_id, click.is_bot], ['no_match', null, false]);
      }
      const unknown = await go('no-such-flow', { 'user-agent': CHROME });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.headers.get('x-click-id'), null);
      await persistCounts(t.node);
      const listed = await flowNamed('picky');
      assert.deepEqual([listed.clicks, listed.no_match, listed.bots], [0, 2, 0]);
    });

    it('requests for slugs that route nowhere are counted, and the last slugs named (a typo, a paused flow)', async () => {
      const misses = () => t.node.ledger.slugMisses.section();
      const before = misses();
      const noMatchBefore = t.node.ledger.counters.totalNoMatch;
      const paused = await call<FlowRecord>('/acp/traffic-flows/create', {
        slug: 'on-hold',
        name: 'On hold',
      });
      await call('/acp/streams/create', {
        flow_id: paused.id,
        name: 'd',
        type: 'default',
        target_url: 'https://held.test/',
      });
      await call('/acp/traffic-flows/update', { id: paused.id, version: paused.version, status: 'paused' });
      // Cold, then cached (the fast path): both counted.
      for (let i = 0; i < 3; i++)
        assert.equal((await go('fb-keto-dee', { 'user-agent': CHROME })).status, 404);
      assert.equal((await go('on-hold', { 'user-agent': CHROME })).status, 404);
      assert.equal((await go('%00bad', { 'user-agent': CHROME })).status, 404);
      // A scanner: counted apart, never named, no no-match of people.
      assert.equal(
        (await go('wp-login', { 'user-agent': 'Googlebot/2.1 (+http://www.google.com/bot.html)' })).status,
        404,
      );
      const after = misses();
      assert.equal(after.unknown - before.unknown, 4, 'three typos and one that is no slug at all');
      assert.equal(after.paused - before.paused, 1);
      assert.equal(after.bots - before.bots, 1);
      assert.ok(!after.recent.some((r) => r.slug === 'wp-login'));
      // Each person's request is a no-match of the node (docs/routing.md#fallback-url).
      assert.equal(t.node.ledger.counters.totalNoMatch - noMatchBefore, 5);
      assert.deepEqual(
        after.recent.slice(0, 2).map((r) => [r.slug, r.count, r.flow]),
        [
          ['on-hold', 1, 'paused'],
          ['fb-keto-dee', 3, 'unknown'],
        ],
      );
      assert.ok(!after.recent.some((r) => r.slug.includes('\u0000')), 'what is no slug is not kept by name');
      // The same figures in system metrics.
      const metrics = (await (await t.acp('/acp/system/metrics', admin, {})).json()) as {
        traffic_flows: { unknown_slugs: typeof after };
      };
      assert.deepEqual(metrics.traffic_flows.unknown_slugs.recent.slice(0, 2), after.recent.slice(0, 2));
    });

    it('forward_query appends the incoming query; {param:NAME} and the other macros are filled and encoded', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', {
        slug: 'fwd',
        name: 'Forward',
        forward_query: true,
      });
      assert.equal(flow.forward_query, true);
      await call('/acp/streams/create', {
        flow_id: flow.id,
        name: 'x',
        type: 'default',
        target_url: 'https://x.test/{device_type}/{language}?kw={param:kw}&b={browser}&q={sub2}#frag',
      });
      const res = await go('fwd?kw=a%20b%26c&sub2=%2F&utm=1', {
        'user-agent': CHROME,
        'accept-language': 'fr',
      });
      assert.equal(
        res.headers.get('location'),
        'https://x.test/desktop/fr?kw=a%20b%26c&b=Chrome&q=%2F&kw=a%20b%26c&sub2=%2F&utm=1#frag',
      );
      const plain = await go('fwd', {});
      assert.equal(plain.headers.get('location'), 'https://x.test/other/?kw=&b=&q=#frag');
      // Sent raw (fetch would encode them itself): what a query may not hold in WHATWG's
      // serialisation is encoded, the rest kept as sent (a security review found `"<>'` raw).
      const raw = 'z=a"b<>\'`{}|^~&y=%41';
      const location = await new Promise<string | undefined>((resolve, reject) => {
        const { hostname, port } = new URL(t.url);
        const req = request({ hostname, port, path: `/go/fwd?${raw}` }, (r) => {
          r.resume();
          resolve(r.headers.location);
        });
        req.on('error', reject);
        req.end();
      });
      const expected = new URL(`https://x.test/other/?kw=&b=&q=&${raw}#frag`);
      assert.equal(location, expected.href);
      assert.equal(
        expected.search,
        '?kw=&b=&q=&z=a%22b%3C%3E%27`{}|^~&y=%41',
        'the oracle encodes what it should',
      );

      const off = await call<FlowRecord>('/acp/traffic-flows/update', { id: flow.id, forward_query: false });
      assert.equal(off.forward_query, false);
      const res2 = await go('fwd?kw=z&utm=1', {});
      assert.equal(res2.headers.get('location'), 'https://x.test/other/?kw=z&b=&q=#frag');
    });

    it('{param:NAME} with a bad name, or an unknown macro, is refused at create', async () => {
      const flow = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'refused', name: 'R' });
      for (const target_url of [
        'https://x.test/?a={param:bad name}',
        'https://x.test/?a={param:}',
        'https://x.test/?{clickid}',
      ]) {
        const err = await call<{ error: { code: string } }>(
          '/acp/streams/create',
          { flow_id: flow.id, name: 'x', type: 'default', target_url },
          400,
        );
        assert.equal(err.error.code, 'validation.invalid_input', target_url);
      }
    });
  });
}
