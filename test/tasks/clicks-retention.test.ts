import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { KIND_SCOPES } from '../../src/config/index.ts';
import { Schedule, Scheduler, type TaskContext } from '../../src/cron/index.ts';
import { newBatchId, type Storage } from '../../src/storage/index.ts';
import { type SqlExecutor, toNum } from '../../src/storage/sql.ts';
import { clicksRetention } from '../../src/tasks/index.ts';
import { Telemetry } from '../../src/telemetry/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';
import { BACKENDS, storeSuite } from '../storage/backends.ts';

const silent = pino({ level: 'silent' });
const DAY = 86_400_000;
const NOW = Date.parse('2026-03-01T00:00:00Z');

test('clicks.retention is leader-scoped by default (a leader task)', () => {
  assert.equal(KIND_SCOPES['clicks.retention'], 'leader');
});

for (const backend of BACKENDS) {
  describe(`clicks.retention on ${backend.name}`, async () => {
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
    const count = async (flow: string) =>
      toNum(
        (await sql.all<{ n: unknown }>('SELECT COUNT(*) AS n FROM clicks WHERE flow_id = ?', [flow]))[0]?.n,
      );

    it('a scheduled run deletes the clicks older than retention_days at the clock, keeps the rest and their conversions', async () => {
      // 12 clicks from 45 to 34 days old, 8 from 29 days to 1 hour old, one a millisecond on each side of the cut.
      const old = Array.from({ length: 12 }, (_, i) =>
        newClick({ flow_id: 'ret', at: NOW - (45 - i) * DAY }),
      );
      const young = Array.from({ length: 8 }, (_, i) =>
        newClick({ flow_id: 'ret', at: NOW - (29 - i) * DAY }),
      );
      const edgeOld = newClick({ flow_id: 'ret', at: NOW - 30 * DAY - 1 });
      const edgeKept = newClick({ flow_id: 'ret', at: NOW - 30 * DAY });
      await storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: null,
        rows: [...old, ...young, edgeOld, edgeKept],
      });
      const converted = old[0]!;
      const conv = await storage.conversions.upsert({
        click_id: converted.click_id,
        txid: 't1',
        status: 'sale',
        payout: 3,
        currency: 'USD',
      });
      assert.ok(conv);

      const telemetry = new Telemetry({
        clock,
        serverId: 'n1',
        version: undefined,
        commit: 'c',
        prefix: 'sluice',
        controllerBucketsMs: [1],
        httpBucketsMs: [1],
        taskBucketsMs: [10],
        isLeader: () => true,
        processMetrics: false,
      });
      const scheduler = new Scheduler({
        clock,
        logger: silent,
        telemetry,
        isLeader: () => true,
        epoch: () => 1,
      });
      scheduler.add({
        name: 'clicks_retention',
        kind: 'clicks.retention',
        schedule: new Schedule('0 17 * * * *'),
        scope: 'leader',
        enabled: true,
        timeoutMs: 60_000,
        run: clicksRetention({ clicks: storage.clicks, clock, retentionDays: 30, chunkRows: 5 }),
      });
      scheduler.start({ timers: false });
      clock.advance(17 * 60_000);
      const cut = clock.now() - 30 * DAY;
      assert.ok(cut > edgeKept.at && cut - 17 * 60_000 === edgeKept.at, 'the cut moved with the clock');
      const runs = scheduler.runDue();
      assert.equal(runs.length, 1);
      await runs[0];
      const item = scheduler.list()[0]!;
      assert.equal(item.runtime.last_error, null);
      assert.equal(item.runtime.runs, 1);
      // At the run, 30 days back is 17 minutes after edgeKept: it goes too; the 8 younger stay.
      assert.equal(await count('ret'), 8);
      for (const c of young) assert.ok(await storage.clicks.get(c.click_id), `${c.click_id} kept`);
      assert.equal(await storage.clicks.get(edgeOld.click_id), undefined);
      assert.equal((await storage.conversions.ofClick(converted.click_id)).length, 1, 'conversions stay');
      telemetry.stop();
      await scheduler.stop(0);
    });

    it('the run stops between chunks once its signal fires; the next run carries on', async () => {
      const rows = Array.from({ length: 30 }, (_, i) =>
        newClick({ flow_id: 'stop', at: NOW - 60 * DAY + i }),
      );
      await storage.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
      const run = clicksRetention({ clicks: storage.clicks, clock, retentionDays: 30, chunkRows: 10 });
      const ac = new AbortController();
      const ctx = { signal: ac.signal, log: silent, runId: 'r1', epoch: 1, fence: undefined } as TaskContext;
      // Aborted while the first chunk runs (a timeout, a step-down): that chunk completes, no other starts.
      const first = run(ctx);
      ac.abort();
      await first;
      assert.equal(await count('stop'), 20);
      await run({ ...ctx, signal: new AbortController().signal });
      assert.equal(await count('stop'), 0);
    });
  });
}
