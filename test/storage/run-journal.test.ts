import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { JOURNAL_KEEP_MS, PRUNE_EVERY_RUNS } from '../../src/storage/cluster-store.ts';
import { ManualClock } from '../../src/time/index.ts';
import { BACKENDS, type Opened, storeSuite } from './backends.ts';

for (const backend of BACKENDS) {
  describe(`the run journal trims itself (${backend.name})`, async () => {
    const clock = new ManualClock(Date.now());
    let db: Opened;
    const { available } = await storeSuite(backend, {
      clock,
      onOpen: (x) => {
        db = x;
      },
    });
    const skip = !available && 'PostgreSQL unavailable';

    test('every 100th finished run drops the runs older than a week, with no caller asking', {
      skip,
    }, async () => {
      const cluster = db.storage.cluster;
      const run = async (id: string) => {
        await cluster.startRun({ run_id: id, task: 'journal', server_id: 'n1', epoch: 1 }, undefined);
        await cluster.finishRun(id, null, undefined);
      };
      await run('old');
      clock.advance(JOURNAL_KEEP_MS + 86_400_000);
      for (let i = 2; i < PRUNE_EVERY_RUNS; i++) await run(`new-${i}`);
      assert.ok(
        (await cluster.runs('journal')).some((r) => r.run_id === 'old'),
        'kept until the 100th run',
      );
      await run(`new-${PRUNE_EVERY_RUNS}`);
      assert.ok(!(await cluster.runs('journal')).some((r) => r.run_id === 'old'), 'trimmed at the 100th');
    });
  });
}
