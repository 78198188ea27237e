import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { Simulation } from '../../src/routing/index.ts';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import type { TestNode } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';
const BOT = 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)';
const FALLBACK = 'https://fallback.test/lost';

for (const backend of BACKENDS) {
  describe(`targeting and traffic hygiene on ${backend.name}`, async () => {
    let t: TestNode;
    let admin: string;
    const { it } = await nodeSuite(backend, {
      node: { random: seeded(5), yaml: `routing:\n  fallback_url: ${FALLBACK}\n` },
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
    const go = async (path: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${t.url}/go/${path}`, {
        redirect: 'manual',
        headers: { 'user-agent': CHROME, ...headers },
      });
      return { res, body: await res.text() };
    };
    const flowWith = (slug: string, extra: Record<string, unknown> = {}) =>
      call<FlowRecord>('/acp/traffic-flows/create', { slug, name: slug, ...extra });
    const streamOf = (flow: FlowRecord, extra: Record<string, unknown>) =>
      call<StreamRecord>('/acp/streams/create', { flow_id: flow.id, name: 's', type: 'regular', ...extra });

    it('flow and stream fields round-trip through the ACP; bad ones are named', async () => {
      const flow = await flowWith('tgt-fields', {
        bot_action: 'stream',
        timezone: 'Europe/Berlin',
        cost_per_click: 0.025,
        currency: 'EUR',
      });
      assert.deepEqual(
        [flow.bot_action, flow.timezone, flow.cost_per_click, flow.currency],
        ['stream', 'Europe/Berlin', 0.025, 'EUR'],
      );
      const plain = await flowWith('tgt-defaults');
      assert.deepEqual(
        [plain.bot_action, plain.timezone, plain.cost_per_click, plain.currency],
        ['route', 'UTC', 0, 'USD'],
      );
      const s = await streamOf(flow, {
        target_url: 'https://x.test/',
        redirect_mode: 'js',
        filters: { logic: 'or', rules: [{ field: 'device_type', op: 'is', values: ['mobile'] }] },
      });
      assert.equal(s.redirect_mode, 'js');
      assert.deepEqual(s.filters, {
        logic: 'or',
        rules: [{ field: 'device_type', op: 'is', values: ['mobile'] }],
      });
      const updated = await call<FlowRecord>('/acp/traffic-flows/update', {
        id: flow.id,
        cost_per_click: 1.5,
      });
      assert.equal(updated.cost_per_click, 1.5);
      // Names in any case and UTC offsets alike, as reports take them; stored in one form.
      for (const [given, stored] of [
        ['europe/berlin', 'Europe/Berlin'],
        ['Asia/Kolkata', 'Asia/Kolkata'], // not ICU's older Asia/Calcutta
        ['Europe/Kyiv', 'Europe/Kyiv'],
        ['+0530', '+05:30'],
        ['-03:00', '-03:00'],
      ] as const) {
        const zoned = await call<FlowRecord>('/acp/traffic-flows/update', { id: flow.id, timezone: given });
        assert.equal(zoned.timezone, stored, given);
      }
      const offset = await flowWith('tgt-offset', { timezone: 'utc' });
      assert.equal(offset.timezone, 'UTC');

      const badZone = await call<{ error: { code: string; message: string } }>(
        '/acp/traffic-flows/create',
        { slug: 'tgt-bad', name: 'x', timezone: 'Mars/Olympus' },
        400,
      );
      assert.equal(badZone.error.code, 'validation.invalid_input');
      // Every problem of a body at once, each in words (a form is fixed in one save, not one a field).
      const many = await call<{ error: { details: { path: string; message: string }[] } }>(
        '/acp/traffic-flows/create',
        { slug: 'Summer Sale!', name: '', currency: 'usd' },
        400,
      );
      assert.deepEqual(many.error.details, [
        {
          path: '/slug',
          message: 'must be 1–64 of a–z, 0–9 and -, starting with a letter or digit (e.g. summer-sale)',
        },
        { path: '/name', message: 'must not be empty' },
        { path: '/currency', message: 'must be an ISO 4217 currency code in capitals (e.g. USD, EUR)' },
      ]);
      assert.match(
        badZone.error.message,
        /\/timezone: "Mars\/Olympus" is not a time zone: an IANA name \(UTC, Europe\/Berlin\) or a UTC offset \(\+02:00\)$/,
      );
      // Three capitals are not enough: the code must be one ISO 4217 knows (as postbacks check it).
      const badCurrency = await call<{ error: { code: string; message: string } }>(
        '/acp/traffic-flows/update',
        { id: flow.id, currency: 'XYZ' },
        400,
      );
      assert.match(badCurrency.error.message, /\/currency: "XYZ" is not an ISO 4217 currency code/);
      // Money is kept in micro-units: a cost they cannot hold is refused, not rounded to 0.
      const badCost = await call<{ error: { message: string } }>(
        '/acp/traffic-flows/update',
        { id: flow.id, cost_per_click: 1e-9 },
        400,
      );
      assert.match(badCost.error.message, /\/cost_per_click: 1e-9 has more than 6 decimal places/);
      const fine = await call<FlowRecord>('/acp/traffic-flows/update', {
        id: flow.id,
        cost_per_click: 0.123456,
      });
      assert.equal(fine.cost_per_click, 0.123456);
      const badRule = await call<{ error: { message: string } }>(
        '/acp/streams/create',
        {
          flow_id: flow.id,
          name: 'bad',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: { rules: [{ field: 'ip', op: 'is', values: ['300.1.1.1/8'] }] },
        },
        400,
      );
      assert.match(badRule.error.message, /\/filters\/rules\/0\/values\/0: "300.1.1.1\/8" is not an IPv4/);
      const badMode = await call<{ error: { message: string } }>(
        '/acp/streams/update',
        { id: s.id, redirect_mode: 'iframe' },
        400,
      );
      assert.match(badMode.error.message, /redirect_mode must be one of "http", "meta_refresh", "js"/);
      // A value neither a string of 1–256 characters nor a boolean says what it should be.
      for (const [value, why] of [
        ['', /\/filters\/rules\/0\/values\/0 must not be empty, or must be boolean/],
        [9, /\/filters\/rules\/0\/values\/0 must be string, or must be boolean/],
      ] as const) {
        const bad = await call<{ error: { message: string } }>(
          '/acp/streams/update',
          { id: s.id, filters: { rules: [{ field: 'hour', op: 'is', values: [value] }] } },
          400,
        );
        assert.match(bad.error.message, why);
      }
    });

    it('rules route by device, language and parameter; an unmatched click goes to the fallback URL', async () => {
      const flow = await flowWith('tgt-rules', { cost_per_click: 0.1 });
      const mobile = await streamOf(flow, {
        position: 0,
        target_url: 'https://mobile.test/',
        filters: {
          rules: [
            { field: 'device_type', op: 'is', values: ['mobile'] },
            { field: 'language', op: 'is', values: ['de'] },
          ],
        },
      });
      await streamOf(flow, {
        position: 1,
        target_url: 'https://fb.test/',
        filters: { rules: [{ field: 'param:src', op: 'is', values: ['fb'] }] },
      });
      const m = await go('tgt-rules', { 'user-agent': IPHONE, 'accept-language': 'de-DE,de;q=0.9' });
      assert.equal(m.res.headers.get('location'), 'https://mobile.test/');
      const wrongLanguage = await go('tgt-rules?src=fb', { 'user-agent': IPHONE, 'accept-language': 'fr' });
      assert.equal(wrongLanguage.res.headers.get('location'), 'https://fb.test/');
      const none = await go('tgt-rules', { 'accept-language': 'de' });
      assert.equal(none.res.status, 302);
      assert.equal(none.res.headers.get('location'), FALLBACK);
      const clickId = none.res.headers.get('x-click-id');
      assert.ok(clickId, 'a click sent to the fallback still has its id');

      await t.node.clickLog.persist();
      const routed = await t.node.storage.clicks.get(m.res.headers.get('x-click-id')!);
      assert.equal(routed?.stream_id, mobile.id);
      assert.equal(routed?.cost, 0.1, 'a non-bot click carries the flow cost');
      const lost = await t.node.storage.clicks.get(clickId);
      assert.equal(lost?.outcome, 'no_match');
      assert.equal(lost?.stream_id, null);
      // A flow with traffic and no default stream is named in system metrics (the doctor warns).
      const section = t.node.telemetry.systemMetrics().traffic_flows as {
        without_default_stream: { slugs: string[] };
      };
      assert.ok(section.without_default_stream.slugs.includes('tgt-rules'));
      await streamOf(flow, { type: 'default', position: 9, target_url: 'https://default.test/' });
      await go('tgt-rules');
      const after = t.node.telemetry.systemMetrics().traffic_flows as typeof section;
      assert.ok(!after.without_default_stream.slugs.includes('tgt-rules'), 'gone once it has one');
    });

    it('every rule field, stored and read back the same, routes a click that matches them all', async () => {
      const flow = await flowWith('tgt-all', { timezone: 'UTC' });
      const now = new Date();
      const days = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
      // Today and tomorrow: a run that crosses midnight still matches.
      const weekdays = [days[now.getUTCDay()]!, days[(now.getUTCDay() + 1) % 7]!];
      const rules = [
        { field: 'country', op: 'is', values: ['DE'] },
        { field: 'device_type', op: 'is', values: ['mobile'] },
        { field: 'os', op: 'is', values: ['ios'] },
        { field: 'browser', op: 'is_not', values: ['Firefox'] },
        { field: 'language', op: 'is', values: ['de'] },
        { field: 'ip', op: 'is', values: ['203.0.113.0/24'] },
        { field: 'referrer_host', op: 'is', values: ['*.example.org'] },
        { field: 'param:src', op: 'is', values: ['fb'] },
        { field: 'weekday', op: 'is', values: weekdays },
        // Every hour of the day: the click's hour cannot fall outside, whenever the test runs.
        { field: 'hour', op: 'is', values: ['0-23'] },
        { field: 'is_unique', op: 'is', values: [true] },
        { field: 'is_bot', op: 'is', values: [false] },
      ];
      const s = await streamOf(flow, { position: 0, target_url: 'https://all.test/', filters: { rules } });
      await streamOf(flow, { type: 'default', position: 1, target_url: 'https://rest.test/' });
      const listed = await call<{ items: StreamRecord[] }>('/acp/streams/list', {
        filter: { flow_id: flow.id },
      });
      assert.deepEqual(listed.items.find((x) => x.id === s.id)?.filters, { rules });
      const headers = {
        'user-agent': IPHONE,
        'cf-ipcountry': 'DE',
        'accept-language': 'de-DE',
        referer: 'https://news.example.org/a',
        'x-forwarded-for': '203.0.113.9',
      };
      assert.equal((await go('tgt-all?src=fb', headers)).res.headers.get('location'), 'https://all.test/');
      // One fact off (another address block), and the stream is passed over.
      const other = { ...headers, 'x-forwarded-for': '198.51.100.9' };
      assert.equal((await go('tgt-all?src=fb', other)).res.headers.get('location'), 'https://rest.test/');
    });

    it('an unknown slug goes to the fallback URL too', async () => {
      const { res } = await go('tgt-no-such-flow');
      assert.equal(res.status, 302);
      assert.equal(res.headers.get('location'), FALLBACK);
      assert.ok(res.headers.get('x-request-id'));
    });

    it('bot_action block answers bots 404 and logs them as bots; route sends them on', async () => {
      const blocked = await flowWith('tgt-block', { bot_action: 'block', cost_per_click: 0.2 });
      await streamOf(blocked, { type: 'default', target_url: 'https://offer.test/' });
      const bot = await go('tgt-block', { 'user-agent': BOT });
      assert.equal(bot.res.status, 404);
      const botId = bot.res.headers.get('x-click-id')!;
      assert.ok(botId);
      const person = await go('tgt-block');
      assert.equal(person.res.headers.get('location'), 'https://offer.test/');
      await t.node.clickLog.persist();
      const stored = await t.node.storage.clicks.get(botId);
      assert.deepEqual([stored?.outcome, stored?.is_bot, stored?.cost], ['bot', true, 0]);

      const routed = await flowWith('tgt-route');
      await streamOf(routed, { type: 'default', target_url: 'https://offer.test/r' });
      assert.equal(
        (await go('tgt-route', { 'user-agent': BOT })).res.headers.get('location'),
        'https://offer.test/r',
      );
    });

    it('bot_action stream sends bots only to a stream whose rules accept them, people never there', async () => {
      const flow = await flowWith('tgt-safe', { bot_action: 'stream' });
      await streamOf(flow, {
        type: 'forced',
        target_url: 'https://safe.test/',
        filters: { rules: [{ field: 'is_bot', op: 'is', values: [true] }] },
      });
      await streamOf(flow, { type: 'default', target_url: 'https://offer.test/' });
      assert.equal(
        (await go('tgt-safe', { 'user-agent': BOT })).res.headers.get('location'),
        'https://safe.test/',
      );
      assert.equal((await go('tgt-safe')).res.headers.get('location'), 'https://offer.test/');

      const none = await flowWith('tgt-safe-none', { bot_action: 'stream' });
      await streamOf(none, { type: 'default', target_url: 'https://offer.test/' });
      const lost = await go('tgt-safe-none', { 'user-agent': BOT });
      assert.equal(lost.res.status, 404, 'a bot with no stream for bots: 404, not the fallback');
    });

    it('the simulator answers as /go does: unknown country codes, a routed bot with no stream, a forwarded query', async () => {
      // Each case asked of both: where the visitor went (or 404) must be the same.
      const simulated = async (body: Record<string, unknown>) => {
        const r = await call<Simulation>('/acp/routing/simulate', body);
        return [r.status, r.location];
      };
      const went = async (path: string, headers: Record<string, string>) => {
        const { res } = await go(path, headers);
        return [res.status, res.headers.get('location')];
      };
      const geo = await flowWith('tgt-sim-geo');
      await streamOf(geo, {
        target_url: 'https://geo.test/?c={country}',
        filters: { countries_exclude: ['DE'] },
      });
      for (const code of ['XX', 'zz', 'T1', 'A1', 'O1']) {
        assert.deepEqual(
          await simulated({ slug: 'tgt-sim-geo', country: code, user_agent: CHROME }),
          await went('tgt-sim-geo', { 'cf-ipcountry': code }),
          `${code}: no country`,
        );
        assert.deepEqual(
          await simulated({ slug: 'tgt-sim-geo', country: code, ip: '8.8.8.8', user_agent: CHROME }),
          await went('tgt-sim-geo', { 'cf-ipcountry': code, 'x-forwarded-for': '8.8.8.8' }),
          `${code}: the address decides`,
        );
      }
      // A bot on a route flow that no stream takes goes where a person would: the fallback.
      const routed = await flowWith('tgt-sim-route');
      await streamOf(routed, { target_url: 'https://de.test/', filters: { countries_include: ['DE'] } });
      const bot = await simulated({ slug: 'tgt-sim-route', user_agent: BOT, country: 'FR' });
      assert.deepEqual(bot, [302, FALLBACK]);
      assert.deepEqual(bot, await went('tgt-sim-route', { 'user-agent': BOT, 'cf-ipcountry': 'FR' }));
      const q = await flowWith('tgt-sim-query', { forward_query: true });
      await streamOf(q, { type: 'default', target_url: 'https://q.test/p?a=1#f' });
      const forwarded = await went('tgt-sim-query?k=v%20w&m=1&m=2', {});
      assert.deepEqual(forwarded, [302, 'https://q.test/p?a=1&k=v%20w&m=1&m=2#f']);
      assert.deepEqual(
        await simulated({ slug: 'tgt-sim-query', user_agent: CHROME, query: { k: 'v w', m: ['1', '2'] } }),
        forwarded,
      );
      // A query string typed as read (a space, a euro sign) goes as a browser would send it.
      const euro = await went('tgt-sim-query?utm=%E2%82%AC%20x', {});
      assert.deepEqual(euro, [302, 'https://q.test/p?a=1&utm=%E2%82%AC%20x#f']);
      assert.deepEqual(
        await simulated({ slug: 'tgt-sim-query', user_agent: CHROME, query: 'utm=€ x' }),
        euro,
      );
      // Nothing was looked at: the reason says why, and the trace names only streams.
      const unknown = await call<Simulation>('/acp/routing/simulate', { slug: 'tgt-no-such' });
      assert.deepEqual(
        [unknown.reason, unknown.trace, unknown.location],
        ['no flow with this slug', [], FALLBACK],
      );
    });

    it('meta_refresh and js streams answer a small page that moves on, hides the referrer and is not cached', async () => {
      for (const mode of ['meta_refresh', 'js'] as const) {
        const flow = await flowWith(`tgt-${mode.replace('_', '-')}`);
        await streamOf(flow, {
          type: 'default',
          target_url: 'https://offer.test/?id={click_id}&a=1',
          redirect_mode: mode,
        });
        const { res, body } = await go(`tgt-${mode.replace('_', '-')}`);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
        assert.equal(res.headers.get('cache-control'), 'no-store');
        assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
        assert.equal(res.headers.get('location'), null);
        const id = res.headers.get('x-click-id')!;
        assert.ok(res.headers.get('x-request-id'));
        assert.match(body, /<meta name="referrer" content="no-referrer">/);
        if (mode === 'meta_refresh')
          assert.ok(body.includes(`content="0;url=https://offer.test/?id=${id}&amp;a=1"`), body);
        else assert.ok(body.includes(`location.replace("https://offer.test/?id=${id}&a=1")`), body);
        assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(body));
      }
    });

    it('the click’s country comes from the built-in database when no trusted header says it; the response header only from the header', async () => {
      const flow = await flowWith('tgt-geo');
      await streamOf(flow, { type: 'default', target_url: 'https://geo.test/{country}' });
      // 127.0.0.1 is a trusted proxy by default: the client is the X-Forwarded-For address.
      const geo = await go('tgt-geo', { 'x-forwarded-for': '8.8.8.8' });
      assert.equal(geo.res.headers.get('location'), 'https://geo.test/US');
      // X-Client-Country-Code is what the trusted proxy said
      // (docs/deployment.md#behind-a-reverse-proxy): none here.
      assert.equal(geo.res.headers.get('x-client-country-code'), null);
      const clickId = geo.res.headers.get('x-click-id')!;
      await t.node.clickLog.persist();
      assert.equal((await t.node.storage.clicks.get(clickId))?.country, 'US', 'the click has its country');
      const header = await go('tgt-geo', { 'x-forwarded-for': '8.8.8.8', 'cf-ipcountry': 'DE' });
      assert.equal(header.res.headers.get('location'), 'https://geo.test/DE', 'the trusted header wins');
      assert.equal(header.res.headers.get('x-client-country-code'), 'DE');
      // The same on fastify's path (a HEAD is not the front door's).
      const head = await fetch(`${t.url}/go/tgt-geo`, {
        method: 'HEAD',
        redirect: 'manual',
        headers: { 'user-agent': CHROME, 'x-forwarded-for': '8.8.8.8' },
      });
      assert.deepEqual(
        [head.headers.get('location'), head.headers.get('x-client-country-code')],
        ['https://geo.test/US', null],
      );
      const unassigned = await go('tgt-geo', { 'x-forwarded-for': '8.8.8.8', 'cf-ipcountry': 'UK' });
      assert.deepEqual(
        [unassigned.res.headers.get('location'), unassigned.res.headers.get('x-client-country-code')],
        ['https://geo.test/US', null],
        'UK is not an ISO 3166-1 code: unknown, and the address decides',
      );
      const local = await go('tgt-geo');
      assert.equal(local.res.headers.get('x-client-country-code'), null, 'loopback has no country');
    });
  });
}
