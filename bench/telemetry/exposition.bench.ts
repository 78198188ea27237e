/**
 * Rendering the exposition for 1,000 routes × 20 buckets: Sluice's writer (straight from the
 * recorders) against prom-client's registry.metrics() holding the same data, in one run.
 *
 *   node bench/telemetry/exposition.bench.ts
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { ExpositionWriter, OK, RecorderGroup, SERVER_ERROR } from '../../src/telemetry/index.ts';
import { median } from '../_util.ts';

const ROUTES = 1000;
const BOUNDS = Array.from({ length: 20 }, (_, i) => 2 ** (i - 4)); // 0.0625 … 32768 ms
const ROUNDS = 15;

const group = new RecorderGroup('route', BOUNDS);
const registry = new Registry();
const requests = new Counter({
  name: 'sluice_controller_requests_total',
  help: 'h',
  labelNames: ['route'],
  registers: [registry],
});
const errors = new Counter({
  name: 'sluice_controller_errors_total',
  help: 'h',
  labelNames: ['route'],
  registers: [registry],
});
const duration = new Histogram({
  name: 'sluice_controller_duration_milliseconds',
  help: 'h',
  labelNames: ['route'],
  buckets: BOUNDS,
  registers: [registry],
});
for (let r = 0; r < ROUTES; r++) {
  const route = `/api/v1/resource-${r}/:id`;
  const rec = group.get(route);
  for (let i = 0; i < 50; i++) {
    const v = (i * 37 + r) % 1000;
    rec.record(v, i % 10 === 0 ? SERVER_ERROR : OK);
    requests.inc({ route });
    if (i % 10 === 0) errors.inc({ route });
    duration.observe({ route }, v);
  }
}

const recorders = [...group.entries()].map(([, r]) => r);
const ours = () => {
  const w = new ExpositionWriter('text', 'sluice_');
  w.counter(
    'controller_requests',
    'h',
    recorders.map((r) => [r.labels, r.count] as const),
  );
  w.counter(
    'controller_errors',
    'h',
    recorders.map((r) => [r.labels, r.errors] as const),
  );
  w.histogram('controller_duration_milliseconds', 'h', recorders);
  return w.finish();
};

async function time(fn: () => string | Promise<string>): Promise<[number, number]> {
  const t0 = performance.now();
  const text = await fn();
  return [performance.now() - t0, text.length];
}

const results: Record<string, number[]> = {
  'Sluice ExpositionWriter': [],
  'prom-client registry.metrics()': [],
};
let sizes = '';
for (let r = 0; r < ROUNDS + 2; r++) {
  const [a, la] = await time(ours);
  const [b, lb] = await time(() => registry.metrics());
  if (r >= 2) {
    results['Sluice ExpositionWriter']!.push(a);
    results['prom-client registry.metrics()']!.push(b);
  }
  sizes = `${la} vs ${lb} bytes`;
}
const mine = median(results['Sluice ExpositionWriter']!);
const theirs = median(results['prom-client registry.metrics()']!);
console.log(
  `exposition: ${ROUTES} routes × ${BOUNDS.length} buckets (+ counters), ${ROUNDS} rounds, ${sizes}`,
);
console.log(`  Sluice ExpositionWriter          ${mine.toFixed(2).padStart(7)} ms`);
console.log(`  prom-client registry.metrics()   ${theirs.toFixed(2).padStart(7)} ms`);
console.log(`  ratio ${(theirs / mine).toFixed(1)}× faster; target ≤ 10 ms`);
