import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { QuantileSketch } from '../../src/telemetry/index.ts';
import { seeded } from '../helpers/random.ts';

/**
 * Exact nearest-rank quantile (docs/telemetry.md#p95), written independently of the sketch: the
 * smallest sample v such that at least a share q of the samples are ≤ v.
 */
function exact(sorted: Float64Array | number[], q: number): number {
  const n = sorted.length;
  for (let i = 0; i < n; i++) {
    let notAbove = i + 1;
    while (notAbove < n && sorted[notAbove] === sorted[i]) notAbove++;
    if (notAbove >= q * n - 1e-9) return sorted[i]!;
  }
  return sorted[n - 1]!;
}

const within1 = (got: number, want: number) => Math.abs(got - want) <= 0.01 * Math.abs(want);

function check(name: string, draw: () => number, n = 200_000) {
  test(`${name}: p50, p95, p99 within 1 % of an exact sort of ${n} samples`, () => {
    const sketch = new QuantileSketch();
    const xs = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      xs[i] = draw();
      sketch.add(xs[i]!);
    }
    xs.sort();
    for (const q of [0.5, 0.95, 0.99, 0.999]) {
      const want = exact(xs, q);
      const got = sketch.quantile(q);
      const err = Math.abs(got - want) / want;
      assert.ok(
        err <= 0.01,
        `q=${q}: sketch ${got}, exact ${want}, relative error ${(err * 100).toFixed(3)} %`,
      );
    }
    assert.equal(sketch.count, n);
  });
}

describe('quantile sketch accuracy', () => {
  const rnd = seeded(2026);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd());
  check('log-normal latencies (µ=1, σ=1.2, ms)', () => Math.exp(1 + 1.2 * normal()));
  check('uniform 0.01–5,000 ms', () => 0.01 + rnd() * 4999.99);
  check(
    'bimodal: cache hits ~0.2 ms and misses ~40 ms',
    () => (rnd() < 0.9 ? 0.2 : 40) * Math.exp(0.3 * normal()),
  );
  check('values spanning 1e-3 to 1e6 ms', () => 10 ** (-3 + 9 * rnd()));

  test('empty, zero, negative and out-of-range values', () => {
    const s = new QuantileSketch();
    assert.equal(s.quantile(0.95), 0);
    s.add(0);
    s.add(0);
    assert.equal(s.quantile(0.5), 0);
    const big = new QuantileSketch();
    big.add(5e12);
    assert.equal(
      big.quantile(0.5),
      5e12,
      'clamped into range for bucketing, but the exact max bounds the answer',
    );
    const one = new QuantileSketch();
    one.add(42);
    assert.equal(one.quantile(0.95), 42, 'a single value is returned exactly (min = max)');
  });
});

describe('p95 is the nearest rank, not rank q·(n−1)', () => {
  const sketchOf = (xs: number[]) => {
    const s = new QuantileSketch();
    for (const x of xs) s.add(x);
    return s;
  };

  test('one sample: p95 is that sample', () => {
    assert.equal(sketchOf([7.5]).quantile(0.95), 7.5);
  });

  test('two samples: p95 is the larger, not the smaller', () => {
    assert.equal(sketchOf([10, 200]).quantile(0.95), 200);
    assert.equal(sketchOf([200, 10]).quantile(0.95), 200);
  });

  test('three samples: p95 is the largest, not the median', () => {
    assert.equal(sketchOf([10, 20, 300]).quantile(0.95), 300);
  });

  test('20 samples: p95 is the 19th value (19 of 20 are not above it)', () => {
    const xs = Array.from({ length: 20 }, (_, i) => (i + 1) * 10);
    const got = sketchOf(xs).quantile(0.95);
    assert.ok(within1(got, 190), `p95 ${got}, want 190`);
  });

  test('21 samples: p95 is the 20th value (20 of 21 is 95.2 %), not the largest', () => {
    const xs = Array.from({ length: 21 }, (_, i) => (i + 1) * 10);
    const got = sketchOf(xs).quantile(0.95);
    assert.ok(within1(got, 200), `p95 ${got}, want 200`);
  });

  test('30 samples: p95 is the 29th value, not the 28th', () => {
    const xs = Array.from({ length: 30 }, (_, i) => (i + 1) * 10);
    const got = sketchOf(xs).quantile(0.95);
    assert.ok(within1(got, 290), `p95 ${got}, want 290`);
  });

  test('p95 is never below the smallest nor above the largest sample', () => {
    // Values that sit at the edges of their buckets, where the bucket's representative lies outside.
    for (const xs of [[1.0001], [1.0001, 1.0002], [99.99, 99.991, 99.992], Array(50).fill(3.3)]) {
      const s = sketchOf(xs);
      for (const q of [0, 0.01, 0.5, 0.95, 0.99, 1]) {
        const got = s.quantile(q);
        assert.ok(got >= Math.min(...xs) && got <= Math.max(...xs), `q=${q} of ${xs}: ${got}`);
      }
    }
  });

  test('matches an exact nearest rank within 1 % on random small and mid-sized samples', () => {
    const rnd = seeded(17);
    for (let round = 0; round < 300; round++) {
      const n = 1 + Math.floor(rnd() * (round < 200 ? 40 : 2000));
      const xs = Array.from({ length: n }, () => Math.exp(3 * rnd()) * (rnd() < 0.1 ? 50 : 1));
      const s = sketchOf(xs);
      xs.sort((a, b) => a - b);
      for (const q of [0.5, 0.9, 0.95, 0.99]) {
        const want = exact(xs, q);
        const got = s.quantile(q);
        assert.ok(within1(got, want), `n=${n} q=${q}: sketch ${got}, exact ${want}`);
        assert.ok(got >= xs[0]! && got <= xs[n - 1]!);
      }
    }
  });

  test('repeated values: p95 is the repeated value', () => {
    assert.equal(sketchOf([5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 1]).quantile(0.95), 5);
  });
});
