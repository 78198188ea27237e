import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ApiError, describeCause, hasCode } from '../../src/errors/index.ts';
import { newBatchId, openSqlite, type Storage } from '../../src/storage/index.ts';
import { QueryStats } from '../../src/storage/query-stats.ts';
import { SqliteWriter } from '../../src/storage/sqlite-writer.ts';
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

  test('a refused batch keeps its error code and message, each batch is one query of the db section', async () => {
    const { queries, errors } = storage.stats();
    const batch = {
      id: newBatchId(),
      server_id: null,
      rows: [newClick({ device_type: 'toaster' as never })],
    };
    await assert.rejects(storage.clicks.insertBatch(batch), (err) => {
      assert.ok(err instanceof ApiError && err.code === 'resource.conflict');
      // As the node's own connection words it; SQLite's reason is the cause, not the message.
      assert.equal(err.message, new ApiError('resource.conflict').message);
      assert.match(describeCause(err.cause), /CHECK constraint failed/);
      return true;
    });
    const ok = { id: newBatchId(), server_id: 'n1', rows: [newClick(), newClick()] };
    assert.deepEqual(await storage.clicks.insertBatch(ok), { applied: true, rows: 2 });
    const db = storage.stats();
    assert.equal(db.queries - queries, 2);
    assert.equal(db.errors - errors, 1, 'the refused one counted as an error');
    assert.equal(db.status, 'up', 'a refused batch is not the database down');
    assert.doesNotMatch(
      db.last_error ?? '',
      /ApiError \[resource\.conflict\]: ApiError/,
      'the cause is not repeated',
    );
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

  test('a thread that cannot open the file fails its batch; the next starts a new thread, and a retry writes once', async () => {
    const base = mkdtempSync(join(tmpdir(), 'sluice-writer-gone-'));
    const real = join(base, 'real');
    const file = join(real, 'w.db');
    const s = openSqlite(file, systemClock);
    await s.migrate();
    await s.close();
    const hidden = join(base, 'hidden');
    renameSync(real, hidden);
    const stats = new QueryStats(systemClock);
    const writer = new SqliteWriter({ path: file, stats, busyTimeoutMs: 1000 });
    try {
      const first = { id: newBatchId(), server_id: null, rows: [newClick({ click_id: 'first' })] };
      const second = { id: newBatchId(), server_id: null, rows: [newClick({ click_id: 'second' })] };
      await assert.rejects(
        writer.insertBatch(first),
        (err) => err instanceof ApiError && err.code === 'db.unavailable',
      );
      assert.equal(stats.up, false);
      renameSync(hidden, real);
      // Sent while the failed thread may still be exiting: its exit must not fail this batch.
      assert.deepEqual(await writer.insertBatch(second), { applied: true, rows: 1 });
      assert.deepEqual(await writer.insertBatch(first), { applied: true, rows: 1 });
      assert.deepEqual(await writer.insertBatch(first), { applied: false, rows: 0 });
      const raw = new DatabaseSync(file);
      const rows = raw.prepare('SELECT click_id FROM clicks ORDER BY click_id').all() as {
        click_id: string;
      }[];
      raw.close();
      assert.deepEqual(
        rows.map((r) => r.click_id),
        ['first', 'second'],
      );
    } finally {
      await writer.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  test('a batch that cannot be copied to the thread fails here and is counted; the thread goes on', async () => {
    const stats = new QueryStats(systemClock);
    const writer = new SqliteWriter({ path, stats, busyTimeoutMs: 1000 });
    try {
      // Clicks cross packed (only their fields are read); counters are copied as they are.
      const streams = Array.from({ length: 1500 }, (_, i) => ({
        id: `s-uncopyable-${i}`,
        hits: 1,
        last_hit_at: '2026-01-01T00:00:00.000Z',
      }));
      // In the second part: the first has already gone to the thread.
      (streams[1200] as unknown as { extra: unknown }).extra = () => {};
      await assert.rejects(writer.addCounters({ id: newBatchId(), streams, flows: [] }), {
        name: 'DataCloneError',
      });
      assert.equal(stats.recorder.errors, 1);
      // The thread goes on with the next batch, and closing does not wait for the failed one.
      const ok = { id: newBatchId(), server_id: null, rows: [newClick({ flow_id: 'uncopyable' })] };
      assert.deepEqual(await writer.insertBatch(ok), { applied: true, rows: 1 });
    } finally {
      await writer.close();
    }
    const page = await storage.clicks.list({ filter: { flow_id: 'uncopyable' }, limit: 5 });
    assert.equal(page.total, 1);
  });

  test('statements sent at once go in one message and one transaction; one that fails answers alone, the others apply', async () => {
    const stats = new QueryStats(systemClock);
    const writer = new SqliteWriter({ path, stats, busyTimeoutMs: 1000 });
    try {
      const put = (name: string) =>
        writer.statements.all(
          'INSERT INTO deployment_secrets (name, value, created_at) VALUES (?, ?, ?) RETURNING name',
          [name, 'v', '2026-01-01T00:00:00.000Z'],
        );
      await put('stmt-taken');
      const before = stats.recorder.count;
      const answers = await Promise.allSettled([put('stmt-a'), put('stmt-taken'), put('stmt-b')]);
      assert.deepEqual(answers[0], { status: 'fulfilled', value: [{ name: 'stmt-a' }] });
      assert.equal(answers[1]!.status, 'rejected');
      assert.ok(
        hasCode((answers[1] as PromiseRejectedResult).reason, 'resource.conflict'),
        'the duplicate keeps its own error',
      );
      assert.deepEqual(answers[2], { status: 'fulfilled', value: [{ name: 'stmt-b' }] });
      assert.equal(stats.recorder.count - before, 1, 'one message for the three');
    } finally {
      await writer.close();
    }
    const raw = new DatabaseSync(path, { readOnly: true });
    try {
      const names = raw
        .prepare("SELECT name FROM deployment_secrets WHERE name LIKE 'stmt-%' ORDER BY name")
        .all()
        .map((r) => r.name);
      assert.deepEqual(names, ['stmt-a', 'stmt-b', 'stmt-taken'], 'applied once each');
    } finally {
      raw.close();
    }
  });
});
