import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { Sighting, Storage } from '../../src/storage/index.ts';
import { BATCH_BACKENDS, type Opened, storeSuite } from './backends.ts';

const T0 = Date.parse('2026-03-01T00:00:00Z');
/** Visitor keys use 52 bits: the largest must survive both backends. */
const BIG_KEY = 2 ** 52 - 1;

const seen = (flow: string, key: number, at = T0): Sighting => ({
  flow_id: flow,
  visitor_key: key,
  first_seen_at: at,
});
const keys = (rows: readonly Sighting[]) => rows.map((r) => `${r.flow_id}/${r.visitor_key}`);

for (const backend of BATCH_BACKENDS) {
  describe(`uniqueness sightings on ${backend.label}`, async () => {
    let opened: Opened;
    let storage: Storage;
    const { it } = await storeSuite(backend, {
      onOpen: (o) => {
        opened = o;
        storage = o.storage;
      },
    });

    it("a reader gets the other nodes' sightings once, in commit order, never its own", async () => {
      const start = await storage.sightings.open(T0, 100);
      let a = start.cursor;
      let b = start.cursor;
      assert.equal(await storage.sightings.add('node-a', [seen('f1', 1), seen('f1', BIG_KEY, T0 + 1500)]), 2);
      assert.equal(await storage.sightings.add('node-b', [seen('f2', 7)]), 1);
      assert.equal(await storage.sightings.add('node-a', [seen('f1', 3)]), 1);
      const forB = await storage.sightings.after(b, 'node-b', 100);
      assert.deepEqual(forB.rows, [seen('f1', 1), seen('f1', BIG_KEY, T0 + 1500), seen('f1', 3)]);
      assert.equal(forB.more, false);
      b = forB.cursor;
      const forA = await storage.sightings.after(a, 'node-a', 100);
      assert.deepEqual(keys(forA.rows), ['f2/7']);
      a = forA.cursor;
      // Read again: nothing new for either.
      assert.deepEqual((await storage.sightings.after(b, 'node-b', 100)).rows, []);
      assert.deepEqual((await storage.sightings.after(a, 'node-a', 100)).rows, []);
      // Pages: a full page says there is more, and the next page follows on.
      await storage.sightings.add(
        'node-a',
        [4, 5, 6, 8, 9].map((k) => seen('f3', k)),
      );
      const p1 = await storage.sightings.after(b, 'node-b', 2);
      assert.deepEqual(keys(p1.rows), ['f3/4', 'f3/5']);
      assert.equal(p1.more, true);
      const p2 = await storage.sightings.after(p1.cursor, 'node-b', 2);
      const p3 = await storage.sightings.after(p2.cursor, 'node-b', 2);
      assert.deepEqual(keys([...p2.rows, ...p3.rows]), ['f3/6', 'f3/8', 'f3/9']);
      assert.equal(p3.more, false);
      assert.deepEqual((await storage.sightings.after(p3.cursor, 'node-b', 2)).rows, []);
    });

    it("open() gives a starting node every node's open windows (newest N, oldest first) and a cursor after them", async () => {
      const S = T0 + 10_000;
      await storage.sightings.add('node-a', [
        seen('o', 1, T0 - 50_000),
        seen('o', 2, S),
        seen('o', 3, S + 10),
      ]);
      await storage.sightings.add('node-b', [seen('o', 4, S + 20)]);
      const all = await storage.sightings.open(S, 1000);
      assert.deepEqual(
        keys(all.rows.filter((r) => r.flow_id === 'o')),
        ['o/2', 'o/3', 'o/4'],
        'first_seen_at >= since only, oldest first',
      );
      // Only the newest two: open from where openStart says, still oldest first.
      const newest = await storage.sightings.open(S, 1000, await storage.sightings.openStart(S, 2));
      assert.deepEqual(keys(newest.rows.filter((r) => r.flow_id === 'o')), ['o/3', 'o/4']);
      assert.equal(await storage.sightings.openStart(S, 1000), undefined, 'fewer than kept: from the oldest');
      // A page at a time, oldest first, each page after the last one's `next`.
      const first = await storage.sightings.open(S, 2);
      assert.deepEqual(keys(first.rows), ['o/2', 'o/3']);
      const second = await storage.sightings.open(S, 2, first.next);
      assert.deepEqual(keys(second.rows), ['o/4']);
      assert.equal(second.next, undefined);
      assert.deepEqual((await storage.sightings.after(all.cursor, 'node-c', 100)).rows, []);
      await storage.sightings.add('node-a', [seen('o', 5, S + 30)]);
      assert.deepEqual(keys((await storage.sightings.after(all.cursor, 'node-c', 100)).rows), ['o/5']);
    });

    it('prune deletes the sightings first seen before a moment, in chunks', async () => {
      await storage.sightings.add(
        'node-a',
        Array.from({ length: 12 }, (_, i) => seen('p', i, T0 - 86_400_000 * 3 + i)),
      );
      const gone = await storage.sightings.prune(T0 - 86_400_000, { chunkRows: 5 });
      assert.equal(gone, 12);
      const left = await storage.sightings.open(0, 10_000);
      assert.equal(left.rows.filter((r) => r.flow_id === 'p').length, 0);
      assert.ok(left.rows.length > 0, 'younger sightings stay');
    });

    if (backend.name === 'postgres') {
      it('writers commit one after another, so a reader never moves past a sighting that commits late', async () => {
        const start = await storage.sightings.open(T0, 1);
        let locked!: () => void;
        const holding = new Promise<void>((r) => {
          locked = r;
        });
        let release!: () => void;
        const released = new Promise<void>((r) => {
          release = r;
        });
        // A writer that took the lock, inserted, and has not committed yet (a slow node).
        const slow = opened.sql().transaction(async (tx) => {
          await tx.run('LOCK TABLE click_sightings IN SHARE ROW EXCLUSIVE MODE');
          await tx.run(
            `INSERT INTO click_sightings (flow_id, visitor_key, first_seen_at, server_id) VALUES ('late', 1, now(), 'node-a')`,
          );
          locked();
          await released;
        });
        await holding;
        let secondDone = false;
        const second = storage.sightings.add('node-a', [seen('late', 2)]).then((n) => {
          secondDone = true;
          return n;
        });
        const early = await storage.sightings.after(start.cursor, 'node-b', 100);
        assert.deepEqual(early.rows, [], 'neither is visible yet');
        assert.equal(secondDone, false, 'the second writer waits for the first to commit');
        release();
        await slow;
        assert.equal(await second, 1);
        const now = await storage.sightings.after(early.cursor, 'node-b', 100);
        assert.deepEqual(keys(now.rows), ['late/1', 'late/2'], 'both, in commit order');
        assert.deepEqual((await storage.sightings.after(now.cursor, 'node-b', 100)).rows, []);
      });
    }
  });
}
