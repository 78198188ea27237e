import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClickCounters } from '../../src/routing/index.ts';
import type { CounterBatch } from '../../src/storage/index.ts';

test('counts batch up, a failed flush keeps everything, a flush never counts twice', async () => {
  const c = new ClickCounters();
  for (let i = 0; i < 5; i++) c.hit('f1', 's1', 1000 + i);
  c.hit('f1', 's2', 2000);
  c.noMatch('f1', 3000);
  assert.equal(c.pendingHits('s1'), 5);
  assert.deepEqual(c.pendingFlow('f1'), { clicks: 6, no_match: 1 });

  await assert.rejects(
    c.flush(async () => {
      c.hit('f1', 's1', 4000); // counted while the failing flush was in flight
      throw new Error('db down');
    }),
    /db down/,
  );
  assert.equal(c.pendingHits('s1'), 6, 'failed batch merged back with what came meanwhile');

  const batches: CounterBatch[] = [];
  await c.flush(async (b) => {
    batches.push(b);
  });
  assert.equal(await c.flush(async () => assert.fail('nothing left to flush')), 0);
  assert.equal(batches.length, 1);
  const b = batches[0]!;
  assert.deepEqual(b.streams.map((s) => [s.id, s.hits, s.last_hit_at]).sort(), [
    ['s1', 6, new Date(4000).toISOString()],
    ['s2', 1, new Date(2000).toISOString()],
  ]);
  assert.deepEqual(b.flows, [
    { id: 'f1', clicks: 7, no_match: 1, last_click_at: new Date(4000).toISOString() },
  ]);
  assert.equal(c.totalHits, 7);
  assert.equal(c.totalClicks, 7);
  assert.equal(c.totalNoMatch, 1);
});
