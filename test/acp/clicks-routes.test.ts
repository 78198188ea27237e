import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import {
  type ClickRecord,
  type ConversionRecord,
  clickRecordOf,
  type FlowRecord,
  type NewClick,
  newBatchId,
  type StreamRecord,
} from '../../src/storage/index.ts';
import { type TestNode, withPostbackKey } from '../helpers/node.ts';
import { newClick } from '../helpers/records.ts';
import { BACKENDS, backendSuite } from '../storage/backends.ts';

const T0 = Date.UTC(2026, 0, 2, 12);
const MIN = 60_000;

interface ListPage<T> {
  items: T[];
  total: number;
  total_capped: boolean;
  next_cursor: string | null;
  runtime: { count: number };
  commit: string;
}
interface ApiErrorBody {
  error: { code: string; request_id: string; details?: { path: string }[] };
}

/** Newest first by created_at, ties by id compared bytewise: what both backends must answer. */
const newestFirst =
  <T extends { created_at: string }>(idOf: (x: T) => string) =>
  (a: T, b: T) =>
    a.created_at === b.created_at
      ? Buffer.compare(Buffer.from(idOf(b)), Buffer.from(idOf(a)))
      : a.created_at < b.created_at
        ? 1
        : -1;

for (const backend of BACKENDS) {
  describe(`clicks and conversions in the ACP on ${backend.name}`, async () => {
    const { available, it } = await backendSuite(backend);
    let t: TestNode;
    let admin: string;
    let viewer: string;
    let flowA: FlowRecord;
    let flowB: FlowRecord;
    let flowC: FlowRecord;
    let streamA1: StreamRecord;
    let streamA2: StreamRecord;
    let streamB1: StreamRecord;
    /** Every click inserted, as stored. */
    const stored: ClickRecord[] = [];

    const call = async <T>(path: string, body: unknown, token = viewer, status = 200): Promise<T> => {
      const res = await t.acp(path, token, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path} ${JSON.stringify(body)}: ${JSON.stringify(json)}`);
      return json;
    };
    const postback = async (query: string) => {
      const res = await fetch(`${t.url}${withPostbackKey(t, `/postback?${query}`)}`);
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as { conversion_id: string };
    };
    /** Every page of a list, following next_cursor. */
    const allPages = async <T>(path: string, filter: unknown, limit: number) => {
      const items: T[] = [];
      let cursor: string | undefined;
      let pages = 0;
      let total = -1;
      do {
        const page = await call<ListPage<T>>(path, { filter, limit, ...(cursor ? { cursor } : {}) });
        assert.ok(page.items.length <= limit);
        items.push(...page.items);
        total = page.total;
        cursor = page.next_cursor ?? undefined;
        pages++;
      } while (cursor !== undefined);
      return { items, pages, total };
    };

    before(async () => {
      if (!available) return;
      // The click log's flush is a minute away and the once-a-second `stats_flush` task (which
      // persists it too) is off: a click appended in a test stays in the buffer.
      t = await backend.startNode({
        yaml: 'clicks:\n  flush_interval_ms: 60000\ncron:\n  tasks:\n    stats_flush:\n      enabled: false\n',
      });
      [admin, viewer] = await Promise.all([t.token('admin'), t.token('viewer')]);
      const flow = (slug: string) =>
        call<FlowRecord>('/acp/traffic-flows/create', { slug, name: slug }, admin);
      const stream = (flow_id: string, name: string) =>
        call<StreamRecord>(
          '/acp/streams/create',
          { flow_id, name, type: 'regular', target_url: 'https://offer.test/?f={flow}' },
          admin,
        );
      flowA = await flow('clicks-a');
      flowB = await flow('clicks-b');
      flowC = await flow('clicks-c');
      streamA1 = await stream(flowA.id, 'a1');
      streamA2 = await stream(flowA.id, 'a2');
      streamB1 = await stream(flowB.id, 'b1');
      // 30 clicks over two flows, a minute apart except some that share a millisecond (ties are
      // broken by click id), with every filterable field varied.
      const rows: NewClick[] = [];
      for (let i = 0; i < 30; i++) {
        const onA = i % 3 !== 2;
        const bot = i % 7 === 0;
        rows.push(
          newClick({
            click_id: `ck-${String(i).padStart(2, '0')}-${i % 2 ? 'x' : 'Y'}`,
            flow_id: onA ? flowA.id : flowB.id,
            stream_id: bot ? null : onA ? (i % 2 ? streamA1.id : streamA2.id) : streamB1.id,
            at: T0 + Math.floor(i / 2) * MIN,
            outcome: bot ? 'bot' : i % 5 === 4 ? 'no_match' : 'redirect',
            is_bot: bot,
            is_unique: !bot && i % 4 !== 1,
            country: i % 4 === 0 ? 'US' : i % 4 === 1 ? 'DE' : null,
            subs: i % 3 === 0 ? [`camp-${i % 2}`, 'placement'] : null,
          }),
        );
      }
      const applied = await t.node.storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: 'n-test',
        rows,
      });
      assert.equal(applied.rows, rows.length);
      stored.push(...rows.map((c) => clickRecordOf(c, 'n-test')));
    });
    after(async () => {
      if (available) await t.close();
    });

    it('a click opens with its conversions; an unknown click is a 404 with one api error record', async () => {
      const click = stored.find((c) => c.flow_id === flowA.id && !c.is_bot)!;
      await postback(`click_id=${click.click_id}&txid=t1&status=lead&payout=1`);
      await postback(`click_id=${click.click_id}&txid=t1&status=sale&payout=12.5&currency=USD`);
      await postback(`click_id=${click.click_id}&txid=t2&status=lead&payout=2&currency=EUR`);
      const got = await call<{ click: ClickRecord & { pending: boolean }; conversions: ConversionRecord[] }>(
        '/acp/clicks/get',
        { click_id: click.click_id },
      );
      assert.deepEqual(got.click, { ...click, pending: false });
      assert.deepEqual(
        got.conversions.map((c) => [c.txid, c.status, c.payout, c.currency, c.postbacks, c.flow_id]),
        [
          ['t1', 'sale', 12.5, 'USD', 2, flowA.id],
          ['t2', 'lead', 2, 'EUR', 1, flowA.id],
        ],
      );

      const missing = await call<ApiErrorBody>('/acp/clicks/get', { click_id: 'no-such-click' }, viewer, 404);
      assert.equal(missing.error.code, 'resource.not_found');
      assert.equal(t.logs.apiErrors(missing.error.request_id).length, 1);
      const bad = await call<ApiErrorBody>('/acp/clicks/get', { click_id: 'not a click id' }, viewer, 400);
      assert.equal(bad.error.code, 'validation.invalid_input');
      assert.equal(bad.error.details?.[0]?.path, '/click_id');
    });

    it('a click still in the click log buffer is shown, marked pending, with a conversion it already has', async () => {
      const fresh = newClick({ click_id: 'fresh-1', flow_id: flowC.id, stream_id: null, at: Date.now() });
      assert.ok(t.node.clickLog.append(fresh));
      const before = await call<{ click: ClickRecord & { pending: boolean }; conversions: unknown[] }>(
        '/acp/clicks/get',
        { click_id: 'fresh-1' },
      );
      assert.deepEqual(before.click, { ...clickRecordOf(fresh, t.node.serverId), pending: true });
      assert.deepEqual(before.conversions, []);
      await postback('click_id=fresh-1&payout=4&currency=GBP');
      const withConversion = await call<{ conversions: ConversionRecord[] }>('/acp/clicks/get', {
        click_id: 'fresh-1',
      });
      assert.deepEqual(
        withConversion.conversions.map((c) => [c.click_id, c.status, c.payout, c.currency]),
        [['fresh-1', 'sale', 4, 'GBP']],
      );
      // Not in the list yet: the list reads the database, which has not got it.
      const listed = await call<ListPage<ClickRecord>>('/acp/clicks/list', { filter: { flow_id: flowC.id } });
      assert.deepEqual(listed.items, []);
    });

    it('the click list is newest first and keyset-paged under every filter', async () => {
      const cases: [Record<string, unknown>, (c: ClickRecord) => boolean][] = [
        [{}, () => true],
        [{ flow_id: flowA.id }, (c) => c.flow_id === flowA.id],
        [{ stream_id: streamA1.id }, (c) => c.stream_id === streamA1.id],
        [{ outcome: 'no_match' }, (c) => c.outcome === 'no_match'],
        [{ country: 'US' }, (c) => c.country === 'US'],
        [{ is_bot: true }, (c) => c.is_bot],
        [{ is_bot: false, flow_id: flowB.id }, (c) => !c.is_bot && c.flow_id === flowB.id],
        [{ sub1: 'camp-1' }, (c) => c.sub1 === 'camp-1'],
        [
          { from: new Date(T0 + 3 * MIN).toISOString(), to: new Date(T0 + 9 * MIN).toISOString() },
          (c) =>
            c.created_at >= new Date(T0 + 3 * MIN).toISOString() &&
            c.created_at < new Date(T0 + 9 * MIN).toISOString(),
        ],
        // Other ISO-8601 forms name the same instants: a date, minutes only, a zone offset.
        [
          { from: '2026-01-02', to: '2026-01-02T14:05+02:00' },
          (c) => c.created_at < new Date(T0 + 5 * MIN).toISOString(),
        ],
      ];
      for (const [filter, keep] of cases) {
        const expected = stored
          .filter((c) => c.flow_id !== flowC.id)
          .filter(keep)
          .sort(newestFirst((c) => c.click_id));
        assert.ok(expected.length > 0, `the fixture has clicks for ${JSON.stringify(filter)}`);
        const got = await allPages<ClickRecord>('/acp/clicks/list', filter, 4);
        assert.deepEqual(got.items, expected, JSON.stringify(filter));
        assert.equal(got.total, expected.length);
        assert.equal(got.pages, Math.ceil(expected.length / 4));
      }
      const first = await call<ListPage<ClickRecord>>('/acp/clicks/list', {});
      // The default page holds 50 (flow C's one click may have been flushed meanwhile).
      assert.equal(first.items.filter((c) => c.flow_id !== flowC.id).length, 30);
      assert.equal(first.total_capped, false);
      assert.equal(first.next_cursor, null);
    });

    it('conversions are listed newest first with filters, one per (click_id, txid), with their postback count', async () => {
      const [c1, c2, c3] = stored.filter((c) => !c.is_bot && c.flow_id !== flowC.id).slice(5);
      await postback(`click_id=${c1!.click_id}&status=rejected&payout=100`);
      await postback(`click_id=${c2!.click_id}&txid=a&payout=3`);
      await postback(`click_id=${c2!.click_id}&txid=a&payout=3.25`);
      await postback(`click_id=${c3!.click_id}&status=lead&payout=0.5&currency=EUR`);
      const all = await allPages<ConversionRecord>('/acp/conversions/list', {}, 2);
      assert.deepEqual(all.items, [...all.items].sort(newestFirst((c) => c.conversion_id)));
      const ids = all.items.map((c) => `${c.click_id}/${c.txid ?? ''}`);
      assert.equal(new Set(ids).size, ids.length, 'one conversion per (click_id, txid)');
      assert.equal(all.total, all.items.length);
      const ofC2 = all.items.filter((c) => c.click_id === c2!.click_id);
      assert.deepEqual(
        ofC2.map((c) => [c.payout, c.postbacks, c.status]),
        [[3.25, 2, 'sale']],
      );

      const rejected = await allPages<ConversionRecord>('/acp/conversions/list', { status: 'rejected' }, 10);
      assert.deepEqual(
        rejected.items.map((c) => c.click_id),
        [c1!.click_id],
      );
      for (const [filter, keep] of [
        [{ flow_id: flowB.id }, (c: ConversionRecord) => c.flow_id === flowB.id],
        [{ stream_id: c3!.stream_id }, (c: ConversionRecord) => c.stream_id === c3!.stream_id],
        [{ status: 'lead' }, (c: ConversionRecord) => c.status === 'lead'],
        [
          { from: all.items[1]!.created_at },
          (c: ConversionRecord) => c.created_at >= all.items[1]!.created_at,
        ],
        [{ to: all.items[1]!.created_at }, (c: ConversionRecord) => c.created_at < all.items[1]!.created_at],
      ] as const) {
        const got = await allPages<ConversionRecord>('/acp/conversions/list', filter, 2);
        assert.deepEqual(got.items, all.items.filter(keep), JSON.stringify(filter));
      }
    });

    it('flows and streams lists carry conversions (leads and sales) and revenue per currency, rejected left out', async () => {
      const conversions = (await allPages<ConversionRecord>('/acp/conversions/list', {}, 500)).items.filter(
        (c) => c.status !== 'rejected',
      );
      const expect = (key: 'flow_id' | 'stream_id', id: string) => {
        const mine = conversions.filter((c) => c[key] === id);
        const revenue: Record<string, number> = {};
        for (const c of [...mine].sort((a, b) => (a.currency < b.currency ? -1 : 1))) {
          revenue[c.currency] = Math.round(((revenue[c.currency] ?? 0) + c.payout) * 1e6) / 1e6;
        }
        return { conversions: mine.length, revenue };
      };
      const flows = await call<
        ListPage<FlowRecord & { conversions: number; revenue: Record<string, number> }>
      >('/acp/traffic-flows/list', {});
      assert.equal(flows.items.length, 3);
      for (const f of flows.items) {
        assert.deepEqual({ conversions: f.conversions, revenue: f.revenue }, expect('flow_id', f.id), f.slug);
      }
      const a = flows.items.find((f) => f.id === flowA.id)!;
      assert.ok(Object.keys(a.revenue).length >= 2, 'flow A earned in two currencies, kept apart');
      assert.deepEqual(Object.keys(a.revenue), [...Object.keys(a.revenue)].sort());
      const streams = await call<
        ListPage<StreamRecord & { conversions: number; revenue: Record<string, number> }>
      >('/acp/streams/list', { filter: { flow_id: flowA.id } });
      assert.equal(streams.items.length, 2);
      for (const s of streams.items) {
        assert.deepEqual(
          { conversions: s.conversions, revenue: s.revenue },
          expect('stream_id', s.id),
          s.name,
        );
      }
      const c = flows.items.find((f) => f.id === flowC.id)!;
      assert.deepEqual(
        [c.conversions, c.revenue],
        [1, { GBP: 4 }],
        'a conversion of a buffered click counts',
      );
    });

    it('both lists carry runtime equal to controllers[path] and commit', async () => {
      for (const path of ['/acp/clicks/list', '/acp/conversions/list'] as const) {
        await call(path, { limit: 0 }, viewer, 400);
        const m = await call<{ controllers: Record<string, { count: number; errors: number }> }>(
          '/acp/system/metrics',
          {},
        );
        const body = await call<ListPage<unknown>>(path, {});
        assert.deepEqual(body.runtime, m.controllers[path]);
        assert.ok(m.controllers[path]!.errors >= 1);
        assert.equal(body.commit, t.node.telemetry.commit);
      }
    });

    it('bad filters, limits and cursors are 400 validation.invalid_input naming the field, one api error each', async () => {
      const cases: [string, unknown, string][] = [
        ['/acp/clicks/list', { limit: 501 }, '/limit'],
        ['/acp/clicks/list', { filter: { outcome: 'sold' } }, '/filter/outcome'],
        ['/acp/clicks/list', { filter: { country: 'de' } }, '/filter/country'],
        ['/acp/clicks/list', { filter: { is_bot: 'yes' } }, '/filter/is_bot'],
        ['/acp/clicks/list', { filter: { from: 'yesterday' } }, '/filter/from'],
        ['/acp/clicks/list', { filter: { from: '2026-02-30' } }, '/filter/from'],
        ['/acp/clicks/list', { filter: { to: '2026-02-29T10:00Z' } }, '/filter/to'],
        ['/acp/clicks/list', { filter: { from: '0000-01-01' } }, '/filter/from'],
        ['/acp/clicks/list', { filter: { sub1: 'a\u0000b' } }, '/filter/sub1'],
        ['/acp/clicks/list', { filter: { flow_id: "x' OR 1=1" } }, '/filter/flow_id'],
        ['/acp/clicks/list', { filter: { referrer_host: 'a' } }, '/filter'],
        [
          '/acp/clicks/list',
          { cursor: Buffer.from('["clicks","created_at","desc",1,"x"]').toString('base64url') },
          '/cursor',
        ],
        ['/acp/conversions/list', { filter: { status: 'approved' } }, '/filter/status'],
        ['/acp/conversions/list', { filter: { to: '2026-13-01' } }, '/filter/to'],
        [
          '/acp/conversions/list',
          {
            cursor: Buffer.from(
              '["conversions","created_at","desc","2026-01-01T00:00:00.000Z","no\u0000"]',
            ).toString('base64url'),
          },
          '/cursor',
        ],
      ];
      for (const [path, body, field] of cases) {
        const res = await call<ApiErrorBody>(path, body, viewer, 400);
        assert.equal(res.error.code, 'validation.invalid_input', `${path} ${JSON.stringify(body)}`);
        assert.ok(
          (res.error.details ?? []).some((d) => d.path.startsWith(field)),
          `${JSON.stringify(body)} names ${field}: ${JSON.stringify(res.error.details)}`,
        );
        assert.equal(t.logs.apiErrors(res.error.request_id).length, 1);
      }
    });

    it('a cursor of one log list is refused by another (clicks, conversions, audit): 400 naming /cursor', async () => {
      // All three encode (created_at desc, time, id) and their ids fit each other's checks: a
      // conversions cursor used to page the clicks list from a position in another table.
      const [c1, c2] = stored.filter((c) => !c.is_bot).slice(-2);
      await postback(`click_id=${c1!.click_id}&txid=cursor-1`);
      await postback(`click_id=${c2!.click_id}&txid=cursor-2`);
      const lists = [
        ['/acp/clicks/list', viewer],
        ['/acp/conversions/list', viewer],
        ['/acp/audit/list', admin],
      ] as const;
      const cursors = await Promise.all(
        lists.map(async ([path, token]) => {
          const page = await call<ListPage<unknown>>(path, { limit: 1 }, token);
          assert.ok(page.next_cursor, `${path} has a second page`);
          return page.next_cursor;
        }),
      );
      for (const [i, [path, token]] of lists.entries()) {
        // Its own cursor pages on.
        await call<ListPage<unknown>>(path, { limit: 1, cursor: cursors[i] }, token);
        for (const [j, [from]] of lists.entries()) {
          if (i === j) continue;
          const res = await call<ApiErrorBody>(path, { limit: 1, cursor: cursors[j] }, token, 400);
          assert.equal(res.error.code, 'validation.invalid_input', `${from} cursor on ${path}`);
          assert.deepEqual(
            res.error.details?.map((d) => d.path),
            ['/cursor'],
            `${from} cursor on ${path}`,
          );
          assert.equal(t.logs.apiErrors(res.error.request_id).length, 1);
        }
      }
    });
  });
}
