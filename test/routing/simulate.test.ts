import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { Simulation } from '../../src/routing/index.ts';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { persistCounts, type TestNode } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';
const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';

for (const backend of BACKENDS) {
  describe(`routing simulator on ${backend.name}`, async () => {
    let t: TestNode;
    let admin: string;
    let viewer: string;
    let flow: FlowRecord;
    const streams: Record<string, StreamRecord> = {};
    const { it } = await nodeSuite(backend, {
      node: { random: seeded(9) },
      onStart: async (node) => {
        t = node;
        admin = await t.token('admin');
        viewer = await t.token('viewer', 'sim-viewer');
        flow = await call<FlowRecord>(admin, '/acp/traffic-flows/create', {
          slug: 'sim',
          name: 'sim',
          timezone: 'Europe/Berlin',
        });
        const add = async (name: string, body: Record<string, unknown>) => {
          streams[name] = await call<StreamRecord>(admin, '/acp/streams/create', {
            flow_id: flow.id,
            name,
            ...body,
          });
        };
        await add('de-forced', {
          type: 'forced',
          position: 0,
          target_url: 'https://de.test/',
          filters: { countries_include: ['DE'] },
        });
        await add('mobile-office', {
          type: 'regular',
          position: 1,
          target_url: 'https://m.test/?c={click_id}&s={sub1}',
          filters: {
            rules: [
              { field: 'device_type', op: 'is', values: ['mobile'] },
              { field: 'hour', op: 'is', values: ['9-17'] },
            ],
          },
        });
        await add('default', {
          type: 'default',
          position: 2,
          target_url: 'https://default.test/',
          redirect_mode: 'js',
        });
      },
    });

    async function call<T>(token: string, path: string, body: unknown, status = 200): Promise<T> {
      const res = await t.acp(path, token, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path}: ${JSON.stringify(json)}`);
      return json;
    }
    const sim = (body: Record<string, unknown>, status = 200) =>
      call<Simulation>(viewer, '/acp/routing/simulate', { slug: 'sim', ...body }, status);

    it('explains a forced stream taking the click, the rest skipped', async () => {
      const r = await sim({ country: 'de', user_agent: CHROME });
      assert.equal(r.outcome, 'redirect');
      assert.deepEqual(r.stream, { id: streams['de-forced']!.id, name: 'de-forced', type: 'forced' });
      assert.equal(r.location, 'https://de.test/');
      assert.equal(r.status, 302);
      assert.deepEqual(
        r.trace.map((s) => [s.name, s.result]),
        [
          ['de-forced', 'pass'],
          ['mobile-office', 'skipped'],
          ['default', 'skipped'],
        ],
      );
    });

    it('rule by rule: a phone at 10:00 Berlin time takes the rules stream, at 20:00 it falls to the default', async () => {
      const morning = await sim({
        country: 'FR',
        user_agent: IPHONE,
        at: '2026-03-02T09:00:00Z', // 10:00 in Berlin
        query: 'sub1=ad7',
      });
      assert.equal(morning.stream?.name, 'mobile-office');
      assert.match(morning.location!, /^https:\/\/m\.test\/\?c=[A-Za-z0-9_-]+&s=ad7$/);
      assert.equal(morning.trace[0]!.result, 'fail');
      assert.equal(morning.trace[0]!.reason, 'country FR is not in countries_include');
      assert.equal(morning.click.device_type, 'mobile');
      // The time the hour rule looked at, in the flow's zone.
      assert.deepEqual(morning.click.local, { timezone: 'Europe/Berlin', weekday: 'mon', hour: 10 });

      const evening = await sim({ country: 'FR', user_agent: IPHONE, at: '2026-03-02T19:00:00Z' });
      assert.deepEqual(evening.click.local, { timezone: 'Europe/Berlin', weekday: 'mon', hour: 20 });
      assert.equal(evening.stream?.name, 'default');
      assert.equal(evening.status, 200, 'a js stream answers a page');
      assert.equal(evening.redirect_mode, 'js');
      const rules = evening.trace.find((s) => s.name === 'mobile-office')!;
      assert.equal(rules.result, 'fail');
      assert.match(
        rules.reason,
        /rule 1 \(device_type is \["mobile"\]\): pass; rule 2 \(hour is \["9-17"\]\): fail/,
      );
    });

    it('counts nothing and logs no click', async () => {
      const before = (await call<{ items: FlowRecord[] }>(viewer, '/acp/traffic-flows/list', {})).items.find(
        (f) => f.slug === 'sim',
      )!;
      for (let i = 0; i < 3; i++) await sim({ country: 'DE', user_agent: CHROME });
      await t.node.clickLog.persist();
      await persistCounts(t.node);
      const afterList = (
        await call<{ items: FlowRecord[] }>(viewer, '/acp/traffic-flows/list', {})
      ).items.find((f) => f.slug === 'sim')!;
      assert.equal(afterList.clicks, before.clicks);
      const logged = await t.node.storage.clicks.list({ filter: { flow_id: flow.id }, limit: 10 });
      assert.equal(logged.items.length, 0);
    });

    it('a bot, an unknown slug and bad input', async () => {
      const bot = await sim({ user_agent: 'Googlebot/2.1 (+http://www.google.com/bot.html)', country: 'DE' });
      assert.equal(bot.outcome, 'bot');
      assert.equal(bot.click.is_bot, true);
      // No user_agent: a person whose browser is not known; an empty one is a bot, as on /go.
      const unsaid = await sim({ country: 'DE' });
      assert.deepEqual(
        [unsaid.outcome, unsaid.click.is_bot, unsaid.click.device_type, unsaid.location],
        ['redirect', false, 'other', 'https://de.test/'],
      );
      const empty = await sim({ country: 'DE', user_agent: '' });
      assert.deepEqual([empty.outcome, empty.click.is_bot], ['bot', true]);
      // ... and, a person, looked up for uniqueness like any (a stream with an is_unique rule takes it).
      const uniq = await call<FlowRecord>(admin, '/acp/traffic-flows/create', {
        slug: 'sim-uniq',
        name: 'u',
      });
      for (const body of [
        {
          name: 'uniques',
          type: 'forced',
          target_url: 'https://u.test/',
          filters: { rules: [{ field: 'is_unique', op: 'is', values: [true] }] },
        },
        { name: 'default', type: 'default', target_url: 'https://d.test/' },
      ])
        await call(admin, '/acp/streams/create', { flow_id: uniq.id, ...body });
      const fresh = await sim({ slug: 'sim-uniq', ip: '198.51.100.7' });
      assert.deepEqual(
        [fresh.click.is_bot, fresh.click.is_unique, fresh.stream?.name],
        [false, true, 'uniques'],
      );
      const none = await sim({ slug: 'no-such-flow' });
      assert.equal(none.outcome, 'no_match');
      assert.equal(none.stream, null);
      assert.deepEqual([none.reason, none.trace], ['no flow with this slug', []]);
      const bad = await call<{ error: { code: string } }>(
        viewer,
        '/acp/routing/simulate',
        { slug: 'sim', at: 'yesterday' },
        400,
      );
      assert.equal(bad.error.code, 'validation.invalid_input');
      for (const ip of ['999.1.1.1', 'not-an-ip', '1.2.3']) {
        const badIp = await call<{ error: { code: string; message: string } }>(
          viewer,
          '/acp/routing/simulate',
          { slug: 'sim', ip },
          400,
        );
        assert.match(badIp.error.message, /\/ip: ".*" is not an IPv4 or IPv6 address/, ip);
      }
      const v6 = await sim({ ip: '2001:db8::1', country: 'de', user_agent: CHROME });
      assert.equal(v6.outcome, 'redirect', 'an IPv6 address is taken');
      assert.equal(v6.location, 'https://de.test/');
      const anonymous = await t.acp('/acp/routing/simulate', undefined, { slug: 'sim' });
      assert.equal(anonymous.status, 401);
    });

    it('a user agent that names no OS or browser shows them as the click log stores them', async () => {
      // The simulator said null where the click log stores '' (its os and browser are NOT NULL).
      for (const [ua, label] of [
        ['Mozilla/5.0', 'names neither'],
        [undefined, 'no user agent'],
      ] as const) {
        const r = await sim({ country: 'DE', ...(ua === undefined ? {} : { user_agent: ua }) });
        assert.equal(r.click.os, '', label);
        assert.equal(r.click.browser, '', label);
      }
      const res = await fetch(`${t.url}/go/sim`, {
        redirect: 'manual',
        headers: { 'user-agent': 'Mozilla/5.0', 'cf-ipcountry': 'DE' },
      });
      await res.arrayBuffer();
      const clickId = res.headers.get('x-click-id')!;
      await t.node.clickLog.persist();
      const stored = (await t.node.storage.clicks.get(clickId))!;
      const r = await sim({ country: 'DE', user_agent: 'Mozilla/5.0' });
      assert.deepEqual([r.click.os, r.click.browser], [stored.os, stored.browser]);
    });
  });
}
