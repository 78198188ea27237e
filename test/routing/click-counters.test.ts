import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClickCounters } from '../../src/routing/index.ts';
import type { CounterBatch } from '../../src/storage/index.ts';

const rows = (b: CounterBatch) => ({
  streams: b.streams.map((s) => [s.id, s.hits, s.last_hit_at]).sort(),
  flows: b.flows.map((f) => [f.id, f.clicks, f.no_match, f.last_click_at]),
});

test('counts batch up; a failed batch is sent again as it was, same id, and new counts go to a new batch', async () => {
  const c = new ClickCounters();
  for (let i = 0; i < 5; i++) c.hit('f1', 's1', 1000 + i);
  c.hit('f1', 's2', 2000);
  c.noMatch('f1', 3000);
  assert.equal(c.pendingStream('s1').hits, 5);
  assert.deepEqual(c.pendingFlow('f1'), { clicks: 6, no_match: 1, bots: 0, uniques: 0 });

  const sent: CounterBatch[] = [];
  await assert.rejects(
    c.flush(async (b) => {
      sent.push(structuredClone(b));
      c.hit('f1', 's1', 4000); // counted while the failing flush was in flight
      throw new Error('db down');
    }),
    /db down/,
  );
  assert.equal(c.pendingStream('s1').hits, 6, 'the failed batch and what came meanwhile are both pending');
  assert.deepEqual(c.pendingFlow('f1'), { clicks: 7, no_match: 1, bots: 0, uniques: 0 });
  // What a stop that cannot write would lose: every flow's, the unacknowledged batch's included.
  assert.deepEqual(c.unpersisted(), { clicks: 7, no_match: 1, bots: 0, uniques: 0 });
  assert.equal(c.unackedBatchId, sent[0]!.id);

  // The next flush fails again on the retried batch: the newer counts are not even cut yet.
  await assert.rejects(
    c.flush(async (b) => {
      sent.push(structuredClone(b));
      throw new Error('still down');
    }),
    /still down/,
  );
  assert.equal(sent.length, 2);
  assert.deepEqual(sent[1], sent[0], 'the same batch, same id, same rows');

  const flushed: CounterBatch[] = [];
  assert.equal(
    await c.flush(async (b) => {
      flushed.push(b);
    }),
    2 + 1 + 1 + 1,
  );
  assert.equal(await c.flush(async () => assert.fail('nothing left to flush')), 0);
  assert.equal(c.pending, false);
  assert.deepEqual(
    c.unpersisted(),
    { clicks: 0, no_match: 0, bots: 0, uniques: 0 },
    'not the totals since start',
  );
  assert.equal(c.totalHits, 7);
  assert.equal(c.unackedBatchId, undefined);
  assert.equal(flushed.length, 2);
  const [retried, fresh] = flushed as [CounterBatch, CounterBatch];
  assert.deepEqual(retried, sent[0]);
  assert.deepEqual(rows(retried), {
    streams: [
      ['s1', 5, new Date(1004).toISOString()],
      ['s2', 1, new Date(2000).toISOString()],
    ],
    flows: [['f1', 6, 1, new Date(3000).toISOString()]],
  });
  assert.notEqual(fresh.id, retried.id);
  assert.deepEqual(rows(fresh), {
    streams: [['s1', 1, new Date(4000).toISOString()]],
    flows: [['f1', 1, 0, new Date(4000).toISOString()]],
  });
  assert.equal(c.totalHits, 7);
  assert.equal(c.totalClicks, 7);
  assert.equal(c.totalNoMatch, 1);
});

test('unpersisted sums every flow: clicks, no-matches and bots not yet acknowledged', async () => {
  const c = new ClickCounters();
  c.hit('f1', 's1', 1, true);
  c.noMatch('f2', 2);
  c.bot('f2', 3);
  c.bot('f3', 4);
  assert.deepEqual(c.unpersisted(), { clicks: 1, no_match: 1, bots: 2, uniques: 1 });
  await c.flush(async () => {});
  assert.deepEqual(c.unpersisted(), { clicks: 0, no_match: 0, bots: 0, uniques: 0 });
  assert.deepEqual([c.totalClicks, c.totalBots], [1, 2]);
});
