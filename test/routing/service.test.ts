import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RoutingLedger, RoutingService } from '../../src/routing/index.ts';
import { type InvalidationListener, openSqlite, type Storage } from '../../src/storage/index.ts';
import { createLogger } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';
import { BACKENDS } from '../storage/backends.ts';

describe('routing service: notices that may have been missed', () => {
  let storage: Storage;
  let routing: RoutingService;
  /** What the service registered for invalidation notices (the real SQLite storage keeps it too). */
  let notify: InvalidationListener | undefined;
  let reads = 0;
  let running = 0;
  let mostAtOnce = 0;

  before(async () => {
    storage = openSqlite(':memory:', systemClock);
    await storage.migrate();
    const subscribe = storage.onInvalidation.bind(storage);
    storage.onInvalidation = (listener) => {
      notify = listener;
      subscribe(listener);
    };
    // Each chunk read of a reload made slow, and counted.
    const bySlugs = storage.flows.bySlugs.bind(storage.flows);
    storage.flows.bySlugs = async (slugs) => {
      reads++;
      mostAtOnce = Math.max(mostAtOnce, ++running);
      try {
        await new Promise((r) => setTimeout(r, 50));
        return await bySlugs(slugs);
      } finally {
        running--;
      }
    };
    const logger = createLogger({
      level: 'info',
      name: 'sluice',
      serverId: 'n1',
      destination: new LogCapture(),
    });
    routing = new RoutingService({
      storage,
      logger,
      cacheMaxEntries: 100,
      cacheTtlMs: 600_000,
      ledger: new RoutingLedger({ storage, logger, capsIntervalMs: 0 }),
    });
    for (const slug of ['a', 'b', 'c']) {
      await storage.flows.create({
        slug,
        name: slug,
        status: 'active',
        rotation: 'weight',
        forward_query: false,
      });
      await routing.cache.load(slug);
    }
  });
  after(async () => {
    await routing.stop();
    await storage.close();
  });

  test('a burst of reconnections reloads the cache once, and once more after it, never two at once', async () => {
    assert.ok(notify !== undefined, 'the service listens for notices');
    reads = 0;
    // A flapping link: five reconnections while the first reload runs.
    for (let i = 0; i < 5; i++) notify(undefined);
    await until('the reloads to end', () => reads === 2 && running === 0, 10_000);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(reads, 2, 'one reload, then one more for the reconnections during it');
    assert.equal(mostAtOnce, 1);
  });

  test('none once stopped', async () => {
    await routing.stop();
    reads = 0;
    notify!(undefined);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(reads, 0);
  });
});

// A write through this node dropped the flow from the cache but kept what it was as the fallback
// for an outage: a flow deleted, paused or renamed here, read again while the database was down,
// was served as it was before the write, active (review-30).
for (const backend of BACKENDS) {
  describe(`routing service on ${backend.label}: the stale fallback after a write`, async () => {
    const skip = !(await backend.available()) && 'PostgreSQL unavailable';

    test('a flow deleted, paused or renamed here is not served while the database is down; one edited is', {
      skip,
    }, async () => {
      const opened = await backend.open();
      // A store of its own, closed below as a database that cannot be reached.
      const storage = opened.reopen();
      const log = createLogger({
        level: 'info',
        name: 'sluice',
        serverId: 'n1',
        destination: new LogCapture(),
      });
      const routing = new RoutingService({
        storage,
        logger: log,
        cacheMaxEntries: 100,
        cacheTtlMs: 600_000,
        ledger: new RoutingLedger({ storage, logger: log, capsIntervalMs: 0 }),
      });
      try {
        const flows = new Map<string, { id: string; version: number }>();
        for (const slug of ['deleted', 'paused', 'renamed', 'edited']) {
          flows.set(slug, await routing.createFlow({ slug, name: slug }));
          assert.equal((await routing.cache.load(slug))?.slug, slug);
        }
        await routing.deleteFlow(flows.get('deleted')!.id);
        await routing.updateFlow({ ...flows.get('paused')!, status: 'paused' });
        await routing.updateFlow({ ...flows.get('renamed')!, slug: 'renamed-2' });
        await routing.updateFlow({ ...flows.get('edited')!, name: 'edited again' });
        await storage.close();
        for (const slug of ['deleted', 'paused', 'renamed'])
          await assert.rejects(routing.cache.load(slug), `${slug} is not served from the fallback`);
        assert.equal((await routing.cache.load('edited'))?.slug, 'edited', 'stale beats down');
      } finally {
        routing.stop();
        await opened.cleanup();
      }
    });
  });
}
