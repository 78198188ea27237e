/**
 * Memory of the routing cache: 10,000 flows × 10 streams compiled and cached.
 *
 *   node --expose-gc bench/routing/memory.ts
 */
import { compileFlow, RoutingCache } from '../../src/routing/index.ts';
import type { StreamRecord } from '../../src/storage/index.ts';
import { flowRecord, streamRecord } from '../../test/helpers/records.ts';

const FLOWS = 10_000;
const STREAMS = 10;
const gc = (globalThis as { gc?: () => void }).gc;
const settle = () => {
  gc?.();
  gc?.();
  return process.memoryUsage();
};

const flowOf = (i: number) =>
  flowRecord({
    id: `flow-${i}-${'x'.repeat(24)}`,
    slug: `flow-${i}`,
    name: `Flow ${i}`,
    rotation: i % 2 ? 'weight' : 'position',
  });
const streamsOf = (i: number): StreamRecord[] =>
  Array.from({ length: STREAMS }, (_, j) =>
    streamRecord({
      id: `stream-${i}-${j}-${'y'.repeat(20)}`,
      flow_id: `flow-${i}`,
      name: `s${j}`,
      type: j === 0 ? 'forced' : j === STREAMS - 1 ? 'default' : 'regular',
      position: j,
      filters:
        j % 3 === 0
          ? { countries_include: ['DE', 'FR', 'IT', 'ES', 'NL'] }
          : j % 3 === 1
            ? { countries_exclude: ['US'] }
            : {},
      target_url: `https://target-${j}.example.com/landing/${i}?c={country}&s={stream}&r={request_id}`,
    }),
  );

const before = settle();
const cache = new RoutingCache({
  maxEntries: FLOWS,
  ttlMs: 3_600_000,
  load: async (slug) => {
    const i = Number(slug.slice(5));
    // Through JSON, as rows arrive from a database driver: flat strings, not the ropes that
    // template literals build (which would cost several objects each and inflate the figure).
    return compileFlow(JSON.parse(JSON.stringify(flowOf(i))), JSON.parse(JSON.stringify(streamsOf(i))));
  },
});
for (let i = 0; i < FLOWS; i++) await cache.load(`flow-${i}`);
const after = settle();
const mb = (b: number) => (b / 1024 / 1024).toFixed(1);
console.log(
  `routing cache, ${FLOWS} flows × ${STREAMS} streams (entries: ${cache.section().entries})${gc ? '' : ' — run with --expose-gc for settled figures'}`,
);
console.log(
  `  RSS ${mb(after.rss)} MB total (+${mb(after.rss - before.rss)} MB from ${mb(before.rss)} MB), heap used +${mb(after.heapUsed - before.heapUsed)} MB, heap total ${mb(after.heapTotal)} MB; target ≤ 200 MB RSS`,
);
