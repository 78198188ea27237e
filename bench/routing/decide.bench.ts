/**
 * The routing decision on a cache hit: a flow of 10 streams with country filters (forced, regular,
 * default), `decide()` plus `buildTarget()` per op, weighted and position rotation, in one run;
 * then the same flow with 3 targeting rules on every stream (docs/routing.md#rules: device,
 * language, an IP range, referrer suffix, hour, parameter), visitors varied so that rules pass and
 * fail.
 *
 *   node bench/routing/decide.bench.ts
 */
import { buildTarget, compileFlow, decide } from '../../src/routing/index.ts';
import type { StreamRecord } from '../../src/storage/index.ts';
import { flowRecord, macroValues, streamRecord, visitor } from '../../test/helpers/records.ts';
import { median } from '../_util.ts';

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
let sink = 0;
const values = macroValues({ flow: 'bench', request_id: 'req-1' });
const visitors = COUNTRIES.map((c) => visitor(c));
for (const rotation of ['weight', 'position'] as const) {
  const compiled = compileFlow(flow(rotation), streams);
  const times: number[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      const country = COUNTRIES[i % COUNTRIES.length];
      const s = decide(compiled, visitors[i % visitors.length]!, random);
      if (s) sink += buildTarget(s, { ...values, country }).length;
    }
    if (r > 0) times.push(Number(process.hrtime.bigint() - t0) / N);
  }
  console.log(
    `routing decision + target, 10 streams, ${rotation} rotation: ${median(times).toFixed(0)} ns/op median (target ≤ 2,000 ns)`,
  );
}

/** Three rules per stream, different fields, joined by `and` on even streams and `or` on odd ones. */
const RULES: NonNullable<StreamRecord['filters']['rules']>[] = [
  [
    { field: 'device_type', op: 'is', values: ['mobile', 'tablet'] },
    { field: 'language', op: 'is_not', values: ['ru', 'zh'] },
    { field: 'hour', op: 'is', values: ['0-23'] },
  ],
  [
    { field: 'ip', op: 'is_not', values: ['10.0.0.0/8', '192.168.0.0/16', '2001:db8::/32'] },
    { field: 'referrer_host', op: 'is', values: ['*.facebook.com', '*.instagram.com'] },
    { field: 'param:src', op: 'is', values: ['fb', 'ig'] },
  ],
  [
    { field: 'os', op: 'is', values: ['iOS', 'Android'] },
    { field: 'browser', op: 'is_not', values: ['Opera'] },
    { field: 'weekday', op: 'is', values: ['mon', 'tue', 'wed', 'thu', 'fri'] },
  ],
];
const ruled = streams.map((s, i) =>
  i === 9
    ? s
    : {
        ...s,
        filters: { ...s.filters, logic: i % 2 ? ('or' as const) : ('and' as const), rules: RULES[i % 3]! },
      },
);
const DEVICES = ['mobile', 'desktop', 'tablet'] as const;
const ruledVisitors = COUNTRIES.map((c, i) =>
  visitor(c, {
    client: i % 3 === 0 ? '203.0.113.7' : i % 3 === 1 ? '10.1.2.3' : '2001:db8::1',
    query: i % 2 ? { src: 'fb' } : {},
    at: Date.UTC(2026, 0, 5 + (i % 7), i % 24),
    facts: {
      device_type: DEVICES[i % 3]!,
      os: i % 2 ? 'iOS' : 'Windows',
      browser: i % 4 ? 'Chrome' : 'Opera',
      language: i % 5 ? 'de' : 'ru',
      referrer_host: i % 3 ? 'm.facebook.com' : null,
    },
  }),
);
for (const rotation of ['weight', 'position'] as const) {
  const compiled = compileFlow(flow(rotation), ruled);
  const times: number[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      const v = ruledVisitors[i % ruledVisitors.length]!;
      const s = decide(compiled, v, random);
      if (s) sink += buildTarget(s, { ...values, country: v.country }).length;
    }
    if (r > 0) times.push(Number(process.hrtime.bigint() - t0) / N);
  }
  console.log(
    `routing decision + target, 10 streams × 3 rules, ${rotation} rotation: ${median(times).toFixed(0)} ns/op median (target ≤ 2,000 ns)`,
  );
}
if (sink === 0) console.log('unexpected: nothing routed');
