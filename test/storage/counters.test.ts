import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { pino } from 'pino';
import { CLICK_BATCH_MAX_ATTEMPTS, ClickLog } from '../../src/clicks/index.ts';
import { ClickCounters } from '../../src/routing/index.ts';
import { BatchStatement } from '../../src/storage/batch.ts';
import {
  APPLIED_BATCH_RETENTION_MS,
  type CounterBatch,
  newBatchId,
  type Storage,
} from '../../src/storage/index.ts';
import { type SqlExecutor, toIso, toNum } from '../../src/storage/sql.ts';
import { ManualClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';
import { BATCH_BACKENDS, type Opened, storeSuite } from './backends.ts';

const CREATED = '2026-01-01T00:00:00.000Z';

// Seeding through the batch mechanism itself (its INSERT form): the repositories' one-row
// creates would take tens of seconds for 10,000 streams.
const SEED_FLOWS = new BatchStatement({
  columns: ['text', 'timestamptz'],
  sqlite: `INSERT INTO traffic_flows (id, slug, name, status, rotation, created_at, updated_at)
    VALUES (?1, ?1, 'seeded', 'active', 'position', ?2, ?2)`,
  postgres: `INSERT INTO traffic_flows (id, slug, name, status, rotation, created_at, updated_at)
    SELECT r.id, r.id, 'seeded', 'active', 'position', r.at, r.at FROM {rows} AS r (id, at)`,
});
const SEED_STREAMS = new BatchStatement({
  columns: ['text', 'text', 'integer', 'timestamptz'],
  sqlite: `INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url,
      redirect_code, created_at, updated_at)
    VALUES (?1, ?2, 's', 'regular', ?3, 100, 'active', '{}', 'https://example.com/', 302, ?4, ?4)`,
  postgres: `INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url,
      redirect_code, created_at, updated_at)
    SELECT r.id, r.flow_id, 's', 'regular', r.position, 100, 'active', '{}', 'https://example.com/', 302, r.at, r.at
    FROM {rows} AS r (id, flow_id, position, at)`,
});

interface Seeded {
  flows: string[];
  streams: { id: string; flow: string }[];
}

/** `flows` flows of `perFlow` streams each, ids prefixed so that one database holds several seeds. */
async function seed(sql: SqlExecutor, prefix: string, flows: number, perFlow: number): Promise<Seeded> {
  const out: Seeded = { flows: [], streams: [] };
  for (let f = 0; f < flows; f++) {
    const flow = `${prefix}-flow-${String(f).padStart(5, '0')}`;
    out.flows.push(flow);
    for (let s = 0; s < perFlow; s++) out.streams.push({ id: `${flow}-s${s}`, flow });
  }
  await sql.transaction(async (tx) => {
    await tx.batch(
      SEED_FLOWS,
      out.flows.map((id) => [id, CREATED]),
    );
    await tx.batch(
      SEED_STREAMS,
      out.streams.map((s, i) => [s.id, s.flow, i % perFlow, CREATED]),
    );
  });
  return out;
}

const at = (second: number) => new Date(Date.UTC(2026, 0, 2, 0, 0, second)).toISOString();

/** Per id, what the database holds. */
async function persisted(sql: SqlExecutor, prefix: string) {
  const streams = new Map<string, { hits: number; last: string | null }>();
  for (const r of await sql.all<{ id: string; hits: unknown; last_hit_at: unknown }>(
    'SELECT id, hits, last_hit_at FROM streams WHERE id LIKE ?',
    [`${prefix}-%`],
  )) {
    streams.set(r.id, { hits: toNum(r.hits), last: toIso(r.last_hit_at) });
  }
  const flows = new Map<string, { clicks: number; no_match: number; last: string | null }>();
  for (const r of await sql.all<{ id: string; clicks: unknown; no_match: unknown; last_click_at: unknown }>(
    'SELECT id, clicks, no_match, last_click_at FROM traffic_flows WHERE id LIKE ?',
    [`${prefix}-%`],
  )) {
    flows.set(r.id, { clicks: toNum(r.clicks), no_match: toNum(r.no_match), last: toIso(r.last_click_at) });
  }
  return { streams, flows };
}

const silent = pino({ level: 'silent' });

for (const backend of BATCH_BACKENDS) {
  describe(`counter batches on ${backend.label}`, async () => {
    let opened: Opened;
    let storage: Storage;
    let sql: SqlExecutor;
    const { it } = await storeSuite(backend, {
      onOpen: (o) => {
        opened = o;
        storage = o.storage;
        sql = o.sql();
      },
    });

    it('a flush of 10,000 touched streams across 1,000 flows persists every count exactly', async () => {
      const { flows, streams } = await seed(sql, 'big', 1000, 10);
      const expected = {
        streams: new Map(streams.map((s) => [s.id, { hits: 0, last: null as string | null }])),
        flows: new Map(flows.map((id) => [id, { clicks: 0, no_match: 0, last: null as string | null }])),
      };
      // Two flushes: the second adds to the first, and its older timestamps on odd rows lose.
      for (const round of [0, 1]) {
        const batch: CounterBatch = { id: newBatchId(), streams: [], flows: [] };
        streams.forEach((s, i) => {
          const hits = ((i * 7 + round) % 97) + 1;
          const last = at(round === 0 ? i % 50 : i % 2 ? 0 : 55);
          batch.streams.push({ id: s.id, hits, last_hit_at: last });
          const e = expected.streams.get(s.id)!;
          e.hits += hits;
          if (e.last === null || last > e.last) e.last = last;
        });
        flows.forEach((id, i) => {
          const clicks = ((i * 13 + round) % 89) + 1;
          const noMatch = (i + round) % 5;
          const last = at(round === 0 ? i % 40 : i % 2 ? 0 : 56);
          batch.flows.push({ id, clicks, no_match: noMatch, last_click_at: last });
          const e = expected.flows.get(id)!;
          e.clicks += clicks;
          e.no_match += noMatch;
          if (e.last === null || last > e.last) e.last = last;
        });
        await storage.addCounters(batch);
      }
      assert.deepEqual(await persisted(sql, 'big'), expected);
    });

    it('a batch mixing existing and deleted ids adds to the existing rows and drops the rest', async () => {
      const { flows, streams } = await seed(sql, 'mixed', 2, 2);
      const [keptFlow, goneFlow] = flows as [string, string];
      const [kept, goneStream] = [streams[0]!, streams[1]!];
      assert.ok(await storage.streams.delete(goneStream.id));
      assert.ok(await storage.flows.delete(goneFlow)); // takes its two streams with it
      const batch: CounterBatch = {
        id: newBatchId(),
        streams: [...streams.map((s) => s.id), 'mixed-never-existed'].map((id) => ({
          id,
          hits: 5,
          last_hit_at: at(1),
        })),
        flows: [...flows, 'mixed-never-existed'].map((id) => ({
          id,
          clicks: 5,
          no_match: 1,
          last_click_at: at(1),
        })),
      };
      await storage.addCounters(batch);
      const got = await persisted(sql, 'mixed');
      assert.deepEqual([...got.streams], [[kept.id, { hits: 5, last: at(1) }]], 'nothing resurrected');
      assert.deepEqual([...got.flows], [[keptFlow, { clicks: 5, no_match: 1, last: at(1) }]]);
    });

    it('the same id twice in one batch adds both deltas', async () => {
      const { flows, streams } = await seed(sql, 'twice', 1, 1);
      await storage.addCounters({
        id: newBatchId(),
        streams: [
          { id: streams[0]!.id, hits: 2, last_hit_at: at(9) },
          { id: streams[0]!.id, hits: 3, last_hit_at: at(4) },
        ],
        flows: [
          { id: flows[0]!, clicks: 2, no_match: 0, last_click_at: at(4) },
          { id: flows[0]!, clicks: 3, no_match: 1, last_click_at: at(9) },
        ],
      });
      const got = await persisted(sql, 'twice');
      assert.deepEqual(got.streams.get(streams[0]!.id), { hits: 5, last: at(9) });
      assert.deepEqual(got.flows.get(flows[0]!), { clicks: 5, no_match: 1, last: at(9) });
    });

    it('a flush is a fixed number of queries: 1 row and 5,000 rows send the same count', async () => {
      const { flows, streams } = await seed(sql, 'trips', 500, 10);
      const queriesFor = async (n: number) => {
        const batch: CounterBatch = {
          id: newBatchId(),
          streams: streams.slice(0, n).map((s) => ({ id: s.id, hits: 1, last_hit_at: at(2) })),
          flows: flows
            .slice(0, Math.ceil(n / 10))
            .map((id) => ({ id, clicks: 1, no_match: 0, last_click_at: at(2) })),
        };
        const before = storage.stats().queries;
        await storage.addCounters(batch);
        return storage.stats().queries - before;
      };
      const one = await queriesFor(1);
      const many = await queriesFor(5000);
      assert.equal(many, one, `1 row: ${one} queries, 5,000 rows: ${many}`);
      assert.ok(one <= 5, `BEGIN, guard, streams, flows, COMMIT; got ${one}`);
      const got = await persisted(sql, 'trips');
      assert.equal(got.streams.get(streams[0]!.id)?.hits, 2);
      assert.equal(got.streams.get(streams[4999]!.id)?.hits, 1);
    });

    it('concurrent overlapping flushes of different sizes from two nodes sum exactly', async () => {
      const { flows, streams } = await seed(sql, 'race', 300, 10);
      // Two connections stand for two nodes on PostgreSQL; SQLite is one node per file. A large
      // batch and small ones over the same rows get different plans: without locking in one order
      // they could deadlock.
      const other = backend.name === 'postgres' ? opened.reopen() : storage;
      const batchOf = (from: number, to: number): CounterBatch => ({
        id: newBatchId(),
        streams: streams.slice(from, to).map((s) => ({ id: s.id, hits: 1, last_hit_at: at(3) })),
        flows: flows
          .slice(from / 10, to / 10)
          .map((id) => ({ id, clicks: 1, no_match: 0, last_click_at: at(3) })),
      });
      try {
        await Promise.all([
          ...Array.from({ length: 4 }, () => storage.addCounters(batchOf(0, 3000))),
          ...Array.from({ length: 4 }, (_, i) => other.addCounters(batchOf(i * 700, i * 700 + 40))),
          ...Array.from({ length: 4 }, () => other.addCounters(batchOf(1000, 3000))),
        ]);
      } finally {
        if (other !== storage) await other.close();
      }
      const got = await persisted(sql, 'race');
      streams.forEach((s, i) => {
        const small = [0, 700, 1400, 2100].filter((b) => i >= b && i < b + 40).length;
        assert.equal(got.streams.get(s.id)?.hits, 4 + small + (i >= 1000 ? 4 : 0), s.id);
      });
    });

    it('the same batch applied twice counts once; the second send reports it was applied before', async () => {
      const { flows, streams } = await seed(sql, 'again', 1, 2);
      const batch: CounterBatch = {
        id: newBatchId(),
        streams: streams.map((s) => ({ id: s.id, hits: 3, last_hit_at: at(5) })),
        flows: [{ id: flows[0]!, clicks: 6, no_match: 1, last_click_at: at(5) }],
      };
      assert.equal(await storage.addCounters(batch), true);
      assert.equal(await storage.addCounters(batch), false);
      assert.equal(await storage.addCounters(structuredClone(batch)), false, 'a copy with the same id too');
      const got = await persisted(sql, 'again');
      assert.deepEqual(
        [...got.streams.values()].map((s) => s.hits),
        [3, 3],
      );
      assert.deepEqual(got.flows.get(flows[0]!), { clicks: 6, no_match: 1, last: at(5) });
      // A different id with the same rows is another batch, and adds.
      assert.equal(await storage.addCounters({ ...batch, id: newBatchId() }), true);
      assert.deepEqual(
        [...(await persisted(sql, 'again')).streams.values()].map((s) => s.hits),
        [6, 6],
      );
    });

    /** A click log that writes counts with clicks, as a node's does, through `store`. */
    const logOf = (counters: ClickCounters, store: Pick<Storage['clicks'], 'insertBatch'> = storage.clicks) =>
      new ClickLog({
        store,
        logger: silent,
        serverId: null,
        bufferMax: 10_000,
        flushIntervalMs: 0,
        counts: counters,
      });

    it('a batch whose commit went through but whose answer was lost, then retried, counts once', async () => {
      const { flows, streams } = await seed(sql, 'lostack', 1, 1);
      const counters = new ClickCounters();
      const now = Date.UTC(2026, 0, 3);
      for (let i = 0; i < 4; i++) counters.hit(flows[0]!, streams[0]!.id, now);
      const answers: boolean[] = [];
      let lose = true;
      // The commit succeeds; the acknowledgement is lost on the way back (a connection cut after COMMIT).
      const log = logOf(counters, {
        insertBatch: async (b) => {
          const r = await storage.clicks.insertBatch(b);
          answers.push(r.applied);
          if (lose) {
            lose = false;
            throw new Error('connection lost after COMMIT');
          }
          return r;
        },
      });
      await assert.rejects(log.persist(), /connection lost/);
      counters.hit(flows[0]!, streams[0]!.id, now + 1000);
      await log.persist();
      assert.deepEqual(
        answers,
        [true, false, true],
        'applied; the retry found it applied; the new batch applied',
      );
      const got = await persisted(sql, 'lostack');
      assert.equal(got.streams.get(streams[0]!.id)?.hits, 5, 'four hits once, and the one counted since');
      assert.equal(got.flows.get(flows[0]!)?.clicks, 5);
      assert.equal(counters.pending, false);
    });

    it('a batch that fails, then succeeds, counts once', async () => {
      const { flows, streams } = await seed(sql, 'failok', 1, 1);
      const counters = new ClickCounters();
      for (let i = 0; i < 3; i++) counters.hit(flows[0]!, streams[0]!.id, Date.UTC(2026, 0, 3));
      const log = logOf(counters);
      await sql.script(refuse('streams', streams[0]!.id));
      try {
        await assert.rejects(log.persist());
        await assert.rejects(log.persist());
      } finally {
        await allow();
      }
      assert.equal((await persisted(sql, 'failok')).streams.get(streams[0]!.id)?.hits, 0);
      await log.persist();
      const got = await persisted(sql, 'failok');
      assert.equal(got.streams.get(streams[0]!.id)?.hits, 3);
      assert.equal(got.flows.get(flows[0]!)?.clicks, 3);
    });

    it('counts of clicks a full buffer dropped are written with the next batch: hits stay the clicks answered', async () => {
      const { flows, streams } = await seed(sql, 'overflow', 1, 1);
      const counters = new ClickCounters();
      const log = new ClickLog({
        store: storage.clicks,
        logger: silent,
        serverId: null,
        bufferMax: 3,
        flushIntervalMs: 0,
        counts: counters,
      });
      const now = Date.UTC(2026, 0, 3);
      const kept: boolean[] = [];
      for (let i = 0; i < 5; i++) {
        counters.hit(flows[0]!, streams[0]!.id, now);
        kept.push(
          log.append(newClick({ click_id: `overflow-${i}`, flow_id: flows[0]!, stream_id: streams[0]!.id })),
        );
      }
      assert.deepEqual(kept, [true, true, true, false, false]);
      assert.equal(await log.persist(), 3);
      const got = await persisted(sql, 'overflow');
      assert.equal(got.streams.get(streams[0]!.id)?.hits, 5);
      assert.equal(got.flows.get(flows[0]!)?.clicks, 5);
      assert.equal(log.stats().dropped, 2, 'the rows the reports miss, counted');
    });

    it('a batch refused on every attempt gives its clicks up, not their counts', async () => {
      const { flows, streams } = await seed(sql, 'givenup', 1, 1);
      const counters = new ClickCounters();
      const log = logOf(counters);
      for (let i = 0; i < 4; i++) {
        counters.hit(flows[0]!, streams[0]!.id, Date.UTC(2026, 0, 3));
        log.append(newClick({ click_id: `givenup-${i}`, flow_id: flows[0]!, stream_id: streams[0]!.id }));
      }
      await sql.script(
        backend.name === 'postgres'
          ? `CREATE FUNCTION refuse_clicks() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
             CREATE TRIGGER refuse_clicks BEFORE INSERT ON clicks FOR EACH ROW EXECUTE FUNCTION refuse_clicks()`
          : `CREATE TRIGGER refuse_clicks BEFORE INSERT ON clicks BEGIN SELECT RAISE(ABORT, 'refused'); END`,
      );
      try {
        for (let i = 1; i < CLICK_BATCH_MAX_ATTEMPTS; i++) await assert.rejects(log.persist());
        // The tenth refusal gives the clicks up; their counts go alone, and are taken.
        assert.equal(await log.persist(), 0);
      } finally {
        await sql.script(
          backend.name === 'postgres'
            ? 'DROP FUNCTION refuse_clicks() CASCADE'
            : 'DROP TRIGGER refuse_clicks',
        );
      }
      const got = await persisted(sql, 'givenup');
      assert.equal(got.streams.get(streams[0]!.id)?.hits, 4);
      assert.equal(got.flows.get(flows[0]!)?.clicks, 4);
      assert.equal(counters.pending, false);
      assert.equal(log.stats().dropped, 4);
    });

    it('one batch sent by two connections at once is applied by one of them', async () => {
      const { flows, streams } = await seed(sql, 'dup', 1, 1);
      const other = backend.name === 'postgres' ? opened.reopen() : storage;
      const batch: CounterBatch = {
        id: newBatchId(),
        streams: [{ id: streams[0]!.id, hits: 7, last_hit_at: at(1) }],
        flows: [{ id: flows[0]!, clicks: 7, no_match: 0, last_click_at: at(1) }],
      };
      try {
        const results = await Promise.all(
          Array.from({ length: 6 }, (_, i) => (i % 2 ? other : storage).addCounters(batch)),
        );
        assert.equal(results.filter(Boolean).length, 1, `applied by exactly one: ${results}`);
      } finally {
        if (other !== storage) await other.close();
      }
      assert.equal((await persisted(sql, 'dup')).streams.get(streams[0]!.id)?.hits, 7);
    });

    it('guard rows are pruned after the retention, by each node every few minutes', async () => {
      const clock = new ManualClock(Date.UTC(2026, 0, 1));
      const own = await backend.open(clock);
      try {
        const x = own.sql();
        const { flows } = await seed(x, 'prune', 1, 0);
        const batchAt = () => ({
          id: newBatchId(),
          streams: [],
          flows: [{ id: flows[0]!, clicks: 1, no_match: 0, last_click_at: at(1) }],
        });
        const guards = async () =>
          toNum((await x.all<{ n: unknown }>('SELECT COUNT(*) AS n FROM applied_batches'))[0]?.n);
        const old = batchAt();
        await own.storage.addCounters(old);
        await own.storage.addCounters(batchAt());
        clock.advance(APPLIED_BATCH_RETENTION_MS - 60_000);
        await own.storage.addCounters(batchAt()); // prunes (10 min since the node opened): nothing old enough
        assert.equal(await guards(), 3);
        clock.advance(120_000);
        assert.equal(
          await own.storage.pruneAppliedBatches(
            new Date(clock.now() - APPLIED_BATCH_RETENTION_MS).toISOString(),
          ),
          2,
        );
        assert.equal(await guards(), 1);
        clock.advance(APPLIED_BATCH_RETENTION_MS);
        await own.storage.addCounters(batchAt()); // the node's own prune takes the third
        assert.equal(await guards(), 1, 'only the newest guard row is left');
        // Within the retention a retry is still refused; past it the guard is gone (hence a week).
        assert.equal(await own.storage.addCounters(old), true);
      } finally {
        await own.cleanup();
      }
    });

    /** A trigger that refuses the update of one row: the batch fails there, half-way through. */
    const refuse = (table: string, id: string) =>
      backend.name === 'postgres'
        ? `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
           CREATE TRIGGER refuse BEFORE UPDATE ON ${table} FOR EACH ROW WHEN (NEW.id = '${id}') EXECUTE FUNCTION refuse()`
        : `CREATE TRIGGER refuse BEFORE UPDATE ON ${table} WHEN NEW.id = '${id}'
           BEGIN SELECT RAISE(ABORT, 'refused'); END`;
    const allow = () =>
      sql.script(backend.name === 'postgres' ? 'DROP FUNCTION refuse() CASCADE' : 'DROP TRIGGER refuse');

    for (const [where, prefix, table, id] of [
      ['on a stream in the middle of the batch', 'midway', 'streams', 'midway-flow-00005-s3'],
      ['on a flow, after every stream was written', 'last', 'traffic_flows', 'last-flow-00009'],
    ] as const) {
      it(`a batch refused ${where} writes neither its clicks nor its counts, and keeps both for the next flush`, async () => {
        const { streams } = await seed(sql, prefix, 10, 10);
        const counters = new ClickCounters();
        const log = logOf(counters);
        const now = Date.UTC(2026, 0, 3);
        streams.forEach((s, i) => {
          for (let n = 0; n <= i % 3; n++) {
            counters.hit(s.flow, s.id, now);
            log.append(
              newClick({ click_id: `${prefix}-${i}-${n}`, flow_id: s.flow, stream_id: s.id, at: now }),
            );
          }
        });
        counters.noMatch(`${prefix}-flow-00009`, now);
        log.append(
          newClick({
            click_id: `${prefix}-nm`,
            flow_id: `${prefix}-flow-00009`,
            stream_id: null,
            outcome: 'no_match',
          }),
        );
        const logged = async () =>
          toNum(
            (
              await sql.all<{ n: unknown }>('SELECT COUNT(*) AS n FROM clicks WHERE click_id LIKE ?', [
                `${prefix}-%`,
              ])
            )[0]?.n,
          );
        const hitsOf = (i: number) => 1 + (i % 3);
        await sql.script(refuse(table, id));
        const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0);
        try {
          // SQLite reports a trigger's abort as resource.conflict; PostgreSQL passes its error on.
          await assert.rejects(log.persist());
          assert.equal(await logged(), 0, 'no click written without its counts');
          const untouched = await persisted(sql, prefix);
          assert.equal(
            sum([...untouched.streams.values()].map((s) => s.hits)),
            0,
            'no stream kept its increment',
          );
          assert.equal(sum([...untouched.flows.values()].map((f) => f.clicks + f.no_match)), 0);
          assert.equal(counters.pendingStream(`${prefix}-flow-00005-s3`).hits, hitsOf(53), 'counts kept');
        } finally {
          await allow();
        }
        const clicks = sum(streams.map((_s, i) => hitsOf(i))) + 1;
        assert.equal(await log.persist(), clicks);
        assert.equal(await logged(), clicks);
        assert.equal(counters.pending, false);
        const got = await persisted(sql, prefix);
        for (const [i, s] of streams.entries()) assert.equal(got.streams.get(s.id)?.hits, hitsOf(i), s.id);
        assert.equal(
          sum([...got.flows.values()].map((f) => f.clicks)),
          sum(streams.map((_s, i) => hitsOf(i))),
        );
        assert.equal(got.flows.get(`${prefix}-flow-00009`)?.no_match, 1);
      });
    }
  });
}
