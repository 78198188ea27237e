import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';

/** The least gap between two background reads of the totals (src/routing/service.ts). */
const GAP_MS = 250;
/** Timers may fire a millisecond early of the gap as measured here (performance.now rounding). */
const SLACK_MS = 5;

describe('system metrics totals (streams, traffic_flows)', () => {
  let t: TestNode;
  let admin: string;
  before(async () => {
    t = await startTestNode();
    admin = await t.token('admin');
  });
  after(() => t.close());

  test('a burst of writes reads them at most once per gap, one read at a time, and ends on the last write', async () => {
    // Each read of the totals made slow, and timed: a slow database must not queue reads behind
    // one another (the counter flushes wait in the same queue).
    const storage = t.node.storage;
    const read = storage.aggregates.bind(storage);
    const reads: [start: number, end: number][] = [];
    storage.aggregates = async () => {
      const start = performance.now();
      await new Promise((r) => setTimeout(r, 100));
      try {
        return await read();
      } finally {
        reads.push([start, performance.now()]);
      }
    };
    try {
      const N = 60;
      await Promise.all(
        Array.from({ length: N }, async (_, i) => {
          const res = await t.acp('/acp/traffic-flows/create', admin, { slug: `burst-${i}`, name: 'b' });
          assert.equal(res.status, 200, await res.text());
        }),
      );
      const wrote = performance.now();
      const viewer = await t.token('viewer');
      await until(
        'the totals to count every flow',
        async () => {
          const res = await t.acp('/acp/system/metrics', viewer, {});
          return ((await res.json()) as { traffic_flows: { total: number } }).traffic_flows.total === N;
        },
        5_000,
        20,
      );
      // One read per write before: 60 reads, queued one behind the other.
      for (let i = 1; i < reads.length; i++) {
        assert.ok(
          reads[i]![0] - reads[i - 1]![1] >= GAP_MS - SLACK_MS,
          `read ${i} began ${(reads[i]![0] - reads[i - 1]![1]).toFixed(1)} ms after the one before ended`,
        );
      }
      const during = reads.filter(([start]) => start < wrote).length;
      assert.ok(during < N / 4, `${during} reads for ${N} writes`);
    } finally {
      storage.aggregates = read;
    }
  });
});
