import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { escapeLabelValue, Recorder, RecorderGroup } from '../../src/telemetry/index.ts';
import { seeded } from '../helpers/random.ts';

describe('recorder', () => {
  test('count, errors, sum and average are exact', () => {
    const r = new Recorder([10]);
    r.record(2, false);
    r.record(4, true);
    r.record(-3, false); // a clock step backwards counts as 0 ms
    assert.deepEqual([r.count, r.errors, r.sum], [3, 1, 6]);
    assert.equal(r.entry().avg_ms, 2);
  });

  test('cumulative buckets are exact, `le` inclusive, +Inf equals count', () => {
    const bounds = Object.freeze([1, 2.5, 10]);
    const r = new Recorder(bounds);
    for (const v of [0, 0.5, 1, 1.0000001, 2.5, 2.6, 10, 11, 1e9]) r.record(v, false);
    assert.deepEqual(r.cumulative(), [3, 5, 7, 9]);
    assert.deepEqual(r.bucketsObject(), { '1': 3, '2.5': 5, '10': 7, '+Inf': 9 });
  });

  test('buckets stay exact for random values around many close bounds (against a plain scan)', () => {
    const bounds = Object.freeze([0.5, 0.505, 0.51, 1, 1.01, 2, 5, 5.001, 10, 25, 50, 100, 250, 1000]);
    const r = new Recorder(bounds);
    const expected = new Array(bounds.length + 1).fill(0);
    const rnd = seeded(9);
    for (let i = 0; i < 50_000; i++) {
      const v = i % 7 === 0 ? bounds[i % bounds.length]! : 10 ** (-1 + 4 * rnd());
      r.record(v, false);
      let b = 0;
      while (b < bounds.length && v > bounds[b]!) b++;
      expected[b]++;
    }
    assert.deepEqual([...r.buckets], expected);
  });

  test('entry p95 follows the sketch; N records from concurrent callers count exactly N', async () => {
    const r = new Recorder([1, 10, 100]);
    await Promise.all(Array.from({ length: 100 }, async (_, i) => r.record(i + 1, i % 10 === 0)));
    assert.equal(r.count, 100);
    assert.equal(r.errors, 10);
    assert.ok(Math.abs(r.entry().p95_ms - 95) / 95 <= 0.01);
  });

  test('a group hands out one recorder per key, with escaped labels', () => {
    const g = new RecorderGroup('route', [1]);
    assert.equal(g.get('/a'), g.get('/a'));
    assert.notEqual(g.get('/a'), g.get('/b'));
    assert.equal(g.size, 2);
    assert.equal(g.get('/x"y\\z\nw').labels, 'route="/x\\"y\\\\z\\nw"');
    assert.deepEqual(Object.keys(g.snapshot()), ['/a', '/b', '/x"y\\z\nw']);
    assert.equal(escapeLabelValue('plain'), 'plain');
  });
});
