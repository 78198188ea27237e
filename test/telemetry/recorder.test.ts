import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CLIENT_ERROR,
  escapeLabelValue,
  OK,
  outcomeOf,
  QuantileSketch,
  RecentWindow,
  Recorder,
  RecorderGroup,
  SERVER_ERROR,
} from '../../src/telemetry/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { seeded } from '../helpers/random.ts';

describe('recorder', () => {
  test('count, errors, sum and average are exact', () => {
    const r = new Recorder([10]);
    r.record(2, OK);
    r.record(4, SERVER_ERROR);
    r.record(-3, OK); // a clock step backwards counts as 0 ms
    r.record(1, CLIENT_ERROR);
    assert.deepEqual([r.count, r.errors, r.clientErrors, r.serverErrors, r.sum], [4, 2, 1, 1, 7]);
    assert.equal(r.entry().avg_ms, 1.75);
  });

  test('cumulative buckets are exact, `le` inclusive, +Inf equals count', () => {
    const bounds = Object.freeze([1, 2.5, 10]);
    const r = new Recorder(bounds);
    for (const v of [0, 0.5, 1, 1.0000001, 2.5, 2.6, 10, 11, 1e9]) r.record(v, OK);
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
      r.record(v, OK);
      let b = 0;
      while (b < bounds.length && v > bounds[b]!) b++;
      expected[b]++;
    }
    assert.deepEqual([...r.buckets], expected);
  });

  test('entry p95 follows the sketch; N records from concurrent callers count exactly N', async () => {
    const r = new Recorder([1, 10, 100]);
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => r.record(i + 1, i % 10 === 0 ? SERVER_ERROR : OK)),
    );
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

  test('outcomes by status: 4xx client, 5xx server, the rest fine', () => {
    assert.deepEqual([200, 302, 399, 400, 404, 499, 500, 503].map(outcomeOf), [OK, OK, OK, 1, 1, 1, 2, 2]);
  });

  test('a merged sketch answers as one sketch fed every value', () => {
    const rnd = seeded(3);
    const whole = new QuantileSketch();
    const parts = [new QuantileSketch(), new QuantileSketch(), new QuantileSketch()];
    for (let i = 0; i < 30_000; i++) {
      // The parts cover different ranges, so merging must widen the store both ways.
      const part = i % 3;
      const v = part === 0 ? 1e-7 : 10 ** (part * 2 - 3 + 2 * rnd());
      whole.add(v);
      parts[part]!.add(v);
    }
    const merged = new QuantileSketch();
    for (const p of parts) merged.merge(p);
    for (const q of [0.01, 0.3, 0.5, 0.9, 0.95, 0.999])
      assert.equal(merged.quantile(q), whole.quantile(q), `q=${q}`);
    assert.equal(merged.count, whole.count);
    merged.clear();
    assert.equal(merged.count, 0);
    assert.equal(merged.quantile(0.95), 0);
  });

  test('the recent window holds the last five minutes, slot by slot, and forgets the rest', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12, 0, 0));
    const window = new RecentWindow({ slotMs: 30_000, slots: 10, now: () => clock.now() });
    const r = new Recorder([10], window);
    r.record(100, SERVER_ERROR); // 12:00:00
    clock.advance(60_000);
    window.sync();
    r.record(2, OK); // 12:01:00
    r.record(4, CLIENT_ERROR);
    let recent = r.recent()!;
    assert.deepEqual(
      { ...recent, p95_ms: undefined },
      { window_s: 300, count: 3, errors: 2, server_errors: 1, avg_ms: 35.333, p95_ms: undefined },
    );
    assert.ok(Math.abs(recent.p95_ms - 100) <= 1);
    // 12:04:59: the 12:00:00 slot is the oldest of ten still in the window.
    clock.set(Date.UTC(2026, 10, 23, 12, 4, 59));
    assert.equal(r.recent()!.count, 3);
    // 12:05:00: it has left; the 5xx is gone from the window but not from the totals.
    clock.set(Date.UTC(2026, 10, 23, 12, 5, 0));
    recent = r.recent()!;
    assert.deepEqual([recent.count, recent.errors, recent.server_errors, recent.avg_ms], [2, 1, 0, 3]);
    assert.ok(recent.p95_ms <= 4.04);
    assert.deepEqual([r.count, r.serverErrors, r.clientErrors], [3, 1, 1]);
    // A slot reused ten slots later starts empty.
    clock.set(Date.UTC(2026, 10, 23, 12, 10, 0));
    window.sync();
    r.record(7, OK);
    assert.deepEqual([r.recent()!.count, r.recent()!.avg_ms], [1, 7]);
    // Half an hour of silence: nothing recent, the totals stay.
    clock.advance(1_800_000);
    assert.deepEqual([r.recent()!.count, r.recent()!.p95_ms, r.count], [0, 0, 4]);
    assert.deepEqual(r.entry().recent, r.recent());
  });

  test('with a window, the figures since start are those of a recorder without one, lap after lap', () => {
    const clock = new ManualClock();
    const window = new RecentWindow({ slotMs: 30_000, slots: 10, now: () => clock.now() });
    const windowed = new Recorder([1, 10], window);
    const plain = new Recorder([1, 10]);
    const rnd = seeded(5);
    for (let i = 0; i < 20_000; i++) {
      if (i % 500 === 0) {
        clock.advance(7_000 + Math.floor(rnd() * 60_000));
        window.sync();
      }
      const v = 10 ** (-2 + 4 * rnd());
      windowed.record(v, OK);
      plain.record(v, OK);
    }
    for (const q of [0.5, 0.95, 0.99]) assert.equal(windowed.quantile(q), plain.quantile(q), `q=${q}`);
    const { recent: _, ...since } = windowed.entry();
    assert.deepEqual(since, plain.entry());
  });

  test('a clock stepping backwards does not reopen old slots', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12, 0, 0));
    const window = new RecentWindow({ slotMs: 30_000, slots: 10, now: () => clock.now() });
    const r = new Recorder([10], window);
    clock.advance(90_000);
    window.sync();
    r.record(1, OK);
    clock.advance(-60_000);
    assert.equal(window.sync(), Math.floor(Date.UTC(2026, 10, 23, 12, 1, 30) / 30_000));
    r.record(1, OK);
    assert.equal(r.recent()!.count, 2);
  });

  test('a group gives each of its recorders its window; without one, no recent block', () => {
    const clock = new ManualClock();
    const g = new RecorderGroup(
      'route',
      [1],
      new RecentWindow({ slotMs: 1000, slots: 5, now: () => clock.now() }),
    );
    g.get('/a').record(1, OK);
    assert.equal(g.snapshot()['/a']!.recent!.window_s, 5);
    assert.equal(new Recorder([1]).entry().recent, undefined);
  });
});
