/**
 * The routing decision on a cache hit: a flow of 10 streams with country filters (forced, regular,
 * default), `decide()` plus `buildTarget()` per op, weighted and position rotation, in one run.
 *
 *   node bench/routing/decide.bench.ts
 */
import { buildTarget, compileFlow, decide } from '../../src/routing/index.ts';
import type { StreamRecord } from '../../src/storage/index.ts';
import { flowRecord, macroValues, streamRecord } from '../../test/helpers/records.ts';

const N = 1_000_000;
const ROUNDS = 9;
const EU = ['DE', 'FR', 'IT', 'ES', 'NL', 'BE', 'AT', 'PL', 'SE', 'DK', 'FI', 'PT', 'IE', 'CZ', 'GR'];
const COUNTRIES = [...EU, 'US', 'CA', 'BR', 'JP', 'IN', 'AU', undefined, undefined, 'MX', 'ZA'];

const flow = (rotation: 'position' | 'weight') => flowRecord({ id: 'f', slug: 'bench', rotation });
const stream = (i: number, type: StreamRecord['type'], filters: StreamRecord['filters']): StreamRecord =>
  streamRecord({
    id: `s${i}`,
    flow_id: 'f',
    name: `s${i}`,
    type,
    position: i,
    weight: 50 + 25 * i,
    filters,
    target_url: `https://t${i}.example.com/p?c={country}&s={stream}&r={request_id}`,
  });
const streams = [
  stream(0, 'forced', { countries_include: ['JP', 'KR'] }),
  stream(1, 'forced', { countries_include: ['BR', 'AR', 'CL'] }),
  stream(2, 'regular', { countries_include: EU }),
  stream(3, 'regular', { countries_exclude: ['US', 'CA'] }),
  stream(4, 'regular', { countries_include: ['US', 'CA', 'MX'] }),
  stream(5, 'regular', { countries_exclude: EU.slice(0, 8) }),
  stream(6, 'regular', { countries_include: ['IN', 'AU', 'ZA'] }),
  stream(7, 'regular', {}),
  stream(8, 'regular', { countries_exclude: ['ZA'] }),
  stream(9, 'default', {}),
];

let seed = 7;
const random = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 4294967296;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
let sink = 0;
const values = macroValues({ flow: 'bench', request_id: 'req-1' });
for (const rotation of ['weight', 'position'] as const) {
  const compiled = compileFlow(flow(rotation), streams);
  const times: number[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      const country = COUNTRIES[i % COUNTRIES.length];
      const s = decide(compiled, country, random);
      if (s) sink += buildTarget(s, { ...values, country }).length;
    }
    if (r > 0) times.push(Number(process.hrtime.bigint() - t0) / N);
  }
  console.log(
    `routing decision + target, 10 streams, ${rotation} rotation: ${median(times).toFixed(0)} ns/op median (target ≤ 2,000 ns)`,
  );
}
if (sink === 0) console.log('unexpected: nothing routed');
