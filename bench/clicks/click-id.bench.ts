/**
 * What a `click_id` costs (docs/clicks.md#click-ids): `ClickIdGenerator.next()` on the system
 * clock, each id read to its last character (as the click log and the response header do, which
 * also makes V8 flatten a string built by concatenation), with `randomUUID()` as a yardstick.
 * Cases are interleaved round by round and timed in process CPU time, medians over rounds.
 *
 *   node bench/clicks/click-id.bench.ts
 */
import { randomUUID } from 'node:crypto';
import { ClickIdGenerator } from '../../src/clicks/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { median } from '../_util.ts';

const ROUNDS = 11;
const N = 500_000;

const ids = new ClickIdGenerator(systemClock);
let sink = 0;
const cases: Record<string, () => void> = {
  'click id': () => {
    for (let i = 0; i < N; i++) {
      const id = ids.next();
      sink += id.charCodeAt(id.length - 1);
    }
  },
  'randomUUID() (yardstick)': () => {
    for (let i = 0; i < N; i++) {
      const id = randomUUID();
      sink += id.charCodeAt(id.length - 1);
    }
  },
};

const times = new Map<string, number[]>(Object.keys(cases).map((k) => [k, []]));
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const [name, run] of Object.entries(cases)) {
    const t0 = process.cpuUsage();
    run();
    const used = process.cpuUsage(t0);
    if (r > 0) times.get(name)!.push(((used.user + used.system) * 1000) / N);
  }
}
for (const [name, xs] of times) {
  const s = [...xs].sort((a, b) => a - b);
  console.log(
    `${name}: ${median(xs).toFixed(1)} CPU-ns/op median (p10–p90 ${s[1]!.toFixed(1)}–${s.at(-2)!.toFixed(1)})`,
  );
}
console.log(
  `ratio: click id / randomUUID ${(median(times.get('click id')!) / median(times.get('randomUUID() (yardstick)')!)).toFixed(2)}×`,
);
if (sink === 0) console.log('unexpected: nothing measured');
