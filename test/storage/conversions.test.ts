import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import { runReport } from '../../src/reports/index.ts';
import {
  type ConversionRecord,
  clickRecordOf,
  newBatchId,
  openPostgres,
  type Storage,
} from '../../src/storage/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { flowInput, newClick } from '../helpers/records.ts';
import { BATCH_BACKENDS, type Opened, storeSuite } from './backends.ts';

const isCode = (code: string) => (err: unknown) => err instanceof ApiError && err.code === code;
const T0 = Date.UTC(2026, 0, 2, 12);

for (const backend of BATCH_BACKENDS) {
  describe(`conversions on ${backend.label}`, async () => {
    const clock = new ManualClock(T0 + 3_600_000);
    let opened: Opened;
    let storage: Storage;
    const { it } = await storeSuite(backend, {
      clock,
      onOpen: (o) => {
        opened = o;
        storage = o.storage;
      },
    });

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

    it('money summed past 2^53 and past 2^63 micro-units is read as on the other backend, as the number nearest the exact sum', async () => {
      const flow = await storage.flows.create(flowInput('big-money', { currency: 'IDR' }));
      const CLICKS = 9_300;
      const COST = 1_000_000; // units a click, the most a flow may charge
      const PAYOUT = '999999999.999999';
      const SALES = 10;
      // Three hours, so three hourly rollup rows.
      const rows = Array.from({ length: CLICKS }, (_, i) =>
        newClick({
          click_id: `big-${i}`,
          flow_id: flow.id,
          stream_id: 'big-s',
          at: T0 + (i % 3) * 3_600_000 + i,
          cost: COST,
        }),
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
      /** The number nearest an exact decimal of micro-units (JavaScript parses decimals exactly rounded). */
      const nearest = (micros: bigint): number =>
        micros < 0n
          ? -nearest(-micros)
          : Number(`${micros / 1_000_000n}.${String(micros % 1_000_000n).padStart(6, '0')}`);
      const check = async (revenueMicros: bigint, costMicros: bigint) => {
        const sums = await storage.conversions.sumsBy('flow_id', [flow.id]);
        assert.deepEqual(sums.get(flow.id), { conversions: SALES, revenue: { IDR: nearest(revenueMicros) } });
        for (const source of ['clicks', 'rollups'] as const) {
          const report = await runReport(storage, {
            from: '2026-01-02',
            to: '2026-01-03',
            source,
            filter: { flow_id: flow.id },
          });
          assert.equal(report.currency, 'IDR', source);
          assert.equal(report.totals.revenue, nearest(revenueMicros), source);
          assert.equal(report.totals.cost, nearest(costMicros), source);
          assert.equal(report.totals.profit, nearest(revenueMicros - costMicros), source);
          assert.equal(report.totals.clicks, CLICKS, source);
        }
      };
      // Past Number.MAX_SAFE_INTEGER micro-units: node:sqlite would not read such a sum as a number.
      const revenue = BigInt(SALES) * BigInt(PAYOUT.replace('.', ''));
      const cost = BigInt(CLICKS) * BigInt(COST) * 1_000_000n;
      assert.ok(revenue > BigInt(Number.MAX_SAFE_INTEGER) && cost > BigInt(Number.MAX_SAFE_INTEGER));
      await check(revenue, cost);

      // Past 2^63 (SQLite's SUM stops there, PostgreSQL's goes on): amounts no write path makes
      // one row at a time, put in by hand as another writer could.
      const sql = opened.sql();
      const PAYOUT_MICROS = 929_999_999_999_999_999n;
      const CLICK_MICROS = 999_999_999_999_999n;
      const HOUR_MICROS = 3_099_999_999_999_999_999n;
      await sql.run(`UPDATE conversions SET payout_micros = ${PAYOUT_MICROS} WHERE click_id LIKE 'big-%'`);
      await sql.run(`UPDATE clicks SET cost_micros = ${CLICK_MICROS} WHERE flow_id = ?`, [flow.id]);
      const hours = await sql.run(`UPDATE report_hours SET cost_micros = ${HOUR_MICROS} WHERE flow_id = ?`, [
        flow.id,
      ]);
      assert.equal(hours, 3);
      const big = BigInt(SALES) * PAYOUT_MICROS;
      assert.ok(big > 2n ** 63n && BigInt(CLICKS) * CLICK_MICROS > 2n ** 63n && 3n * HOUR_MICROS > 2n ** 63n);
      // The report sums the click log or the rollups, whichever it reads; the two now differ.
      const sums = await storage.conversions.sumsBy('flow_id', [flow.id]);
      assert.deepEqual(sums.get(flow.id), { conversions: SALES, revenue: { IDR: nearest(big) } });
      for (const [source, costMicros] of [
        ['clicks', BigInt(CLICKS) * CLICK_MICROS],
        ['rollups', 3n * HOUR_MICROS],
      ] as const) {
        const report = await runReport(storage, {
          from: '2026-01-02',
          to: '2026-01-03',
          source,
          filter: { flow_id: flow.id },
        });
        assert.equal(report.totals.revenue, nearest(big), source);
        assert.equal(report.totals.cost, nearest(costMicros), source);
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

    it('postbacks that arrive together (written together) each get their own answer; one the database refuses fails alone', async () => {
      await storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: null,
        rows: Array.from({ length: 4 }, (_, i) =>
          newClick({ click_id: `conv-many-${i}`, flow_id: `many-${i}` }),
        ),
      });
      const up = (click_id: string, txid: string, payout: number) =>
        storage.conversions.upsert({ click_id, txid, status: 'lead', payout, currency: 'USD' });
      const seen = (r: Awaited<ReturnType<typeof up>>) =>
        r === undefined
          ? 'unknown click'
          : [r.conversion.click_id, r.conversion.txid, r.conversion.payout, r.conversion.flow_id, r.created];
      // Sent at once: one statement on PostgreSQL, one message (one transaction) to SQLite's writer
      // thread, one statement each on SQLite's own connection.
      const queries = storage.stats().queries;
      const first = await Promise.all([
        up('conv-many-0', 'a', 1),
        up('conv-many-1', 'a', 2),
        up('conv-many-nope', 'a', 3),
        up('conv-many-3', 'a', 4),
      ]);
      assert.deepEqual(first.map(seen), [
        ['conv-many-0', 'a', 1, 'many-0', true],
        ['conv-many-1', 'a', 2, 'many-1', true],
        'unknown click',
        ['conv-many-3', 'a', 4, 'many-3', true],
      ]);
      assert.equal(storage.stats().queries - queries, backend.label === 'sqlite' ? 4 : 1);
      // A write the database refuses, as a constraint or a failing disk would refuse it.
      const sql = opened.sql();
      if (backend.name === 'postgres') {
        await sql.script(`CREATE FUNCTION refuse_txid() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN IF NEW.txid = 'refused' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
          CREATE TRIGGER refuse_txid BEFORE INSERT ON conversions FOR EACH ROW EXECUTE FUNCTION refuse_txid();`);
      } else {
        await sql.script(`CREATE TRIGGER refuse_txid BEFORE INSERT ON conversions WHEN NEW.txid = 'refused'
          BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;`);
      }
      try {
        const answers = await Promise.allSettled([
          up('conv-many-0', 'a', 5),
          up('conv-many-2', 'refused', 6),
          up('conv-many-nope', 'a', 7),
          up('conv-many-3', 'b', 8),
        ]);
        assert.deepEqual(
          answers.map((a) => (a.status === 'rejected' ? 'refused' : seen(a.value))),
          [
            ['conv-many-0', 'a', 5, 'many-0', false],
            'refused',
            'unknown click',
            ['conv-many-3', 'b', 8, 'many-3', true],
          ],
        );
      } finally {
        await sql.script(
          backend.name === 'postgres'
            ? 'DROP TRIGGER refuse_txid ON conversions; DROP FUNCTION refuse_txid();'
            : 'DROP TRIGGER refuse_txid;',
        );
      }
      assert.deepEqual(await storage.conversions.ofClick('conv-many-2'), [], 'the refused one wrote nothing');
      assert.equal((await storage.conversions.ofClick('conv-many-3')).length, 2);
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
          status: (['lead', 'sale', 'rejected'] as const)[i % 3]!,
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

// PostgreSQL's postbacks of a moment share one statement; when it failed, each was sent again
// alone, one after another. With the server unreachable every one of them waited out its own
// connection attempt in turn (3 s each when packets are dropped: the last of 500 waited 25
// minutes, and every postback after them waited behind), to fail as the first did (review-30).
describe('postbacks that arrive together while PostgreSQL is unreachable', () => {
  test('fail together after one attempt, not one attempt more each', async () => {
    // Nothing listens on port 1: each connection attempt is refused at once.
    const storage = openPostgres({
      url: 'postgres://127.0.0.1:1/test',
      poolMax: 5,
      schema: 'nowhere',
      clock: new ManualClock(T0),
    });
    try {
      const answers = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          storage.conversions.upsert({
            click_id: `down-${i}`,
            txid: null,
            status: 'sale',
            payout: 1,
            currency: 'USD',
          }),
        ),
      );
      assert.ok(answers.every((a) => a.status === 'rejected' && isCode('db.unavailable')(a.reason)));
      assert.equal(storage.stats().errors, 1, 'one statement tried');
    } finally {
      await storage.close();
    }
  });
});

describe('postbacks that arrive together and lose a deadlock on PostgreSQL', async () => {
  const pgCase = BATCH_BACKENDS.find((b) => b.name === 'postgres')!;
  const available = await pgCase.available();
  // A deadlock is the statement's luck, not the database's state (it is classed unavailable for
  // the click log's retries): the postbacks are sent again alone, not failed together.
  test('are each sent again alone and go through', {
    skip: !available && 'PostgreSQL unavailable',
  }, async () => {
    const opened = await pgCase.open(new ManualClock(T0));
    try {
      const storage = opened.storage;
      await storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: null,
        rows: Array.from({ length: 3 }, (_, i) => newClick({ click_id: `dl-${i}`, flow_id: 'dl' })),
      });
      // The first row written (the statement of all three) loses a deadlock; a sequence is not
      // rolled back with it, so the rows written after go through.
      await opened.sql().script(`CREATE SEQUENCE deadlock_once;
        CREATE FUNCTION deadlock_once() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN IF nextval('deadlock_once') = 1 THEN
            RAISE EXCEPTION 'deadlock detected' USING ERRCODE = 'deadlock_detected'; END IF;
          RETURN NEW; END $$;
        CREATE TRIGGER deadlock_once BEFORE INSERT ON conversions FOR EACH ROW EXECUTE FUNCTION deadlock_once();`);
      const answers = await Promise.all(
        [0, 1, 2].map((i) =>
          storage.conversions.upsert({
            click_id: `dl-${i}`,
            txid: null,
            status: 'sale',
            payout: 1,
            currency: 'USD',
          }),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a?.conversion.click_id),
        ['dl-0', 'dl-1', 'dl-2'],
      );
    } finally {
      await opened.cleanup();
    }
  });
});
