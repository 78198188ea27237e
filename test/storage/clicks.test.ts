import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import { hourRollups } from '../../src/storage/clicks.ts';
import {
  CLICK_BATCH_MAX_ROWS,
  type ClickFilter,
  type ClickRecord,
  clickRecordOf,
  LOG_TOTAL_CAP,
  type NewClick,
  newBatchId,
  type Storage,
  WRITER_CLICK_BATCH_MAX_ROWS,
} from '../../src/storage/index.ts';
import { ROLLUP_COLUMNS } from '../../src/storage/report-store.ts';
import { type SqlExecutor, toIso, toNum } from '../../src/storage/sql.ts';
import { flowInput, newClick, streamInput } from '../helpers/records.ts';
import { BATCH_BACKENDS, storeSuite } from './backends.ts';

const isCode = (code: string) => (err: unknown) => err instanceof ApiError && err.code === code;
const T0 = Date.UTC(2026, 0, 2, 12);

/** Newest first by created_at, ties by click id compared bytewise: what both backends must answer. */
const newestFirst = (a: ClickRecord, b: ClickRecord) =>
  a.created_at === b.created_at
    ? Buffer.compare(Buffer.from(b.click_id), Buffer.from(a.click_id))
    : a.created_at < b.created_at
      ? 1
      : -1;

/** Every page of a list, following next_cursor. */
async function allPages(storage: Storage, filter: ClickFilter, limit: number) {
  const items: ClickRecord[] = [];
  let cursor: string | undefined;
  let pages = 0;
  let total = -1;
  do {
    const page = await storage.clicks.list({ filter, limit, cursor });
    assert.ok(page.items.length <= limit);
    items.push(...page.items);
    total = page.total;
    cursor = page.next_cursor ?? undefined;
    pages++;
  } while (cursor !== undefined);
  return { items, pages, total };
}

