import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { Report } from '../../src/reports/index.ts';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import type { Clock } from '../../src/time/index.ts';
import { type TestNode, withPostbackKey } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';
const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const BOT = 'Googlebot/2.1 (+http://www.google.com/bot.html)';

/** Real time moved to a fixed morning: every click of the test falls in one UTC hour (10:20–11:00). */
const START = Date.UTC(2026, 2, 10, 10, 20);
const origin = Date.now();
const clock: Clock = { now: () => START + (Date.now() - origin), monotonic: () => performance.now() };

/** One click as the test sends it, and what it expects the report to count. */
interface Sent {
  country: string;
  ua: string;
  ip: string;
  sub1?: string;
}

for (const backend of BACKENDS) {
  describe(`reports on ${backend.name}`, async () => {
    let t: TestNode;
    let admin: string;
    let flow: FlowRecord;
    let other: FlowRecord;
    let deStream: StreamRecord;
    const ids: Record<string, string[]> = { DE: [], FR: [] };
    let bots = 0;
    const COST = 0.25;

    const call = async <T>(path: string, body: unknown, status = 200): Promise<T> => {
      const res = await t.acp(path, admin, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path}: ${JSON.stringify(json)}`);
      return json;
    };
    const click = async (slug: string, s: Sent) => {
      const res = await fetch(`${t.url}/go/${slug}${s.sub1 ? `?sub1=${s.sub1}` : ''}`, {
        redirect: 'manual',
        headers: { 'user-agent': s.ua, 'cf-ipcountry': s.country, 'x-forwarded-for': s.ip },
      });
      await res.arrayBuffer();
      return res.headers.get('x-click-id')!;
    };
    const postback = async (query: string) => {
      const res = await fetch(`${t.url}${withPostbackKey(t, `/postback?${query}`)}`);
      assert.equal(res.status, 200, await res.text());
    };
    const report = (body: Record<string, unknown>, status = 200) =>
      call<Report>('/acp/reports/query', { from: '2026-03-10', to: '2026-03-11', ...body }, status);
    /** A flow with one default stream, created over the ACP. */
    const flowWithStream = async (slug: string, over: Record<string, unknown>) => {
      const f = await call<FlowRecord>('/acp/traffic-flows/create', { slug, name: slug, ...over });
      await call('/acp/streams/create', {
        flow_id: f.id,
        name: 'x',
        type: 'default',
        target_url: 'https://x.test/',
      });
      return f;
    };

    const { it } = await nodeSuite(backend, {
      node: { random: seeded(2), clock },
      onStart: async (node) => {
        t = node;
        admin = await t.token('admin');
        flow = await call<FlowRecord>('/acp/traffic-flows/create', {
          slug: 'rep',
          name: 'rep',
          cost_per_click: COST,
        });
        deStream = await call<StreamRecord>('/acp/streams/create', {
          flow_id: flow.id,
          name: 'germany',
          type: 'forced',
          target_url: 'https://de.test/',
          filters: { countries_include: ['DE'] },
        });
        await call('/acp/streams/create', {
          flow_id: flow.id,
          name: 'rest',
          type: 'default',
          target_url: 'https://x.test/',
        });
        // A flow with only a German stream: the French click on it is a no-match.
        other = await call<FlowRecord>('/acp/traffic-flows/create', { slug: 'rep-other', name: 'other' });
        await call('/acp/streams/create', {
          flow_id: other.id,
          name: 'de-only',
          type: 'regular',
          target_url: 'https://de.test/',
          filters: { countries_include: ['DE'] },
        });
        for (let i = 0; i < 3; i++)
          ids.DE!.push(
            await click('rep', { country: 'DE', ua: IPHONE, ip: `203.0.113.${i + 1}`, sub1: 'a,b' }),
          );
        for (let i = 0; i < 2; i++)
          ids.FR!.push(await click('rep', { country: 'FR', ua: CHROME, ip: `198.51.100.${i + 1}` }));
        // The same French visitor again: a click, not a unique one.
        ids.FR!.push(await click('rep', { country: 'FR', ua: CHROME, ip: '198.51.100.1' }));
        await click('rep', { country: 'DE', ua: BOT, ip: '203.0.113.99' });
        bots++;
        await click('rep-other', { country: 'FR', ua: CHROME, ip: '198.51.100.7' });
        await postback(`click_id=${ids.DE![0]}&status=sale&payout=10.5&txid=o1`);
        await postback(`click_id=${ids.DE![1]}&status=rejected&payout=5&txid=o2`);
        await postback(`click_id=${ids.FR![0]}&status=lead&payout=1.25`);
        // The same sale sent again with a new payout: one conversion, the latest payout.
        await postback(`click_id=${ids.DE![0]}&status=sale&payout=12&txid=o1`);
        await t.node.clickLog.persist();
      },
    });

    it('by country: exact clicks, uniques, bots, conversions of each status, revenue, cost and the formulas', async () => {
      const r = await report({ group_by: ['country'], filter: { flow_id: flow.id } });
      const by = Object.fromEntries(r.rows.map((row) => [row.country, row]));
      const de = by.DE!;
      const fr = by.FR!;
      assert.deepEqual(
        [de.clicks, de.uniques, de.bots, de.no_match, de.leads, de.sales, de.rejected, de.conversions],
        [3, 3, bots, 0, 0, 1, 1, 1],
      );
      assert.equal(de.revenue, 12);
      assert.equal(de.cost, 3 * COST);
      assert.equal(de.profit, 12 - 3 * COST);
      assert.equal(de.cr, Math.round((1 / 3) * 1e6) / 1e6);
      assert.equal(de.epc, 4);
      assert.equal(de.roi, Math.round(((12 - 3 * COST) / (3 * COST)) * 1e6) / 1e6);
      assert.deepEqual([fr.clicks, fr.uniques, fr.leads, fr.revenue, fr.cost], [3, 2, 1, 1.25, 3 * COST]);
      assert.equal(r.totals.clicks, 6);
      assert.equal(r.totals.revenue, 13.25);
      assert.equal(r.totals.conversions, 2);
      assert.equal(r.currency, 'USD');
      assert.equal(r.rows[0]!.country, 'DE', 'sorted by clicks, then country');
    });

    it('sort.by takes a dimension by its name: flow by its slug, stream by its name', async () => {
      for (const order of ['asc', 'desc'] as const) {
        const byFlow = await report({ group_by: ['flow'], sort: { by: 'flow', order } });
        const slugs = byFlow.rows.map((r) => String(r.flow_slug));
        assert.ok(slugs.length >= 2, 'two flows in the report');
        const sorted = [...slugs].sort();
        assert.deepEqual(slugs, order === 'asc' ? sorted : sorted.reverse());
        const byCountry = await report({ group_by: ['country'], sort: { by: 'country', order } });
        const countries = byCountry.rows.map((r) => String(r.country));
        const expected = [...countries].sort();
        assert.deepEqual(countries, order === 'asc' ? expected : expected.reverse());
      }
      const byStream = await report({ group_by: ['stream'], sort: { by: 'stream' } });
      const names = byStream.rows.map((r) => r.stream_name as string | null);
      const known = names.filter((n) => n !== null);
      assert.deepEqual(known, [...known].sort(), 'ascending stream names');
    });

    it('the hourly rollups and the click log give the same figures for every grouping they share', async () => {
      for (const group_by of [
        ['country'],
        ['day', 'flow'],
        ['hour', 'outcome'],
        ['stream', 'device_type', 'os'],
        [],
      ]) {
        const base = { group_by, filter: { flow_id: flow.id } };
        const rollups = await report({ ...base, source: 'rollups' });
        const clicks = await report({ ...base, source: 'clicks' });
        assert.equal(rollups.source, 'rollups');
        assert.equal(clicks.source, 'clicks');
        assert.deepEqual(rollups.rows, clicks.rows, `group_by ${group_by.join(', ')}`);
        assert.deepEqual(rollups.totals, clicks.totals);
      }
      // Left to itself, a report takes the rollups when it can, the click log when it must.
      assert.equal((await report({ group_by: ['country'] })).source, 'rollups');
      assert.equal((await report({ group_by: ['sub1'] })).source, 'clicks');
      assert.equal((await report({ group_by: ['hour'], timezone: 'Asia/Kolkata' })).source, 'clicks');
      const refused = await report({ group_by: ['sub1'], source: 'rollups' }, 400);
      assert.match(
        (refused as unknown as { error: { message: string } }).error.message,
        /\/source: the hourly rollups hold no sub-ids/,
      );
    });

    it('no_match and outcome; flow and stream carry their names; sub-ids group too', async () => {
      const o = await report({ group_by: ['flow', 'outcome'] });
      const lost = o.rows.find((r) => r.flow_id === other.id && r.outcome === 'no_match')!;
      assert.equal(lost.flow_slug, 'rep-other');
      assert.equal(lost.no_match, 1);
      assert.equal(lost.clicks, 0);
      const s = await report({ group_by: ['stream'], filter: { flow_id: flow.id, is_bot: false } });
      const de = s.rows.find((r) => r.stream_id === deStream.id)!;
      assert.equal(de.stream_name, 'germany');
      assert.equal(de.clicks, 3);
      const subs = await report({ group_by: ['sub1'], filter: { flow_id: flow.id, country: 'DE' } });
      assert.deepEqual(
        subs.rows.map((r) => [r.sub1, r.clicks, r.bots]),
        [
          ['a,b', 3, 0],
          [null, 0, 1],
        ],
      );
    });

    it('days and hours in the report time zone; a half-hour zone folds exactly', async () => {
      const day = await report({ group_by: ['day'], filter: { flow_id: flow.id } });
      assert.deepEqual(
        day.rows.map((r) => [r.day, r.clicks]),
        [['2026-03-10', 6]],
      );
      const kolkata = await report({
        group_by: ['hour'],
        timezone: 'Asia/Kolkata',
        filter: { flow_id: flow.id },
      });
      // 10:20–11:00 UTC is 15:50–16:30 in Kolkata (+05:30): two local hours, split where 16:00 falls.
      const hours = kolkata.rows.map((r) => r.hour);
      for (const h of hours) assert.ok(h === '2026-03-10T15:00' || h === '2026-03-10T16:00', String(h));
      assert.equal(
        kolkata.rows.reduce((n, r) => n + Number(r.clicks), 0),
        6,
      );
      const elapsedMin = (clock.now() - START) / 60_000;
      if (elapsedMin < 10)
        assert.deepEqual(hours, ['2026-03-10T15:00'], 'clicks before 10:30 UTC are 15:xx in Kolkata');
      // The same zone as an offset, or named in another case, is the same report.
      assert.equal(kolkata.timezone, 'Asia/Kolkata');
      for (const [timezone, shown] of [
        ['+0530', '+05:30'],
        ['asia/kolkata', 'asia/kolkata'], // only the case of ICU's own spelling is restored
      ] as const) {
        const same = await report({ group_by: ['hour'], timezone, filter: { flow_id: flow.id } });
        assert.deepEqual(same.rows, kolkata.rows, timezone);
        assert.equal(same.timezone, shown);
      }
      const none = await report({ from: '2026-03-11', to: '2026-03-12', group_by: ['day'] });
      assert.deepEqual(none.rows, []);
      assert.equal(none.totals.clicks, 0);
      assert.equal(none.totals.roi, null);
    });

    it('CSV: a header row and the same numbers; formulas are not run by a spreadsheet', async () => {
      const res = await t.acp('/acp/reports/query', admin, {
        from: '2026-03-10',
        to: '2026-03-11',
        group_by: ['country'],
        filter: { flow_id: flow.id },
        format: 'csv',
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /^text\/csv/);
      const lines = (await res.text()).trimEnd().split('\r\n');
      assert.equal(
        lines[0],
        'country,clicks,uniques,bots,no_match,leads,sales,rejected,conversions,revenue,cost,profit,cr,epc,roi',
      );
      const json = await report({ group_by: ['country'], filter: { flow_id: flow.id } });
      assert.equal(lines.length, json.rows.length + 1);
      for (const [i, row] of json.rows.entries()) {
        const cells = lines[i + 1]!.split(',');
        assert.equal(cells[0], row.country);
        assert.equal(Number(cells[9]), row.revenue);
        assert.equal(Number(cells[11]), row.profit);
      }
    });

    it('a report cut by limit says so: truncated in the JSON, X-Report-Truncated on the CSV', async () => {
      const body = { group_by: ['country'], filter: { flow_id: flow.id } };
      const cut = await report({ ...body, limit: 1 });
      assert.deepEqual([cut.rows.length, cut.total_rows, cut.truncated], [1, 2, true]);
      assert.equal(cut.totals.clicks, 6, 'totals count the rows cut off too');
      const whole = await report(body);
      assert.deepEqual([whole.rows.length, whole.truncated], [2, false]);
      for (const [limit, truncated, lines] of [
        [1, 'true', 2],
        [1000, 'false', 3],
      ] as const) {
        const res = await t.acp('/acp/reports/query', admin, {
          from: '2026-03-10',
          to: '2026-03-11',
          ...body,
          limit,
          format: 'csv',
        });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-report-truncated'), truncated);
        assert.equal(res.headers.get('x-report-total-rows'), '2');
        assert.equal((await res.text()).trimEnd().split('\r\n').length, lines);
      }
    });

    it('bad queries are refused with the field named; mixed currencies are never summed', async () => {
      const badDim = await call<{ error: { code: string; message: string } }>(
        '/acp/reports/query',
        { from: '2026-03-10', to: '2026-03-11', group_by: ['colour'] },
        400,
      );
      assert.equal(badDim.error.code, 'validation.invalid_input');
      // A dimension the report is not grouped by cannot order its rows (it was silently ignored).
      const ungrouped = await report({ group_by: ['country'], sort: { by: 'os' } }, 400);
      assert.match(
        (ungrouped as unknown as { error: { message: string } }).error.message,
        /\/sort\/by: "os" is not a dimension of this report \(group_by: country\)/,
      );
      for (const by of ['flow_slug', 'stream', 'stream_id'])
        await report({ group_by: ['flow', 'stream'], sort: { by } }, 200);
      // Past clicks.retention_days (30) the click log holds no clicks (their conversions stay): a
      // report that must read it there is refused; the rollups still answer the same range.
      const gone = await report({ from: '2026-01-01', to: '2026-01-02', group_by: ['sub1'] }, 400);
      assert.match(
        (gone as unknown as { error: { message: string } }).error.message,
        /^\/from: this report reads the click log \(it groups by a sub-id\), which keeps clicks for clicks\.retention_days \(30\)/,
      );
      const gone530 = await report({ from: '2026-01-01', to: '2026-01-02', timezone: '+05:30' }, 400);
      assert.match(
        (gone530 as unknown as { error: { message: string } }).error.message,
        /\(its zone or range is not on whole UTC hours\)/,
      );
      // Up to a day past the cutoff (now − 30 days: 2026-02-08T10:20Z and the test's minutes), the
      // range starts at the cutoff instead, as the answer says: a "last 30 days" across a change
      // of clocks is not refused.
      const edge = await report({ from: '2026-02-08', to: '2026-02-09', group_by: ['sub1'] });
      assert.ok(edge.from > '2026-02-08T10:19' && edge.from < '2026-02-08T11:20', edge.from);
      await report({ from: '2026-01-01', to: '2026-01-02', group_by: ['country'] }, 200);
      const badZone = await report({ timezone: 'Moon/Base' }, 400);
      assert.match((badZone as unknown as { error: { message: string } }).error.message, /\/timezone/);
      const backwards = await report({ from: '2026-03-11', to: '2026-03-10' }, 400);
      assert.match(
        (backwards as unknown as { error: { message: string } }).error.message,
        /\/to: must be after from/,
      );
      // An offset beyond 23:59 is not one (-99:99 was read as four days back).
      for (const to of [
        '2026-03-11T12:00:00-99:99',
        '2026-03-11T12:00:00+24:00',
        '2026-03-11T12:00:00+05:60',
      ]) {
        const badOffset = await report({ from: '2026-03-10', to }, 400);
        assert.match((badOffset as unknown as { error: { message: string } }).error.message, /\/to/, to);
      }
      await report({ from: '2026-03-10', to: '2026-03-11T12:00:00+14:00' }); // Kiribati's is the largest in use
      await flowWithStream('rep-eur', { cost_per_click: 1, currency: 'EUR' });
      await click('rep-eur', { country: 'DE', ua: CHROME, ip: '203.0.113.50' });
      await t.node.clickLog.persist();
      // Money in two currencies is never added up: the report still counts, its money is null,
      // and it names the currencies (a refusal answered nothing to a question the docs allow).
      const mixed = await report({ group_by: ['flow'] });
      assert.equal(mixed.currency, null);
      assert.deepEqual(mixed.currencies, ['EUR', 'USD']);
      const eurRow = mixed.rows.find((r) => r.flow_slug === 'rep-eur')!;
      assert.deepEqual(
        [eurRow.clicks, eurRow.revenue, eurRow.cost, eurRow.profit, eurRow.epc, eurRow.roi],
        [1, null, null, null, null, null],
      );
      assert.deepEqual(
        [mixed.totals.revenue, mixed.totals.cost, mixed.totals.profit, mixed.totals.epc, mixed.totals.roi],
        [null, null, null, null, null],
      );
      const single = await report({ group_by: ['flow'], filter: { flow_id: flow.id } });
      assert.equal(typeof single.totals.revenue, 'number', 'one currency: money as ever');
      assert.deepEqual(single.currencies, ['USD']);
      // A flow's own money in two currencies (a postback paid in another).
      const eurClick = await click('rep-eur', { country: 'DE', ua: CHROME, ip: '203.0.113.51' });
      await postback(`click_id=${eurClick}&status=sale&payout=2&currency=GBP`);
      await t.node.clickLog.persist();
      const eurFlow = (await t.node.storage.flows.getBySlug('rep-eur'))!;
      // Which currencies a selection's money is in, whatever filter.currency says (the console asks first).
      const currencies = (body: Record<string, unknown>) =>
        call<{ currencies: string[] }>('/acp/reports/currencies', {
          from: '2026-03-10',
          to: '2026-03-11',
          ...body,
        });
      assert.deepEqual((await currencies({})).currencies, ['EUR', 'GBP', 'USD']);
      assert.deepEqual((await currencies({ filter: { currency: 'USD' } })).currencies, ['EUR', 'GBP', 'USD']);
      assert.deepEqual((await currencies({ filter: { flow_id: eurFlow.id } })).currencies, ['EUR', 'GBP']);
      assert.deepEqual((await currencies({ filter: { country: 'FR' } })).currencies, ['USD']);
      const own = await report({ filter: { flow_id: eurFlow.id } });
      assert.deepEqual([own.totals.clicks, own.totals.conversions, own.totals.revenue], [2, 1, null]);
      const ownGbp = await report({ filter: { flow_id: eurFlow.id, currency: 'GBP' } });
      assert.deepEqual([ownGbp.currency, ownGbp.totals.revenue], ['GBP', 2]);
      const onlyEur = await report({ group_by: ['flow'], filter: { currency: 'EUR' } });
      assert.deepEqual(
        onlyEur.rows.map((r) => [r.flow_slug, r.clicks, r.cost]),
        [['rep-eur', 2, 2]],
      );
      assert.equal(onlyEur.currency, 'EUR');
    });

    it("filter.currency keeps a deleted flow's clicks with its conversions, from both sources", async () => {
      // Its clicks were dropped (no flow row to read the currency from) while its conversions,
      // which carry their own, stayed: a row with revenue and no clicks, cr and epc null.
      const gone = await flowWithStream('rep-gone', { cost_per_click: 0.5, currency: 'EUR' });
      const sold = await click('rep-gone', { country: 'DE', ua: CHROME, ip: '203.0.113.60' });
      await click('rep-gone', { country: 'DE', ua: CHROME, ip: '203.0.113.61' });
      await postback(`click_id=${sold}&status=sale&payout=4&currency=EUR`);
      await t.node.clickLog.persist();
      await call('/acp/traffic-flows/delete', { id: gone.id });
      for (const source of ['rollups', 'clicks'] as const) {
        const narrowed = await report({ group_by: ['flow'], filter: { currency: 'EUR' }, source });
        const row = narrowed.rows.find((r) => r.flow_id === gone.id)!;
        assert.deepEqual(
          [row.flow_slug, row.clicks, row.conversions, row.revenue, row.cost, row.cr, row.epc],
          [null, 2, 1, 4, 1, 0.5, 2],
          source,
        );
        // Narrowing to the one currency the flow's money is in changes nothing.
        const own = await report({ filter: { flow_id: gone.id }, source });
        const ownEur = await report({ filter: { flow_id: gone.id, currency: 'EUR' }, source });
        assert.deepEqual(ownEur.totals, own.totals, source);
        // Its cost is in EUR: a report in another currency has none of it.
        const usd = await report({ filter: { flow_id: gone.id, currency: 'USD' }, source });
        assert.deepEqual([usd.totals.clicks, usd.totals.cost], [0, 0], source);
        const allUsd = await report({ group_by: ['flow'], filter: { currency: 'USD' }, source });
        assert.equal(
          allUsd.rows.find((r) => r.flow_id === gone.id),
          undefined,
          source,
        );
      }
    });

    it('a deleted flow with cost and no conversion reports its money in its own currency', async () => {
      // Only its clicks' cost says which currency the report is in: read from deleted_flows.
      const gbp = await flowWithStream('rep-gone-gbp', { cost_per_click: 0.25, currency: 'GBP' });
      await click('rep-gone-gbp', { country: 'GB', ua: CHROME, ip: '203.0.113.70' });
      await t.node.clickLog.persist();
      await call('/acp/traffic-flows/delete', { id: gbp.id });
      for (const source of ['rollups', 'clicks'] as const) {
        const own = await report({ filter: { flow_id: gbp.id }, source });
        assert.deepEqual([own.currency, own.totals.clicks, own.totals.cost], ['GBP', 1, 0.25], source);
        const mixed = await report({ group_by: ['flow'], source });
        assert.ok(mixed.currencies.includes('GBP'), source);
      }
    });
  });
}
