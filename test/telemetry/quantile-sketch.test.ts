import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { QuantileSketch } from '../../src/telemetry/index.ts';
import { seeded } from '../helpers/random.ts';

/** Exact quantile with the sketch's rank rule: the value at rank floor(q·(n−1)) of the sorted sample. */
function exact(sorted: Float64Array, q: number): number {
  return sorted[Math.floor(q * (sorted.length - 1))]!;
}

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