for (const backend of BATCH_BACKENDS) {
  describe(`click log storage on ${backend.label}`, async () => {
    let storage: Storage;
    let sql: SqlExecutor;
    const { it } = await storeSuite(backend, {
      onOpen: (o) => {
        storage = o.storage;
        sql = o.sql();
      },
    });
    const countWhere = async (where: string, params: unknown[]) =>
      toNum((await sql.all<{ n: unknown }>(`SELECT COUNT(*) AS n FROM clicks WHERE ${where}`, params))[0]?.n);

    it('a click is stored with every field and read back as the record', async () => {
      const long = 'x'.repeat(300);
      const c = newClick({
        click_id: 'Rec_1-a',
        at: T0 + 123,
        subs: ['abc', null, undefined, 'nul\u0000here', long],
        cost: 0.123456,
        country: null,
        language: null,
        referrer_host: null,
      });
      const bot = newClick({
        click_id: 'Rec_1-b',
        stream_id: null,
        outcome: 'bot',
        is_bot: true,
        is_unique: false,
        device_type: 'other',
        os: 'Other',
        browser: 'Other',
        cost: 0,
        ip_prefix: '2001:db8:1::/48',
      });
      assert.deepEqual(
        await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'node-a', rows: [c, bot] }),
        {
          applied: true,
          rows: 2,
        },
      );
      const got = await storage.clicks.get('Rec_1-a');
      assert.deepEqual(got, {
        click_id: 'Rec_1-a',
        flow_id: 'f1',
        stream_id: 's1',
        created_at: '2026-01-02T12:00:00.123Z',
        outcome: 'redirect',
        country: null,
        device_type: 'mobile',
        os: 'Android',
        browser: 'Chrome',
        language: null,
        referrer_host: null,
        sub1: 'abc',
        sub2: null,
        sub3: null,
        sub4: 'nul\uFFFDhere',
        sub5: 'x'.repeat(256),
        sub6: null,
        sub7: null,
        sub8: null,
        sub9: null,
        sub10: null,
        is_unique: true,
        is_bot: false,
        cost: 0.123456,
        ip_prefix: '203.0.113.0/24',
        server_id: 'node-a',
      });
      assert.deepEqual(got, clickRecordOf(c, 'node-a'), 'a buffered click shows as it will be stored');
      assert.deepEqual(await storage.clicks.get('Rec_1-b'), clickRecordOf(bot, 'node-a'));
      assert.equal(await storage.clicks.get('Rec_1-c'), undefined);
      assert.equal(await storage.clicks.get('not a click id!'), undefined, 'never a query error');
    });

    it('money is exact: a million clicks’ worth of 0.1 sums to exactly 100000 in the database', async () => {
      const rows = Array.from({ length: 2000 }, (_, i) =>
        newClick({ flow_id: 'money', cost: i % 2 ? 0.1 : 0.2 }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
      const [r] = await sql.all<{ s: unknown }>(
        "SELECT SUM(cost_micros) AS s FROM clicks WHERE flow_id = 'money'",
      );
      assert.equal(toNum(r?.s), 300_000_000, '1000 × 0.1 + 1000 × 0.2 in micro-units, no float drift');
    });

    it('two clicks whose os differ only by a lone surrogate are stored, both as U+FFFD, summed in one rollup row', async () => {
      // Two keys in JavaScript but one in the database, had the text been made well-formed only on
      // its way out: PostgreSQL's rollup upsert would touch one row twice and refuse the batch, for
      // ever; SQLite would add the two. Made storable before rows and rollups are built, they agree.
      const rows = [
        newClick({ flow_id: 'surrogates', os: 'Win\ud800' }),
        newClick({ flow_id: 'surrogates', os: 'Win\udc00' }),
      ];
      const res = await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows });
      assert.equal(res.rows, 2);
      const stored = await sql.all<{ os: string }>("SELECT os FROM clicks WHERE flow_id = 'surrogates'");
      assert.deepEqual(
        stored.map((r) => r.os),
        ['Win\ufffd', 'Win\ufffd'],
      );
      const hours = await sql.all<{ os: string; clicks: unknown }>(
        "SELECT os, clicks FROM report_hours WHERE flow_id = 'surrogates'",
      );
      assert.deepEqual(
        hours.map((h) => [h.os, toNum(h.clicks)]),
        [['Win\ufffd', 2]],
      );
      assert.equal(
        clickRecordOf(rows[0]!, 'n1').os,
        'Win\ufffd',
        'a buffered click shows as it will be stored',
      );
    });

    it('the hourly rollups of a varied batch are the sums hourRollups makes, in the same transaction', async () => {
      // PostgreSQL sums them in SQL, SQLite's writer in JavaScript: both must give hourRollups' rows.
      const outcomes = ['redirect', 'redirect', 'bot', 'no_match'] as const;
      const rows = Array.from({ length: 600 }, (_, i) => {
        const outcome = outcomes[i % 4]!;
        return newClick({
          flow_id: `sums${i % 3}`,
          stream_id: outcome === 'redirect' ? `s${i % 5}` : null,
          // Two UTC hours, the second's first click at its first millisecond.
          at: T0 + (i % 7 === 0 ? 3_600_000 : (i * 5_711) % 3_600_000),
          outcome,
          country: i % 6 === 0 ? null : ['US', 'DE', 'JP'][i % 3]!,
          device_type: i % 2 ? 'mobile' : 'desktop',
          os: i % 9 === 0 ? '' : `OS${i % 2}`,
          browser: `B${i % 4}`,
          language: i % 10 === 0 ? null : 'en',
          is_unique: i % 3 !== 0,
          is_bot: outcome === 'bot',
          cost: outcome === 'bot' ? 0 : [0.1, 0.000001, 2.5][i % 3]!,
        });
      });
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows });
      const KEY = ['hour', ...ROLLUP_COLUMNS];
      const stored = await sql.all<Record<string, unknown>>(
        `SELECT ${KEY.join(', ')}, clicks, uniques, bots, no_match, cost_micros FROM report_hours WHERE flow_id LIKE 'sums%'`,
      );
      const asText = (r: readonly unknown[]) =>
        JSON.stringify(r.map((v, i) => (i === 0 ? toIso(v) : i < KEY.length ? v : toNum(v))));
      const got = stored
        .map((r) => asText([...KEY, 'clicks', 'uniques', 'bots', 'no_match', 'cost_micros'].map((k) => r[k])))
        .sort();
      const want = hourRollups(rows).map(asText).sort();
      assert.ok(want.length > 50, `a varied batch (${want.length} rollup rows)`);
      assert.deepEqual(got, want);
    });

    it('the same batch applied twice is written once; a stored click id in another batch is kept, never an error', async () => {
      const rows = Array.from({ length: 50 }, () => newClick({ flow_id: 'twice' }));
      const batch = { id: newBatchId(), server_id: 'n1', rows };
      assert.deepEqual(await storage.clicks.insertBatch(batch), { applied: true, rows: 50 });
      assert.deepEqual(await storage.clicks.insertBatch(batch), { applied: false, rows: 0 });
      assert.equal(await countWhere('flow_id = ?', ['twice']), 50);
      const overlap = { id: newBatchId(), server_id: 'n2', rows: [rows[0]!, newClick({ flow_id: 'twice' })] };
      assert.deepEqual(await storage.clicks.insertBatch(overlap), { applied: true, rows: 1 });
      assert.equal(await countWhere('flow_id = ?', ['twice']), 51);
      assert.equal((await storage.clicks.get(rows[0]!.click_id))?.server_id, 'n1', 'the first write stands');
    });

    it('asks for larger batches only where they are written on the writer thread', async () => {
      assert.equal(
        storage.clicks.batchMaxRows,
        backend.label === 'sqlite (writer thread)' ? WRITER_CLICK_BATCH_MAX_ROWS : CLICK_BATCH_MAX_ROWS,
      );
      assert.ok(WRITER_CLICK_BATCH_MAX_ROWS > CLICK_BATCH_MAX_ROWS);
    });

    it('a batch is a fixed number of queries: 1 click and 10,000 clicks send the same count', async () => {
      const queriesFor = async (n: number) => {
        const rows = Array.from({ length: n }, () => newClick({ flow_id: 'trips' }));
        const before = storage.stats().queries;
        assert.equal((await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows })).rows, n);
        return storage.stats().queries - before;
      };
      const one = await queriesFor(1);
      const many = await queriesFor(10_000);
      assert.equal(many, one);
      assert.ok(one <= 5, `BEGIN, guard, insert, the hourly rollups, COMMIT; got ${one}`);
    });

    it('a refused batch writes nothing, guard row included, and goes through when sent again', async () => {
      const rows = Array.from({ length: 20 }, () => newClick({ flow_id: 'refused' }));
      const batch = { id: newBatchId(), server_id: null, rows };
      const victim = rows[13]!.click_id;
      await sql.script(
        backend.name === 'postgres'
          ? `CREATE FUNCTION refuse_click() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
             CREATE TRIGGER refuse_click BEFORE INSERT ON clicks FOR EACH ROW WHEN (NEW.click_id = '${victim}') EXECUTE FUNCTION refuse_click()`
          : `CREATE TRIGGER refuse_click BEFORE INSERT ON clicks WHEN NEW.click_id = '${victim}'
             BEGIN SELECT RAISE(ABORT, 'refused'); END`,
      );
      try {
        await assert.rejects(storage.clicks.insertBatch(batch));
      } finally {
        await sql.script(
          backend.name === 'postgres' ? 'DROP FUNCTION refuse_click() CASCADE' : 'DROP TRIGGER refuse_click',
        );
      }
      assert.equal(await countWhere('flow_id = ?', ['refused']), 0);
      assert.deepEqual(await storage.clicks.insertBatch(batch), { applied: true, rows: 20 });
    });

    it('lists newest first, keyset-paged through ties, with every filter, the same on both backends', async () => {
      // 3 flows × 2 streams, timestamps with many ties, ids whose bytewise order differs from a
      // locale's (upper case before lower, '-' before digits before '_').
      const ids = ['A-1', 'a_1', 'B0', 'b-0', 'Z_z', 'z-Z', '0_a', '9-b', '_x', '-y'];
      const rows: NewClick[] = [];
      for (let i = 0; i < 120; i++) {
        rows.push(
          newClick({
            click_id: `${ids[i % ids.length]}${Math.floor(i / ids.length)}`,
            flow_id: `lf${i % 3}`,
            stream_id: i % 7 === 0 ? null : `ls${i % 2}`,
            at: T0 + Math.floor(i / 4) * 1000,
            outcome: i % 7 === 0 ? 'no_match' : i % 11 === 0 ? 'bot' : 'redirect',
            is_bot: i % 11 === 0,
            country: i % 5 === 0 ? null : i % 2 ? 'US' : 'DE',
            subs: i % 4 === 0 ? null : [`camp${i % 5}`],
          }),
        );
      }
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
      const all = rows.map((r) => clickRecordOf(r, null)).sort(newestFirst);
      const iso = (ms: number) => new Date(ms).toISOString();
      const filters: [ClickFilter, (c: ClickRecord) => boolean][] = [
        [{ flow_id: 'lf1' }, (c) => c.flow_id === 'lf1'],
        [{ flow_id: 'lf2', stream_id: 'ls0' }, (c) => c.flow_id === 'lf2' && c.stream_id === 'ls0'],
        [{ flow_id: 'lf0', outcome: 'no_match' }, (c) => c.flow_id === 'lf0' && c.outcome === 'no_match'],
        [
          { flow_id: 'lf0', country: 'US', is_bot: false },
          (c) => c.flow_id === 'lf0' && c.country === 'US' && !c.is_bot,
        ],
        [{ flow_id: 'lf1', is_bot: true }, (c) => c.flow_id === 'lf1' && c.is_bot],
        [{ flow_id: 'lf2', sub1: 'camp1' }, (c) => c.flow_id === 'lf2' && c.sub1 === 'camp1'],
        [
          { flow_id: 'lf0', from: iso(T0 + 5000), to: iso(T0 + 20_000) },
          (c) => c.flow_id === 'lf0' && c.created_at >= iso(T0 + 5000) && c.created_at < iso(T0 + 20_000),
        ],
      ];
      for (const [filter, keep] of filters) {
        const expected = all.filter(keep);
        assert.ok(expected.length > 0, JSON.stringify(filter));
        for (const limit of [1, 3, 50]) {
          const got = await allPages(storage, filter, limit);
          assert.deepEqual(
            got.items.map((c) => c.click_id),
            expected.map((c) => c.click_id),
            `${JSON.stringify(filter)} limit ${limit}`,
          );
          assert.deepEqual(got.items, expected);
          assert.equal(got.total, expected.length);
          assert.equal(got.pages, Math.max(1, Math.ceil(expected.length / limit)));
        }
      }
    });

    it('the list by stream alone finds a stream’s clicks through its flow, and a deleted stream’s by time', async () => {
      const flow = await storage.flows.create(flowInput('by-stream'));
      const other = await storage.flows.create(flowInput('by-stream-2'));
      const stream = (flow_id: string, name: string) =>
        storage.streams.create(streamInput(flow_id, { name }));
      const [s1, s2, s3] = [
        await stream(flow.id, 'a'),
        await stream(flow.id, 'b'),
        await stream(other.id, 'c'),
      ];
      const streams = [s1.id, s2.id, s3.id, null];
      const rows = Array.from({ length: 40 }, (_, i) =>
        newClick({
          click_id: `bys-${String(i).padStart(3, '0')}`,
          flow_id: i % 4 === 2 ? other.id : flow.id,
          stream_id: streams[i % 4]!,
          at: T0 + 500_000 + i * 1000,
        }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
      const expect = (id: string) =>
        rows
          .filter((r) => r.stream_id === id)
          .map((r) => r.click_id)
          .reverse();
      for (const limit of [3, 50]) {
        const got = await allPages(storage, { stream_id: s1.id }, limit);
        assert.deepEqual(
          got.items.map((c) => c.click_id),
          expect(s1.id),
        );
        assert.equal(got.total, 10);
      }
      // Asked with another flow, nothing: the stream's flow does not widen an explicit flow filter.
      assert.equal(
        (await storage.clicks.list({ filter: { stream_id: s1.id, flow_id: other.id }, limit: 5 })).total,
        0,
      );
      // A stream deleted since: its clicks are still listed.
      await storage.streams.delete(s2.id);
      assert.deepEqual(
        (await allPages(storage, { stream_id: s2.id }, 4)).items.map((c) => c.click_id),
        expect(s2.id),
      );
    });

    it('no index of the click log leads with stream_id (migration 15: each would cost every click a page at scale)', async () => {
      const names =
        backend.name === 'sqlite'
          ? await sql.all<{ name: string }>(
              `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'clicks'`,
            )
          : await sql.all<{ name: string }>(
              `SELECT indexname AS name FROM pg_indexes WHERE tablename = 'clicks' AND schemaname = current_schema()`,
            );
      const got = names.map((r) => r.name).filter((n) => !n.includes('autoindex') && !n.endsWith('_pkey'));
      assert.deepEqual(got.sort(), ['clicks_created', 'clicks_flow', 'clicks_sub1']);
      if (backend.name === 'sqlite') {
        const plan = await sql.all<{ detail: string }>(
          `EXPLAIN QUERY PLAN SELECT click_id FROM clicks WHERE flow_id = ? AND stream_id = ?
           ORDER BY created_at DESC, click_id DESC LIMIT 5`,
          ['a-flow', 'a-stream'],
        );
        assert.match(plan.map((p) => p.detail).join('; '), /USING INDEX clicks_flow/);
      }
    });

    it('the total is counted up to the cap and says when there are more', async () => {
      const rows = Array.from({ length: LOG_TOTAL_CAP + 5 }, (_, i) =>
        newClick({ flow_id: 'cap', at: T0 + i }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
      const page = await storage.clicks.list({ filter: { flow_id: 'cap' }, limit: 2 });
      assert.equal(page.total, LOG_TOTAL_CAP);
      assert.equal(page.total_capped, true);
      assert.deepEqual(
        page.items.map((c) => c.click_id),
        [rows.at(-1)!.click_id, rows.at(-2)!.click_id],
      );
      const small = await storage.clicks.list({
        filter: { flow_id: 'cap', from: new Date(T0 + LOG_TOTAL_CAP).toISOString() },
        limit: 2,
      });
      assert.deepEqual([small.total, small.total_capped], [5, false]);
    });

    it('a bad cursor or time bound is validation.invalid_input before any query', async () => {
      const before = storage.stats().queries;
      await assert.rejects(
        storage.clicks.list({ filter: {}, limit: 5, cursor: 'bm9wZQ' }),
        isCode('validation.invalid_input'),
      );
      await assert.rejects(
        storage.clicks.list({ filter: { from: '2026-13-01T00:00:00.000Z' }, limit: 5 }),
        isCode('validation.invalid_input'),
      );
      await assert.rejects(
        storage.clicks.list({ filter: { to: 'yesterday' }, limit: 5 }),
        isCode('validation.invalid_input'),
      );
      assert.equal(storage.stats().queries, before);
    });

    it("another log's cursor (the audit log's) is validation.invalid_input on the click list, and back", async () => {
      // Both log lists page on (created_at desc, id) and an audit id fits the click id alphabet:
      // the audit log's cursor used to page the click list from a position in another table.
      for (const target_id of ['x1', 'x2']) {
        await storage.audit.append({
          operator: 'ada',
          action: 'flow.create',
          target_type: 'flow',
          target_id,
          request_id: 'req-1',
          server_id: 'node-a',
        });
      }
      const clicks = await storage.clicks.list({ filter: {}, limit: 1 });
      const audit = await storage.audit.list({ filter: {}, limit: 1 });
      assert.ok(clicks.next_cursor && audit.next_cursor);
      const before = storage.stats().queries;
      const anotherList = (err: unknown) =>
        isCode('validation.invalid_input')(err) &&
        /^\/cursor: not a next_cursor of this list/.test((err as Error).message);
      await assert.rejects(
        storage.clicks.list({ filter: {}, limit: 1, cursor: audit.next_cursor }),
        anotherList,
      );
      await assert.rejects(
        storage.audit.list({ filter: {}, limit: 1, cursor: clicks.next_cursor }),
        anotherList,
      );
      assert.equal(storage.stats().queries, before, 'refused before any query');
      const next = await storage.clicks.list({ filter: {}, limit: 1, cursor: clicks.next_cursor });
      assert.notEqual(next.items[0]?.click_id, clicks.items[0]?.click_id);
    });

    it('retention deletes older clicks in small chunks, letting the event loop run between them', async () => {
      const rows = Array.from({ length: 100 }, (_, i) =>
        newClick({ flow_id: 'old', at: T0 - 86_400_000 * 40 + i }),
      );
      const keep = Array.from({ length: 10 }, () => newClick({ flow_id: 'old', at: T0 }));
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows: [...rows, ...keep] });
      // Everything else in this database is newer than T0 - 30 days too.
      let ticks = 0;
      let ticking = true;
      const tick = () => {
        ticks++;
        if (ticking) setImmediate(tick);
      };
      setImmediate(tick);
      const before = new Date(T0 - 86_400_000 * 30).toISOString();
      const ac = new AbortController();
      const stopped = await storage.clicks.deleteOlderThan(before, { chunkRows: 30, signal: ac.signal });
      ticking = false;
      assert.equal(stopped, 100);
      assert.ok(ticks >= 3, `the loop ran between the four chunks (${ticks} ticks)`);
      assert.equal(await countWhere('flow_id = ?', ['old']), 10);
      assert.equal(await storage.clicks.deleteOlderThan(before), 0);
    });

    it('retention stops between chunks when its signal is aborted', async () => {
      const rows = Array.from({ length: 50 }, (_, i) =>
        newClick({ flow_id: 'abort', at: T0 - 86_400_000 * 50 + i }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
      const ac = new AbortController();
      const before = new Date(T0 - 86_400_000 * 45).toISOString();
      // Aborted while the first chunk runs: that chunk completes, no other starts.
      const run = storage.clicks.deleteOlderThan(before, { chunkRows: 10, signal: ac.signal });
      ac.abort();
      assert.equal(await run, 10);
      assert.equal(await countWhere('flow_id = ?', ['abort']), 40);
      assert.equal(await storage.clicks.deleteOlderThan(before, { chunkRows: 10 }), 40);
    });
  });
}
