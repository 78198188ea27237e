import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { KIND_SCOPES } from '../../src/config/index.ts';
import type { TaskContext } from '../../src/cron/index.ts';
import { newBatchId, type Storage } from '../../src/storage/index.ts';
import { type SqlExecutor, toNum } from '../../src/storage/sql.ts';
import { reportsRetention } from '../../src/tasks/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';
import { BATCH_BACKENDS, storeSuite } from '../storage/backends.ts';

const silent = pino({ level: 'silent' });
const DAY = 86_400_000;
const NOW = Date.parse('2026-03-01T00:00:00Z');

test('reports.retention is leader-scoped by default', () => {
  assert.equal(KIND_SCOPES['reports.retention'], 'leader');
});

for (const backend of BATCH_BACKENDS) {
  describe(`reports.retention and the hourly rollups on ${backend.label}`, async () => {
    let storage: Storage;
    let sql: SqlExecutor;
    const clock = new ManualClock(NOW);
    const { it } = await storeSuite(backend, {
      clock,
      onOpen: (o) => {
        storage = o.storage;
        sql = o.sql();
      },
    });
    /** The rollups of flow 'rr' summed per hour (one row per hour, whatever the outcomes). */
    const rollups = async () =>
      (
        await sql.all<{ hour: unknown; clicks: unknown; bots: unknown }>(
          "SELECT hour, SUM(clicks) AS clicks, SUM(bots) AS bots FROM report_hours WHERE flow_id = 'rr' GROUP BY hour ORDER BY hour",
        )
      ).map((r) => [
        new Date(r.hour instanceof Date ? r.hour.toISOString() : String(r.hour)).toISOString(),
        toNum(r.clicks),
        toNum(r.bots),
      ]);

    it('a click batch adds its hourly sums once, even when the batch is sent again', async () => {
      const at = NOW - 2 * DAY + 5 * 60_000;
      const rows = [
        newClick({ flow_id: 'rr', at }),
        newClick({ flow_id: 'rr', at: at + 1000 }),
        newClick({ flow_id: 'rr', at: at + 2000, outcome: 'bot', is_bot: true, is_unique: false }),
      ];
      const batch = { id: newBatchId(), server_id: null, rows };
      await storage.clicks.insertBatch(batch);
      await storage.clicks.insertBatch(batch);
      assert.deepEqual(await rollups(), [[new Date(NOW - 2 * DAY).toISOString(), 2, 1]]);
    });

    it('a run deletes the rollups of hours older than retention_days, keeps the rest', async () => {
      const old = newClick({ flow_id: 'rr', at: NOW - 500 * DAY });
      const kept = newClick({ flow_id: 'rr', at: NOW - 399 * DAY });
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows: [old, kept] });
      assert.equal((await rollups()).length, 3);
      const logs: unknown[] = [];
      const log = {
        ...silent,
        info: (o: unknown) => logs.push(o),
        debug: () => {},
      } as unknown as TaskContext['log'];
      await reportsRetention({ reports: storage.reports, clock, retentionDays: 400 })({
        signal: new AbortController().signal,
        log,
      } as TaskContext);
      const left = await rollups();
      assert.deepEqual(
        left.map((r) => r[0]),
        [
          new Date(Math.floor((NOW - 399 * DAY) / 3_600_000) * 3_600_000).toISOString(),
          new Date(NOW - 2 * DAY).toISOString(),
        ],
      );
      assert.equal((logs[0] as { deleted: number }).deleted, 1);
      // The raw click of that hour is the click log's business (clicks.retention), not this task's.
      assert.ok(await storage.clicks.get(old.click_id));
    });

    it('an hour of more rows than one statement deletes goes whole; a run stopped before it begins deletes nothing', async () => {
      // 2,600 rollup rows of one old hour and 1,400 of the next: SQLite deletes 2,000 a statement.
      const hours = ['2024-05-01T10:00:00.000Z', '2024-05-01T11:00:00.000Z'];
      const clicks = Array.from({ length: 4000 }, (_, i) =>
        newClick({
          flow_id: 'rr-many',
          stream_id: `rr-stream-${i}`,
          at: Date.parse(hours[i < 2600 ? 0 : 1]!) + i,
        }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows: clicks });
      const count = async () =>
        toNum(
          (
            await sql.all<{ n: unknown }>("SELECT COUNT(*) AS n FROM report_hours WHERE flow_id = 'rr-many'")
          )[0]?.n,
        );
      assert.equal(await count(), 4000);
      const stopped = new AbortController();
      stopped.abort();
      assert.equal(
        await storage.reports.deleteRollupsBefore('2024-06-01T00:00:00.000Z', { signal: stopped.signal }),
        0,
      );
      assert.equal(await count(), 4000, 'a run stopped before it began deletes nothing');
      assert.equal(await storage.reports.deleteRollupsBefore('2024-05-01T11:00:00.000Z'), 2600);
      assert.equal(await count(), 1400, 'the later hour is kept');
      assert.equal(await storage.reports.deleteRollupsBefore('2024-06-01T00:00:00.000Z'), 1400);
      assert.equal(await count(), 0);
    });
  });
}
