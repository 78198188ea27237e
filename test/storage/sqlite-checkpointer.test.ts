import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { endianness, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { newBatchId, openSqlite } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';
import { until } from '../helpers/until.ts';

const STORAGE = resolve(import.meta.dirname, '../../src/storage/index.ts');
/** Enough clicks to pass SQLite's own checkpoint point (1,000 log pages of 4 KiB) in one batch. */
const CLICKS = 20_000;

/**
 * Pages in the log and pages of it already copied into the database, from the header of the
 * write-ahead log index (the `-shm` file, SQLite's walformat: `mxFrame` at byte 16, `nBackfill`
 * at byte 96, native byte order).
 */
function walIndex(path: string): { frames: number; backfilled: number } {
  const shm = readFileSync(`${path}-shm`).subarray(0, 136);
  const le = endianness() === 'LE';
  const u32 = (at: number) => (le ? shm.readUInt32LE(at) : shm.readUInt32BE(at));
  return { frames: u32(16), backfilled: u32(96) };
}

/** Runs `fn` with the path of a database in a temp dir of its own, removed afterwards. */
async function withDatabase(fn: (path: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-checkpoint-'));
  try {
    await fn(join(dir, 's.db'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The clicks in the file, read by a connection of its own. */
function storedClicks(path: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Number((db.prepare('SELECT count(*) AS n FROM clicks').get() as { n: number }).n);
  } finally {
    db.close();
  }
}

const clicks = (n: number) =>
  Array.from({ length: n }, (_, i) => newClick({ click_id: `k${String(i).padStart(9, '0')}` }));

describe('the SQLite checkpoint thread (#12)', () => {
  for (const writeThread of [false, true]) {
    const where = writeThread ? "the writer thread's connection" : 'the checkpoint thread';
    test(`a node's log goes back into the database from ${where}, not from the node's commits`, async () => {
      await withDatabase(async (path) => {
        // Checkpoints come every 5 s: the first after the batch below is written.
        const s = openSqlite(path, systemClock, {
          checkpointThread: true,
          checkpointIntervalMs: 5000,
          writeThread,
        });
        await s.migrate();
        await s.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows: clicks(CLICKS) });
        // SQLite's default would have checkpointed inside that commit (the log is past 1,000
        // pages); the committing connection left the whole log for the checkpoints (unless one ran
        // meanwhile).
        const log = walIndex(path);
        const ran = s.stats().checkpoints!.runs > 0;
        assert.ok(log.frames > 1000, `${log.frames} pages in the log after the batch`);
        if (!ran) assert.equal(log.backfilled, 0, 'pages copied into the database by the commit');
        // The file shows the checkpoint before the thread's report of it reaches this thread: the
        // test waits for both, or it would race the report (it did, once in CI on a busy machine).
        await until(
          'a checkpoint, and its report',
          () => walIndex(path).backfilled === walIndex(path).frames && s.stats().checkpoints!.runs > 0,
          15_000,
          50,
        );
        const cp = s.stats().checkpoints!;
        assert.equal(cp.failures, 0, cp.last_error ?? '');
        await s.close();
        assert.equal(storedClicks(path), CLICKS, 'everything is in the file');
      });
    });
  }

  test("on the writer thread's connection, checkpoints wait for its batches rather than fail inside them", async () => {
    await withDatabase(async (path) => {
      // Checkpoints due every 20 ms while batches that take far longer (their transactions let the
      // thread's event loop turn) keep coming: each must run between two batches.
      const s = openSqlite(path, systemClock, {
        checkpointThread: true,
        checkpointIntervalMs: 20,
        writeThread: true,
      });
      await s.migrate();
      for (let b = 0; b < 4; b++) {
        const rows = Array.from({ length: 5000 }, (_, i) =>
          newClick({ click_id: `b${b}-${String(i).padStart(6, '0')}` }),
        );
        await s.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows });
      }
      await until('a checkpoint after the batches', () => s.stats().checkpoints!.runs > 0, 15_000, 20);
      const cp = s.stats().checkpoints!;
      assert.equal(cp.failures, 0, cp.last_error ?? '');
      await s.close();
      assert.equal(storedClicks(path), 20_000);
    });
  });

  test('storage for a one-off command has no thread, and SQLite checkpoints as usual', async () => {
    await withDatabase(async (path) => {
      const s = openSqlite(path, systemClock);
      await s.migrate();
      assert.equal(s.stats().checkpoints, null);
      await s.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows: clicks(CLICKS) });
      await s.close();
      assert.equal(storedClicks(path), CLICKS);
    });
  });

  test('the thread never keeps a process alive', async () => {
    await withDatabase(async (path) => {
      // Opened with the thread and never closed: the script must still end by itself.
      const script = `
        import { openSqlite } from ${JSON.stringify(STORAGE)};
        const s = openSqlite(${JSON.stringify(path)}, { now: () => Date.now(), monotonic: () => performance.now() }, { checkpointThread: true });
        await s.migrate();
        console.log('migrated');
      `;
      const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        timeout: 20_000,
      });
      assert.equal(stdout.trim(), 'migrated');
    });
  });
});
