import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SLUG_MISSES_KEPT, SlugMisses } from '../../src/routing/slug-misses.ts';

test('slug misses keep the most recent slugs, bounded; every miss is counted', () => {
  const m = new SlugMisses();
  for (let i = 0; i < SLUG_MISSES_KEPT + 5; i++) m.note(`s${i}`, false, i * 1000);
  m.note('s3', true, 999_000); // dropped before: kept again, counted afresh
  m.note(`s${SLUG_MISSES_KEPT + 4}`, false, 1_000_000); // the most recent already: moves to the front
  m.note(undefined, false, 1_000_001);
  m.note('wp-login', false, 1_000_002, true); // a scanner: counted apart, never named
  const s = m.section();
  assert.equal(s.recent.length, SLUG_MISSES_KEPT);
  assert.deepEqual([s.unknown, s.paused, s.bots], [SLUG_MISSES_KEPT + 7, 1, 1]);
  assert.deepEqual(
    s.recent.slice(0, 2).map((r) => [r.slug, r.count, r.flow, r.last_seen_at]),
    [
      [`s${SLUG_MISSES_KEPT + 4}`, 2, 'unknown', new Date(1_000_000).toISOString()],
      ['s3', 1, 'paused', new Date(999_000).toISOString()],
    ],
  );
  assert.ok(!s.recent.some((r) => r.slug === 's5'), 'the oldest went');
});
