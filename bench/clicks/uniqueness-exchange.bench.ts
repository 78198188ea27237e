/**
 * What the uniqueness exchange costs a node on PostgreSQL, per round (off the hot path): an empty
 * round (nothing new, nothing to learn: one read), a round sending 1,000 new sightings, and a round
 * learning 1,000 sightings another node sent. Two exchanges on one fresh schema; cases interleaved
 * round by round; medians of wall time per round (a database round trip is wall time).
 *
 *   node bench/clicks/uniqueness-exchange.bench.ts
 */
import { pino } from 'pino';
import { UniquenessExchange, UniquenessWindow } from '../../src/clicks/index.ts';
import { openPostgres } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../../test/helpers/postgres.ts';
import { median } from '../_util.ts';

const ROUNDS = 15;
const BATCH = 1000;
if (!(await pgAvailable())) {
  console.log('PostgreSQL unavailable: nothing measured');
  process.exit(0);
}
const schema = testSchema();
const a = openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock });
const b = openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock });
await a.migrate();
const silent = pino({ level: 'silent' });
const side = (name: string, storage: typeof a) => {
  const window = new UniquenessWindow({
    clock: systemClock,
    ttlHours: 24,
    maxEntries: 10_000_000,
    share: true,
  });
  const exchange = new UniquenessExchange({
    window,
    store: storage.sightings,
    serverId: name,
    clock: systemClock,
    logger: silent,
    flushIntervalMs: 0,
    ttlHours: 24,
    maxEntries: 10_000_000,
  });
  return { window, exchange };
};
const na = side('a', a);
const nb = side('b', b);
await na.exchange.start();
await nb.exchange.start();
let key = 0;
const time = async (fn: () => Promise<unknown>) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};
const results: Record<string, number[]> = { empty: [], send_1000: [], learn_1000: [] };
for (let r = 0; r < ROUNDS; r++) {
  results.empty!.push(await time(() => nb.exchange.round()));
  for (let i = 0; i < BATCH; i++) na.window.check(`flow-${i % 50}`, ++key);
  results.send_1000!.push(await time(() => na.exchange.round()));
  results.learn_1000!.push(await time(() => nb.exchange.round()));
}
const out = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, `${median(v).toFixed(2)} ms`]));
console.log(JSON.stringify({ rounds: ROUNDS, median_wall_per_round: out }));
await a.close();
await b.close();
await dropSchema(schema);
