import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import { runReport } from '../../src/reports/index.ts';
import { type ConversionRecord, clickRecordOf, newBatchId, type Storage } from '../../src/storage/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { flowInput, newClick } from '../helpers/records.ts';
import { BACKENDS, type Opened } from './backends.ts';

const isCode = (code: string) => (err: unknown) => err instanceof ApiError && err.code === code;
const T0 = Date.UTC(2026, 0, 2, 12);

for (const backend of BACKENDS) {
  describe(`conversions on ${backend.name}`, async () => {
    const available = await backend.available();
    const clock = new ManualClock(T0 + 3_600_000);
    let opened: Opened;
    let storage: Storage;
    before(async () => {
      if (!available) return;
      opened = await backend.open(clock);
      storage = opened.storage;
    });
    after(async () => {
      if (available) await opened.cleanup();
    });
    const it = (name: string, fn: () => Promise<void>) =>
      test(name, { skip: !available && `${backend.name} unavailable` }, fn);

    it('the first postback creates the conversion attributed to its click; the same (click, txid) again updates it', async () => {
      const click = newClick({
        click_id: 'conv-1',
        flow_id: 'cf',
        stream_id: 'cs',
        subs: ['a', 'b'],
        country: 'FR',
      });
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows: [click] });
      const first = await storage.conversions.upsert({
        click_id: 'conv-1',
        txid: 'T1',
        status: 'lead',
        payout: 0,
        currency: 'USD',
      });
      assert.ok(first);
      assert.equal(first.created, true);
      const stored = clickRecordOf(click, 'n1');
      const expected: ConversionRecord = {
        conversion_id: first.conversion.conversion_id,
        click_id: 'conv-1',
        txid: 'T1',
        status: 'lead',
        payout: 0,
        currency: 'USD',
        postbacks: 1,
        created_at: new Date(clock.now()).toISOString(),
        updated_at: new Date(clock.now()).toISOString(),
        click_created_at: stored.created_at,
        flow_id: 'cf',
        stream_id: 'cs',
        outcome: 'redirect',
        country: 'FR',
        device_type: stored.device_type,
        os: stored.os,
        browser: stored.browser,
        language: stored.language,
        referrer_host: stored.referrer_host,
        sub1: 'a',
        sub2: 'b',
        sub3: null,
        sub4: null,
        sub5: null,
        sub6: null,
        sub7: null,
        sub8: null,
        sub9: null,
        sub10: null,
        is_unique: true,
        is_bot: false,
      };
      assert.deepEqual(first.conversion, expected);
      clock.advance(60_000);
      const again = await storage.conversions.upsert({
        click_id: 'conv-1',
        txid: 'T1',
        status: 'sale',
        payout: 12.345678,
        currency: 'EUR',
      });
      assert.deepEqual(again, {
        created: false,
        conversion: {
          ...expected,
          status: 'sale',
          payout: 12.345678,
          currency: 'EUR',
          postbacks: 2,
          updated_at: new Date(clock.now()).toISOString(),
        },
      });
      assert.deepEqual(await storage.conversions.ofClick('conv-1'), [again.conversion]);
    });

    it('another txid is another conversion; no txid is one conversion per click', async () => {
      await storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: null,
        rows: [newClick({ click_id: 'conv-2' })],
      });
      const up = (txid: string | null, payout: number) =>
        storage.conversions.upsert({ click_id: 'conv-2', txid, status: 'sale', payout, currency: 'USD' });
      assert.equal((await up('A', 1))?.created, true);
      clock.advance(1000);
      assert.equal((await up('B', 2))?.created, true);
      clock.advance(1000);
      assert.equal((await up(null, 3))?.created, true);
      assert.equal((await up('', 4))?.created, false, 'an empty txid is no txid');
      assert.equal((await up(null, 5))?.created, false);
      const got = await storage.conversions.ofClick('conv-2');
      assert.deepEqual(
        got.map((c) => [c.txid, c.payout, c.postbacks]),
        [
          ['A', 1, 1],
          ['B', 2, 1],
          [null, 5, 3],
        ],
      );
    });

    it('an unknown click is undefined, a click given by the caller (still in a buffer) is attributed from it', async () => {
      const input = {
        click_id: 'conv-unflushed',
        txid: null,
        status: 'lead' as const,
        payout: 1.5,
        currency: 'USD',
      };
      assert.equal(await storage.conversions.upsert(input), undefined);
      assert.deepEqual(await storage.conversions.ofClick('conv-unflushed'), []);
      const buffered = clickRecordOf(
        newClick({ click_id: 'conv-unflushed', flow_id: 'bf', subs: ['s1'] }),
        'n2',
      );
      const made = await storage.conversions.upsert(input, buffered);
      assert.equal(made?.created, true);
      assert.equal(made?.conversion.flow_id, 'bf');
      assert.equal(made?.conversion.sub1, 's1');
      assert.equal(made?.conversion.click_created_at, buffered.created_at);
      // Once the click is flushed, later postbacks find it in the log and update the same row.
      await storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: 'n2',
        rows: [newClick({ click_id: 'conv-unflushed', flow_id: 'bf' })],
      });
      const later = await storage.conversions.upsert({ ...input, status: 'sale' });
      assert.equal(later?.created, false);
      assert.equal(later?.conversion.conversion_id, made?.conversion.conversion_id);
    });

    it('money summed past 2^53 micro-units is read as on the other backend: ten sales of 999,999,999.999999, an hour of the largest cost per click', async () => {
      const flow = await storage.flows.create(flowInput('big-money', { currency: 'IDR' }));
      const CLICKS = 9_100;
      const COST = 1_000_000; // units a click, the most a flow may charge
      const PAYOUT = '999999999.999999';
      const SALES = 10;
      const rows = Array.from({ length: CLICKS }, (_, i) =>
        newClick({ click_id: `big-${i}`, flow_id: flow.id, stream_id: 'big-s', at: T0 + i, cost: COST }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows });
      for (let i = 0; i < SALES; i++) {
        await storage.conversions.upsert({
          click_id: `big-${i}`,
          txid: `sale-${i}`,
          status: 'sale',
          payout: Number(PAYOUT),
          currency: 'IDR',
        });
      }
      // Both past Number.MAX_SAFE_INTEGER micro-units; shown as the nearest JSON number.
      const revenueMicros = BigInt(SALES) * BigInt(PAYOUT.replace('.', ''));
      const costMicros = BigInt(CLICKS) * BigInt(COST) * 1_000_000n;
      assert.ok(
        revenueMicros > BigInt(Number.MAX_SAFE_INTEGER) && costMicros > BigInt(Number.MAX_SAFE_INTEGER),
      );
      const sums = await storage.conversions.sumsBy('flow_id', [flow.id]);
      assert.deepEqual(sums.get(flow.id), {
        conversions: SALES,
        revenue: { IDR: Number(revenueMicros) / 1e6 },
      });
      for (const source of ['clicks', 'rollups'] as const) {
        const report = await runReport(storage, {
          from: '2026-01-02',
          to: '2026-01-03',
          source,
          filter: { flow_id: flow.id },
        });
        assert.equal(report.currency, 'IDR', source);
        assert.equal(report.totals.revenue, Number(revenueMicros) / 1e6, source);
        assert.equal(report.totals.cost, Number(costMicros) / 1e6, source);
        assert.equal(report.totals.clicks, CLICKS, source);
      }
    });

    it('bad values are validation.invalid_input, never a database error', async () => {
      const base = { click_id: 'conv-1', txid: null, status: 'sale' as const, currency: 'USD' };
      for (const payout of [-1, Number.NaN, Number.POSITIVE_INFINITY, 1e10]) {
        await assert.rejects(
          storage.conversions.upsert({ ...base, payout }),
          isCode('validation.invalid_input'),
        );
      }
      await assert.rejects(
        storage.conversions.upsert({ ...base, click_id: 'bad id', payout: 1 }),
        isCode('validation.invalid_input'),
      );
    });

    it('concurrent postbacks of one (click, txid) from two connections make one conversion counting all of them', async () => {
      await storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: null,
        rows: [newClick({ click_id: 'conv-race' })],
      });
      const other = backend.name === 'postgres' ? opened.reopen() : storage;
      try {
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 ? other : storage).conversions.upsert({
              click_id: 'conv-race',
              txid: 'X',
              status: 'sale',
              payout: i,
              currency: 'USD',
            }),
          ),
        );
        assert.equal(results.filter((r) => r?.created).length, 1);
      } finally {
        if (other !== storage) await other.close();
      }
      const [c] = await storage.conversions.ofClick('conv-race');
      assert.equal(c?.postbacks, 10);
    });

    it('lists newest first with filters flow_id, stream_id, status, from, to, paged by cursor', async () => {
      const clicks = Array.from({ length: 12 }, (_, i) =>
        newClick({ click_id: `cl-${i}`, flow_id: `lf${i % 2}`, stream_id: `ls${i % 3}` }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows: clicks });
      clock.set(Date.UTC(2026, 1, 1));
      const made: ConversionRecord[] = [];
      for (const [i, c] of clicks.entries()) {
        if (i % 4 === 0) clock.advance(1000); // ties in created_at, broken by id
        const r = await storage.conversions.upsert({
          click_id: c.click_id,
          txid: null,
          status: (['lead', 'sale', 'rejected'] as const)[i % 3],
          payout: i,
          currency: 'USD',
        });
        made.push(r!.conversion);
      }
      const order = (a: ConversionRecord, b: ConversionRecord) =>
        a.created_at === b.created_at
          ? a.conversion_id < b.conversion_id
            ? 1
            : -1
          : a.created_at < b.created_at
            ? 1
            : -1;
      const from = new Date(Date.UTC(2026, 1, 1, 0, 0, 2)).toISOString();
      for (const [filter, keep] of [
        [{ from: new Date(Date.UTC(2026, 1, 1)).toISOString() }, () => true],
        [
          { flow_id: 'lf1', from: new Date(Date.UTC(2026, 1, 1)).toISOString() },
          (c: ConversionRecord) => c.flow_id === 'lf1',
        ],
        [
          { stream_id: 'ls2', status: 'rejected' as const },
          (c: ConversionRecord) => c.stream_id === 'ls2' && c.status === 'rejected',
        ],
        [
          { from, to: new Date(Date.UTC(2026, 1, 1, 0, 0, 3)).toISOString() },
          (c: ConversionRecord) =>
            c.created_at >= from && c.created_at < new Date(Date.UTC(2026, 1, 1, 0, 0, 3)).toISOString(),
        ],
      ] as const) {
        const expected = made.filter(keep).sort(order);
        assert.ok(expected.length > 0);
        const got: ConversionRecord[] = [];
        let cursor: string | undefined;
        do {
          const page = await storage.conversions.list({ filter, limit: 2, cursor });
          assert.equal(page.total, expected.length);
          got.push(...page.items);
          cursor = page.next_cursor ?? undefined;
        } while (cursor);
        assert.deepEqual(got, expected, JSON.stringify(filter));
      }
    });
  });
}
