/**
 * Recorder.record() against a plain `count++; sum += v` and prom-client's Histogram.observe, on the
 * same precomputed log-normal durations, in one run. Reports ns/op medians over rounds.
 *
 *   node bench/telemetry/recorder.bench.ts
 */
import { Histogram, Registry } from 'prom-client';
import { CLIENT_ERROR, OK, RecentWindow, Recorder } from '../../src/telemetry/index.ts';
import { median } from '../_util.ts';

const N = 1 << 20;
const ROUNDS = 9;
const BOUNDS = [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

// Log-normal durations around ~2 ms (seeded, so every run measures the same inputs).
let seed = 42;
const rand = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return (seed + 0.5) / 4294967296;
};
const values = new Float64Array(N);
for (let i = 0; i < N; i++)
  values[i] = Math.exp(0.7 + 1.2 * Math.sqrt(-2 * Math.log(rand())) * Math.cos(2 * Math.PI * rand()));

const ns = (t0: bigint) => Number(process.hrtime.bigint() - t0) / N;
let count = 0;
let sum = 0;
const recorder = new Recorder(Object.freeze(BOUNDS));
// The routes' five-minute window (30 s slots); the clock is moved by hand so that the measured
// loop crosses into a new slot ten times per pass, far more often than real traffic does.
let fakeNow = 0;
const window = new RecentWindow({ slotMs: 30_000, slots: 10, now: () => fakeNow });
const windowed = new Recorder(Object.freeze(BOUNDS), window);
const histogram = new Histogram({
  name: 'bench_ms',
  help: 'bench',
  buckets: BOUNDS,
  registers: [new Registry()],
});
// Each variant is its own loop, so each call site stays monomorphic and is measured as a caller would see it.
const variants: Record<string, () => number> = {
  'count++; sum += v (floor)': () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      count++;
      sum += values[i]!;
    }
    return ns(t0);
  },
  'Recorder.record, no window': () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) recorder.record(values[i]!, (i & 63) === 0 ? CLIENT_ERROR : OK);
    return ns(t0);
  },
  'Recorder.record, 5-minute window': () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      if ((i & 0x1ffff) === 0) {
        fakeNow += 30_000;
        window.sync();
      }
      windowed.record(values[i]!, (i & 63) === 0 ? CLIENT_ERROR : OK);
    }
    return ns(t0);
  },
  'prom-client Histogram.observe': () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) histogram.observe(values[i]!);
    return ns(t0);
  },
};

const results: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (const fn of Object.values(variants)) fn(); // warm-up, JIT
for (let r = 0; r < ROUNDS; r++) for (const [name, fn] of Object.entries(variants)) results[name]!.push(fn());
console.log(`recorder.record: ${ROUNDS} rounds × ${N} log-normal values, ${BOUNDS.length} buckets`);
const floor = median(results['count++; sum += v (floor)']!);
for (const [name, xs] of Object.entries(results)) {
  console.log(
    `  ${name.padEnd(32)} ${median(xs).toFixed(1).padStart(7)} ns/op   ×${(median(xs) / floor).toFixed(1)} the floor`,
  );
}
console.log(`  target: Recorder.record ≤ 50 ns/op (sink ${count + sum > 0 ? 'ok' : '-'})`);
