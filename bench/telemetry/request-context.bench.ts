/**
 * What carrying the request context costs per request, in one run: fastify's default (a pino child
 * logger per request), Sluice's lazy request logger (built only when a line is written), and
 * AsyncLocalStorage.run around a handler (what Sluice does only for ACP handlers and task runs).
 *
 *   node bench/telemetry/request-context.bench.ts
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { pino } from 'pino';
import { LazyRequestLogger } from '../../src/telemetry/index.ts';
import { median } from '../_util.ts';

const N = 500_000;
const ROUNDS = 7;
const root = pino({ level: 'info', base: { server_id: 'bench' } }, pino.destination('/dev/null'));
const als = new AsyncLocalStorage<{ request_id: string }>();
let sink = 0;
const handler = async (id: string) => {
  sink += id.length;
};

const variants: Record<string, () => Promise<number>> = {
  'no context (floor)': async () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) await handler('req');
    return Number(process.hrtime.bigint() - t0) / N;
  },
  'pino child per request': async () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      const log = root.child({ request_id: 'req', trace_id: 'req' });
      await handler(log ? 'req' : '');
    }
    return Number(process.hrtime.bigint() - t0) / N;
  },
  'lazy request logger': async () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      const log = new LazyRequestLogger(root, 'req');
      await handler(log ? 'req' : '');
    }
    return Number(process.hrtime.bigint() - t0) / N;
  },
  'AsyncLocalStorage.run': async () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) await als.run({ request_id: 'req' }, () => handler('req'));
    return Number(process.hrtime.bigint() - t0) / N;
  },
};

const results: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (const fn of Object.values(variants)) await fn();
for (let r = 0; r < ROUNDS; r++)
  for (const [name, fn] of Object.entries(variants)) results[name]!.push(await fn());
const floor = median(results['no context (floor)']!);
console.log(`request context per request: ${ROUNDS} rounds × ${N}`);
for (const [name, xs] of Object.entries(results)) {
  console.log(
    `  ${name.padEnd(24)} ${median(xs).toFixed(0).padStart(5)} ns/request  (+${(median(xs) - floor).toFixed(0)} ns over the floor)`,
  );
}
if (sink === 0) console.log('unexpected: nothing ran');
