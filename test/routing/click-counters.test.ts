import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClickCounters } from '../../src/routing/index.ts';

test('a cut takes what was counted since the last one; it stays pending until acknowledged or lost', async () => {
  const c = new ClickCounters();
  for (let i = 0; i < 5; i++) c.hit('f1', 's1', 1000 + i);
  c.hit('f1', 's2', 2000);
  c.noMatch('f1', 3000);
  assert.equal(c.pendingStream('s1').hits, 5);
  assert.deepEqual(c.pendingFlow('f1'), { clicks: 6, no_match: 1, bots: 0, uniques: 0 });

  const first = c.cut()!;
  c.hit('f1', 's1', 4000); // counted while the first cut's batch is under way
  assert.equal(c.pendingStream('s1').hits, 6, 'the cut and what came since are both pending');
  assert.deepEqual(c.pendingFlow('f1'), { clicks: 7, no_match: 1, bots: 0, uniques: 0 });
  // What a stop that cannot write would lose: every flow's, the cut's included.
  assert.deepEqual(c.unpersisted(), { clicks: 7, no_match: 1, bots: 0, uniques: 0 });

  const rows = await first.rows();
  assert.deepEqual(
    { ...rows, streams: rows.streams.sort() },
    {
      streams: [
        ['s1', 5, 0, new Date(1004).toISOString()],
        ['s2', 1, 0, new Date(2000).toISOString()],
      ],
      flows: [['f1', 6, 1, 0, 0, new Date(3000).toISOString()]],
      days: [],
    },
  );
  const second = c.cut()!;
  assert.deepEqual((await second.rows()).flows, [['f1', 1, 0, 0, 0, new Date(4000).toISOString()]]);
  assert.equal(c.cut(), undefined, 'nothing counted since');

  first.acked();
  assert.deepEqual(c.pendingFlow('f1'), { clicks: 1, no_match: 0, bots: 0, uniques: 0 });
  second.lost();
  assert.equal(c.pending, false);
  assert.deepEqual(
    c.unpersisted(),
    { clicks: 0, no_match: 0, bots: 0, uniques: 0 },
    'not the totals since start',
  );
  assert.deepEqual([c.totalHits, c.totalClicks, c.totalNoMatch], [7, 7, 1]);
});

test('unpersisted sums every flow: clicks, no-matches and bots not yet acknowledged', async () => {
  const c = new ClickCounters();
  c.hit('f1', 's1', 1, true);
  c.noMatch('f2', 2);
  c.bot('f2', 3);
  c.bot('f3', 4);
  assert.deepEqual(c.unpersisted(), { clicks: 1, no_match: 1, bots: 2, uniques: 1 });
  c.cut()!.acked();
  assert.deepEqual(c.unpersisted(), { clicks: 0, no_match: 0, bots: 0, uniques: 0 });
  assert.deepEqual([c.totalClicks, c.totalBots], [1, 2]);
});

test("a capped stream's day counts stay pending until their cut is acknowledged, then are told", () => {
  const c = new ClickCounters();
  const told: unknown[] = [];
  c.onDaysAcked = (days) => told.push(...days);
  c.dayHit('s1', '2026-01-02');
  c.dayHit('s1', '2026-01-02');
  const cut = c.cut()!;
  c.dayHit('s1', '2026-01-02');
  assert.equal(c.pendingDay('s1', '2026-01-02'), 3);
  cut.acked();
  assert.equal(c.pendingDay('s1', '2026-01-02'), 1);
  assert.deepEqual(told, [{ stream_id: 's1', day: '2026-01-02', clicks: 2 }]);
});
