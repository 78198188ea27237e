/**
 * The hourly rollups' bookkeeping (docs/reports.md#how-it-is-computed-and-how-it-grows): what
 * `hourRollups` costs a click when the click log cuts a batch (in the flush, not on the hot path):
 * 10,000 clicks of one hour, five countries, a tenth bots.
 *
 *   node bench/reports/rollup-bookkeeping.bench.ts
 */
import { hourRollups } from '../../src/storage/clicks.ts';
import { newClick } from '../../test/helpers/records.ts';

const C = ['DE', 'FR', 'US', 'GB', 'IT'];
const clicks = Array.from({ length: 10000 }, (_, i) =>
  newClick({
    at: Date.UTC(2026, 2, 10, 10) + i * 100,
    country: C[i % 5]!,
    outcome: i % 10 ? 'redirect' : 'bot',
  }),
);
for (let w = 0; w < 20; w++) hourRollups(clicks);
const t = process.cpuUsage();
for (let r = 0; r < 100; r++) hourRollups(clicks);
const u = process.cpuUsage(t);
console.log(
  `hourRollups: ${((((u.user + u.system) / 1e6) * 1e9) / (100 * 10000)).toFixed(0)} ns a click, ${hourRollups(clicks).length} rows from 10,000 clicks`,
);
