import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ApiError } from '../../src/errors/index.ts';
import { newBatchId, openSqlite, type Storage } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';

const STORAGE = resolve(import.meta.dirname, '../../src/storage/index.ts');

// What the stores do through the writer is covered by the click and counter storage tests, which
// run on a third backend case, "sqlite (writer thread)". Here: what is the writer's own.
describe('the SQLite writer thread (#12)', () => {
  let dir: string;
  let path: string;
  let storage: Storage;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-writer-'));
    path = join(dir, 'w.db');
    storage = openSqlite(path, systemClock, { writeThread: true });
    await storage.migrate();
  });
  after(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a refused batch keeps its error code, each batch is one query of the db section', async () => {
    const { queries, errors } = storage.stats();
    const batch = {
      id: newBatchId(),
      server_id: null,
      rows: [newClick({ device_type: 'toaster' as never })],
    };
    await assert.rejects(
      storage.clicks.insertBatch(batch),
      (err) => err instanceof ApiError && err.code === 'resource.conflict',
    );
    const ok = { id: newBatchId(), server_id: 'n1', rows: [newClick(), newClick()] };
    assert.deepEqual(await storage.clicks.insertBatch(ok), { applied: true, rows: 2 });
    const db = storage.stats();
    assert.equal(db.queries - queries, 2);
    assert.equal(db.errors - errors, 1, 'the refused one counted as an error');
    assert.equal(db.status, 'up', 'a refused batch is not the database down');
  });

  test('closing waits for the batches under way: a stop persists what was sent', async () => {
    const other = openSqlite(path, systemClock, { writeThread: true });
    const rows = Array.from({ length: 2500 }, () => newClick({ flow_id: 'closing' }));
    const sent = other.clicks.insertBatch({ id: newBatchId(), server_id: null, rows });
    await other.close();
    assert.deepEqual(await sent, { applied: true, rows: 2500 });
    const page = await storage.clicks.list({ filter: { flow_id: 'closing' }, limit: 1 });
    assert.equal(page.total, 2500);
    await assert.rejects(
      other.clicks.insertBatch({ id: newBatchId(), server_id: null, rows: [newClick()] }),
      (err) => err instanceof ApiError && err.code === 'db.unavailable',
      'a closed writer takes no more batches',
    );
  });

  test('an idle writer does not keep the process alive; a batch under way does', async () => {
    // A script whose only pending work is a batch on the writer thread: it must finish the batch
    // (and print it) before exiting, then exit on its own with the writer idle.
    const script = `
      import { openSqlite, newBatchId } from ${JSON.stringify(STORAGE)};
      const s = openSqlite(${JSON.stringify(path)}, { now: () => Date.now(), monotonic: () => performance.now() }, { writeThread: true });
      const r = await s.addCounters({ id: newBatchId(), streams: [], flows: [] });
      console.log('applied', r);
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      timeout: 20_000,
    });
    assert.equal(stdout.trim(), 'applied true');
  });
});
