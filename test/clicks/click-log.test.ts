import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { CLICK_BATCH_MAX_ATTEMPTS, ClickLog, OVERFLOW_REPORT_EVERY_MS } from '../../src/clicks/index.ts';
import { ApiError, hasCode } from '../../src/errors/index.ts';
import { ClickCounters } from '../../src/routing/index.ts';
import { type ClickBatch, type ClickStore, openPostgres, type Storage } from '../../src/storage/index.ts';
import { type SqlExecutor, toNum } from '../../src/storage/sql.ts';
import { ManualClock, systemClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { newClick } from '../helpers/records.ts';
import { TcpProxy } from '../helpers/tcp-proxy.ts';
import { BACKENDS, storeSuite } from '../storage/backends.ts';

const silent = pino({ level: 'silent' });

for (const backend of BACKENDS) {
  describe(`click log on ${backend.name}`, async () => {
    let storage: Storage;
    let sql: SqlExecutor;
    const { available, it } = await storeSuite(backend, {
      onOpen: (o) => {
        storage = o.storage;
        sql = o.sql();
      },
    });
    const stored = async (flow: string) =>
      toNum(
        (await sql.all<{ n: unknown }>('SELECT COUNT(*) AS n FROM clicks WHERE flow_id = ?', [flow]))[0]?.n,
      );
    const logOf = (
      store: Pick<ClickStore, 'insertBatch'>,
      over: { bufferMax?: number; batchMaxRows?: number; clock?: ManualClock } = {},
    ) =>
      new ClickLog({
        store,
        logger: silent,
        serverId: 'node-1',
        bufferMax: over.bufferMax ?? 1000,
        batchMaxRows: over.batchMaxRows ?? 10,
        flushIntervalMs: 0,
        ...(over.clock ? { clock: over.clock } : {}),
      });

    it("without batchMaxRows of its own the log cuts batches of the store's size", async () => {
      const sizes: number[] = [];
      const log = new ClickLog({
        store: {
          batchMaxRows: 7,
          insertBatch: (b) => {
            sizes.push(b.rows.length);
            return storage.clicks.insertBatch(b);
          },
        },
        logger: silent,
        serverId: 'node-1',
        bufferMax: 1000,
        flushIntervalMs: 0,
      });
      for (let i = 0; i < 20; i++) log.append(newClick({ flow_id: 'store-size' }));
      assert.equal(await log.persist(), 20);
      assert.deepEqual(sizes, [7, 7, 6]);
      assert.equal(await stored('store-size'), 20);
    });

    it('a flush writes every buffered click, cut into batches of at most batchMaxRows as they fill', async () => {
      const ids: string[] = [];
      const log = logOf({
        insertBatch: (b) => {
          ids.push(b.id);
          return storage.clicks.insertBatch(b);
        },
      });
      for (let i = 0; i < 25; i++) assert.equal(log.append(newClick({ flow_id: 'cut' })), true);
      // Two full batches cut as they filled (each with the counts of exactly its clicks), five buffered.
      assert.deepEqual([log.stats().buffered, log.stats().unacked], [5, 20]);
      assert.equal(await log.persist(), 25);
      assert.equal(ids.length, 3);
      assert.equal(new Set(ids).size, 3);
      assert.equal(await stored('cut'), 25);
      assert.deepEqual(log.stats(), {
        buffered: 0,
        unacked: 0,
        buffer_max: 1000,
        persisted: 25,
        dropped: 0,
        failed_flushes: 0,
        last_error: null,
        failing_since: null,
        // No uniqueness table given (a node gives its own): zeros, one shape either way.
        uniqueness: { entries: 0, max_entries: 0, early_evictions: 0 },
      });
      assert.equal(await log.persist(), 0, 'nothing left');
      assert.equal(ids.length, 3);
      const row = await storage.clicks.get(
        (await storage.clicks.list({ filter: { flow_id: 'cut' }, limit: 1 })).items[0]!.click_id,
      );
      assert.equal(row?.server_id, 'node-1');
    });

    it('a batch whose commit went through but whose answer was lost is sent again with its id and written once', async () => {
      const sent: ClickBatch[] = [];
      let loseNext = true;
      const log = logOf({
        insertBatch: async (b) => {
          sent.push(b);
          const r = await storage.clicks.insertBatch(b);
          if (loseNext) {
            loseNext = false;
            throw new Error('connection lost after COMMIT');
          }
          return r;
        },
      });
      for (let i = 0; i < 8; i++) log.append(newClick({ flow_id: 'lost' }));
      await assert.rejects(log.persist(), /connection lost/);
      assert.equal(await stored('lost'), 8, 'the commit went through');
      assert.deepEqual([log.stats().unacked, log.stats().persisted], [8, 0]);
      for (let i = 0; i < 3; i++) log.append(newClick({ flow_id: 'lost' }));
      assert.equal(await log.persist(), 11);
      assert.equal(sent.length, 3);
      assert.equal(sent[1]!.id, sent[0]!.id, 'the retry sends the same batch id');
      assert.equal(sent[1]!.rows, sent[0]!.rows);
      assert.notEqual(sent[2]!.id, sent[0]!.id, 'what came meanwhile is a new batch');
      assert.equal(await stored('lost'), 11, 'no click written twice');
      assert.equal(log.stats().persisted, 11);
    });

    it('a flush that fails, then succeeds, writes each click once', async () => {
      let failures = 2;
      const clock = new ManualClock(Date.UTC(2026, 10, 27, 7, 0, 0));
      const log = logOf(
        {
          insertBatch: async (b) => {
            if (failures-- > 0) throw new Error('deadlock detected');
            return storage.clicks.insertBatch(b);
          },
        },
        { clock },
      );
      for (let i = 0; i < 5; i++) log.append(newClick({ flow_id: 'retry' }));
      assert.equal(await log.flush(), 0, 'flush logs, never throws');
      clock.advance(1000);
      assert.equal(await log.flush(), 0);
      assert.equal(log.stats().failed_flushes, 2);
      assert.equal(log.stats().last_error, 'Error: deadlock detected');
      assert.equal(
        log.stats().failing_since,
        '2026-11-27T07:00:00.000Z',
        'from the first failure of the run',
      );
      assert.equal(await log.flush(), 5);
      assert.equal(await stored('retry'), 5);
      assert.equal(log.stats().last_error, 'Error: deadlock detected', 'the last error stays');
      assert.equal(log.stats().failing_since, null, 'failing no more');
    });

    it('a batch the database refuses every time is given up after its attempts and counted as dropped', async () => {
      const victim = newClick({ flow_id: 'poison' });
      await sql.script(
        backend.name === 'postgres'
          ? `CREATE FUNCTION refuse_click() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
             CREATE TRIGGER refuse_click BEFORE INSERT ON clicks FOR EACH ROW WHEN (NEW.click_id = '${victim.click_id}') EXECUTE FUNCTION refuse_click()`
          : `CREATE TRIGGER refuse_click BEFORE INSERT ON clicks WHEN NEW.click_id = '${victim.click_id}'
             BEGIN SELECT RAISE(ABORT, 'refused'); END`,
      );
      const log = logOf(storage.clicks, { batchMaxRows: 4 });
      try {
        log.append(newClick({ flow_id: 'poison' }));
        log.append(victim);
        for (let i = 0; i < 6; i++) log.append(newClick({ flow_id: 'poison' }));
        for (let i = 1; i < CLICK_BATCH_MAX_ATTEMPTS; i++) {
          await assert.rejects(log.persist());
          assert.equal(log.stats().unacked, 8, `attempt ${i}: everything kept`);
          assert.notEqual(log.stats().failing_since, null, `attempt ${i}: failing`);
        }
        // The last attempt gives the poisoned batch up and goes on with the next one.
        assert.equal(await log.persist(), 4);
      } finally {
        await sql.script(
          backend.name === 'postgres' ? 'DROP FUNCTION refuse_click() CASCADE' : 'DROP TRIGGER refuse_click',
        );
      }
      assert.equal(await stored('poison'), 4);
      assert.deepEqual([log.stats().dropped, log.stats().persisted, log.stats().unacked], [4, 4, 0]);
      assert.equal(log.stats().failing_since, null, 'nothing left failing: the drop is what is shown');
    });

    // SQLite's read-only refusal is classified in test/storage/sqlite-executor.test.ts: its click
    // batches go through the writer thread's own connection, which a test cannot make read-only.
    for (const errcode of ['disk_full', 'serialization_failure', 'read_only_sql_transaction'])
      test(`a database that refuses every write for a while (${errcode}) loses no batch, however many attempts`, {
        skip: backend.name !== 'postgres' ? 'PostgreSQL only' : !available && 'postgres unavailable',
      }, async () => {
        await sql.script(
          `CREATE FUNCTION refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'full' USING ERRCODE = '${errcode}'; END $$;
         CREATE TRIGGER refuse_all BEFORE INSERT ON clicks FOR EACH ROW EXECUTE FUNCTION refuse_all()`,
        );
        const log = logOf(storage.clicks, { batchMaxRows: 4 });
        try {
          for (let i = 0; i < 6; i++) log.append(newClick({ flow_id: `refusing-${errcode}` }));
          for (let i = 0; i < CLICK_BATCH_MAX_ATTEMPTS + 3; i++) {
            await assert.rejects(log.persist(), (err: unknown) => hasCode(err, 'db.unavailable'));
            assert.deepEqual(
              [log.stats().unacked, log.stats().dropped],
              [6, 0],
              `attempt ${i + 1}: all kept`,
            );
            // The database's own words, not only "unavailable".
            assert.match(log.stats().last_error ?? '', /db\.unavailable.*caused by: .*full/);
          }
        } finally {
          await sql.script('DROP FUNCTION refuse_all() CASCADE');
        }
        assert.equal(await log.persist(), 6);
        assert.equal(await stored(`refusing-${errcode}`), 6);
        assert.deepEqual([log.stats().dropped, log.stats().failing_since], [0, null]);
      });

    it('the buffer is bounded: past buffer_max a click is dropped and counted, unacknowledged batches included', async () => {
      let down = true;
      const log = logOf(
        {
          insertBatch: async (b) => {
            if (down) throw new Error('refused');
            return storage.clicks.insertBatch(b);
          },
        },
        { bufferMax: 10 },
      );
      for (let i = 0; i < 7; i++) assert.equal(log.append(newClick({ flow_id: 'bounded' })), true);
      await log.flush(); // cut into batches that fail: they still count against the bound
      assert.equal(log.stats().unacked, 7);
      const taken = Array.from({ length: 6 }, () => log.append(newClick({ flow_id: 'bounded' })));
      assert.deepEqual(taken, [true, true, true, false, false, false]);
      assert.deepEqual([log.stats().buffered, log.stats().dropped], [3, 3]);
      down = false;
      assert.equal(await log.persist(), 10);
      assert.equal(await stored('bounded'), 10);
      assert.equal(log.append(newClick({ flow_id: 'bounded' })), true, 'room again once written');
    });

    it('a full buffer tells the log: at the first flush after a drop, at most every 10 s while drops go on, and at the stop', async () => {
      const capture = new LogCapture();
      const clock = new ManualClock();
      let down = true;
      const log = new ClickLog({
        store: {
          insertBatch: async (b) => {
            if (down) throw new ApiError('db.unavailable');
            return storage.clicks.insertBatch(b);
          },
        },
        logger: pino({}, capture),
        serverId: 'node-1',
        bufferMax: 20,
        batchMaxRows: 10,
        flushIntervalMs: 0,
        clock,
      });
      const told = () =>
        capture.lines
          .filter((l) => String(l.msg).startsWith('click log buffer full'))
          .map((l) => [l.dropped, l.dropped_total]);
      const drop = (n: number) => {
        for (let i = 0; i < n; i++) assert.equal(log.append(newClick({ flow_id: 'overflow' })), false);
      };
      for (let i = 0; i < 20; i++) assert.equal(log.append(newClick({ flow_id: 'overflow' })), true);
      drop(5);
      assert.deepEqual(told(), [], 'the hot path writes no log');
      await log.flush();
      assert.deepEqual(told(), [[5, 5]]);
      drop(3);
      clock.advance(OVERFLOW_REPORT_EVERY_MS - 1);
      await log.flush();
      assert.deepEqual(told(), [[5, 5]], 'not again within the interval');
      clock.advance(1);
      await log.flush();
      assert.deepEqual(told(), [
        [5, 5],
        [3, 8],
      ]);
      await log.flush();
      assert.equal(told().length, 2, 'nothing new, nothing said');
      drop(2);
      down = false;
      assert.deepEqual(await log.stop(), { persisted: 20, lost: 0 });
      assert.deepEqual(told().at(-1), [2, 10], 'the stop tells what is left untold');
      assert.equal(await stored('overflow'), 20);
    });

    it('a postback can find a click still held in memory, as it will be stored', async () => {
      const log = logOf(storage.clicks);
      const c = newClick({ flow_id: 'find', subs: ['x'] });
      log.append(c);
      const held = log.find(c.click_id);
      assert.equal(held?.sub1, 'x');
      assert.equal(log.find('nope'), undefined);
      await log.persist();
      assert.equal(log.find(c.click_id), undefined);
      assert.deepEqual(await storage.clicks.get(c.click_id), held);
    });

    it('stop writes everything held, then takes no more clicks (counted as dropped)', async () => {
      const log = logOf(storage.clicks, { batchMaxRows: 100 });
      for (let i = 0; i < 250; i++) log.append(newClick({ flow_id: 'stop' }));
      assert.deepEqual(await log.stop(), { persisted: 250, lost: 0 });
      assert.equal(await stored('stop'), 250);
      assert.equal(log.append(newClick({ flow_id: 'stop' })), false);
      assert.equal(log.stats().dropped, 1);
    });
  });
}

test('a stop that cannot reach the database within its timeout counts what it loses as dropped', async () => {
  const log = new ClickLog({
    store: {
      insertBatch: async () => {
        throw new ApiError('db.unavailable');
      },
    },
    logger: silent,
    serverId: null,
    bufferMax: 100,
    flushIntervalMs: 0,
  });
  for (let i = 0; i < 12; i++) log.append(newClick());
  assert.deepEqual(await log.stop(0), { persisted: 0, lost: 12 });
  assert.deepEqual([log.stats().dropped, log.stats().buffered, log.stats().unacked], [12, 0, 0]);
});

describe('click log while PostgreSQL is unreachable', async () => {
  const available = await pgAvailable();
  test('retries the same batches until the database is back, then writes every click once', {
    skip: !available && 'postgres unavailable',
  }, async () => {
    const schema = testSchema();
    const url = new URL(PG_URL);
    const proxy = new TcpProxy(url.hostname, Number(url.port || 5432));
    const port = await proxy.start();
    url.host = `127.0.0.1:${port}`;
    const storage = openPostgres({
      url: url.toString(),
      poolMax: 2,
      schema,
      clock: systemClock,
      queryTimeoutMs: 5000,
    });
    try {
      await storage.migrate();
      const sent: string[] = [];
      const log = new ClickLog({
        store: {
          insertBatch: (b) => {
            sent.push(b.id);
            return storage.clicks.insertBatch(b);
          },
        },
        logger: silent,
        serverId: 'n',
        bufferMax: 1000,
        batchMaxRows: 50,
        flushIntervalMs: 0,
      });
      for (let i = 0; i < 120; i++) log.append(newClick({ flow_id: 'outage' }));
      await proxy.down();
      await assert.rejects(
        log.persist(),
        (err: unknown) => (err as { code?: string }).code === 'db.unavailable',
      );
      for (let i = 0; i < 30; i++) log.append(newClick({ flow_id: 'outage' }));
      for (let i = 0; i < CLICK_BATCH_MAX_ATTEMPTS + 2; i++) await log.flush();
      assert.equal(log.stats().dropped, 0, 'an unavailable database is retried, never given up');
      assert.equal(
        log.stats().unacked,
        150,
        'the batches cut before the outage kept as they were, and one more',
      );
      assert.equal(log.stats().buffered, 0);
      await proxy.up();
      assert.equal(await log.persist(), 150);
      assert.equal(
        new Set(sent).size,
        3,
        '3 batches cut before the outage, the first sent again and again; the last, never sent, took the 30 after',
      );
      assert.equal((await storage.clicks.list({ filter: { flow_id: 'outage' }, limit: 1 })).total, 150);
    } finally {
      await storage.close();
      await proxy.down();
      await dropSchema(schema);
    }
  });
});

test('each batch carries the counts of exactly its clicks, cut in the same turn, full ones as they fill', async () => {
  const counters = new ClickCounters();
  const sent: ClickBatch[] = [];
  const log = new ClickLog({
    store: {
      insertBatch: async (b) => {
        sent.push(b);
        return { applied: true, rows: b.rows.length };
      },
    },
    logger: silent,
    serverId: 'node-1',
    bufferMax: 1000,
    batchMaxRows: 10,
    flushIntervalMs: 0,
    counts: counters,
  });
  // As /go does: count, then append.
  for (let i = 0; i < 25; i++) {
    counters.hit('f1', `s${i % 2}`, 1000 + i);
    log.append(newClick({ flow_id: 'f1', stream_id: `s${i % 2}` }));
  }
  assert.equal(await log.persist(), 25);
  assert.deepEqual(
    sent.map((b) => [b.rows.length, b.counts?.flows.map((f) => f[1])]),
    [
      [10, [10]],
      [10, [10]],
      [5, [5]],
    ],
  );
  assert.equal(counters.pending, false, 'every cut acknowledged with its batch');
});

// Every flush cut a batch of its own; behind a head that kept failing (the database down) an
// outage of hours at a few clicks a flush piled up thousands of batches, each one's counts read by
// every capped stream's check of every click, each one written as a transaction of its own once
// the database was back (review-30).
test('while the head batch keeps failing, later cuts join the last batch not sent yet, clicks and counts together', async () => {
  const counters = new ClickCounters();
  const sent: ClickBatch[] = [];
  let down = true;
  const log = new ClickLog({
    store: {
      insertBatch: async (b) => {
        if (down) throw new ApiError('db.unavailable');
        sent.push(b);
        return { applied: true, rows: b.rows.length };
      },
    },
    logger: silent,
    serverId: 'node-1',
    bufferMax: 1000,
    batchMaxRows: 10,
    flushIntervalMs: 0,
    counts: counters,
  });
  for (let i = 0; i < 25; i++) {
    counters.hit('f1', 's1', 1000 + i);
    counters.dayHit('s1', '2026-11-29');
    log.append(newClick({ flow_id: 'f1', stream_id: 's1' }));
    await log.flush();
  }
  assert.equal(counters.pendingDay('s1', '2026-11-29'), 25, 'every click still pending for the caps');
  down = false;
  assert.equal(await log.persist(), 25);
  // The first cut was sent (and failed) at once; the others joined a batch of ten at most.
  assert.deepEqual(
    sent.map((b) => [b.rows.length, b.counts?.flows.map((f) => f[1]), b.counts?.days.map((d) => d[2])]),
    [
      [1, [1], [1]],
      [10, [10], [10]],
      [10, [10], [10]],
      [4, [4], [4]],
    ],
  );
  assert.equal(new Set(sent.map((b) => b.id)).size, 4);
  assert.equal(counters.pending, false);
  assert.equal(counters.pendingDay('s1', '2026-11-29'), 0);
});
