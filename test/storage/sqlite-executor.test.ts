import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import { QueryStats } from '../../src/storage/query-stats.ts';
import { SqliteExecutor } from '../../src/storage/sqlite-executor.ts';
import { systemClock } from '../../src/time/index.ts';

describe("SQLite executor: waiting for another connection's lock", () => {
  let dir: string;
  let db: DatabaseSync;
  let other: DatabaseSync;
  let stats: QueryStats;
  let exec: SqliteExecutor;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-busy-'));
    const path = join(dir, 'busy.db');
    db = new DatabaseSync(path);
    // As a node with a writer thread opens its connection: no busy timeout of SQLite's own.
    db.exec('PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 0; CREATE TABLE t (n INTEGER)');
    other = new DatabaseSync(path);
    other.exec('PRAGMA busy_timeout = 0');
    stats = new QueryStats(systemClock);
    exec = new SqliteExecutor(db, stats, { busyWaitMs: 2000 });
  });
  after(() => {
    if (other.isTransaction) other.exec('ROLLBACK');
    other.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a write waits on a timer while another connection holds the lock, then goes through', async () => {
    other.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (1)');
    const errorsBefore = stats.recorder.errors;
    const write = exec.run('INSERT INTO t VALUES (2)');
    const transaction = exec.transaction(async (tx) => tx.run('INSERT INTO t VALUES (3)'));
    // Released from a later event-loop turn: a statement sleeping in SQLite's busy handler would
    // hold the loop and never see it (the test would time out); one that does not wait at all
    // would fail at once.
    const release = new Promise<void>((resolve) => {
      let turns = 0;
      const wait = () => {
        if (++turns < 50) {
          setImmediate(wait);
          return;
        }
        other.exec('COMMIT');
        resolve();
      };
      setImmediate(wait);
    });
    await Promise.all([write, transaction, release]);
    const rows = db.prepare('SELECT n FROM t ORDER BY n').all() as { n: number }[];
    assert.deepEqual(
      rows.map((r) => r.n),
      [1, 2, 3],
    );
    assert.equal(stats.up, true, 'waiting is not a failure: the database stays up');
    assert.equal(stats.recorder.errors, errorsBefore, 'nor counted as an error');
  });

  test('a write that waited does not land inside a transaction that began meanwhile', async () => {
    other.exec('BEGIN IMMEDIATE');
    const lone = exec.run('INSERT INTO t VALUES (10)');
    await new Promise((r) => setTimeout(r, 5));
    other.exec('COMMIT');
    // Before the lone write's next try, a transaction of the same connection takes the lock,
    // awaits a timer, and fails: its rollback must not take the lone write with it.
    const failed = exec
      .transaction(async (tx) => {
        await tx.run('INSERT INTO t VALUES (11)');
        await new Promise((r) => setTimeout(r, 50));
        throw new Error('rolled back');
      })
      .catch((err: Error) => err.message);
    assert.equal(await lone, 1);
    assert.equal(await failed, 'rolled back');
    const rows = db.prepare('SELECT n FROM t WHERE n >= 10 ORDER BY n').all() as { n: number }[];
    assert.deepEqual(
      rows.map((r) => r.n),
      [10],
    );
  });

  test('a read does not queue behind a transaction whose BEGIN waits for the lock', async () => {
    other.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (20)');
    try {
      const waiting = exec.transaction(async (tx) => tx.run('INSERT INTO t VALUES (21)'));
      const second = exec.transaction(async (tx) => tx.run('INSERT INTO t VALUES (22)'));
      // The lock is still held: a read queued behind the waiting BEGIN would resolve only once that
      // BEGIN gave up (busyWaitMs), failing its transaction.
      const [row] = await exec.all<{ n: number }>('SELECT COUNT(*) AS n FROM t WHERE n >= 20');
      assert.equal(row!.n, 0, 'the other connection has not committed');
      assert.equal(other.isTransaction, true);
      other.exec('COMMIT');
      // Transactions still take their turn: neither BEGIN lands inside the other's transaction.
      assert.deepEqual(await Promise.all([waiting, second]), [1, 1]);
    } finally {
      if (other.isTransaction) other.exec('ROLLBACK');
    }
    const rows = db.prepare('SELECT n FROM t WHERE n >= 20 ORDER BY n').all() as { n: number }[];
    assert.deepEqual(
      rows.map((r) => r.n),
      [20, 21, 22],
    );
  });

  test('a database that cannot be written now (read-only) is db.unavailable, not a refused statement', async () => {
    // SQLITE_READONLY (8): a file or folder the node may no longer write. Such a write may go
    // through later as it is, so the click log keeps its batch instead of giving it up.
    db.exec('PRAGMA query_only = ON');
    try {
      await assert.rejects(exec.run('INSERT INTO t VALUES (6)'), (err) => {
        assert.ok(err instanceof ApiError && err.code === 'db.unavailable', String(err));
        assert.equal(((err as ApiError).cause as { errcode?: number }).errcode, 8);
        return true;
      });
    } finally {
      db.exec('PRAGMA query_only = OFF');
    }
  });

  test('a wait longer than busyWaitMs fails as db.unavailable, and reads never wait', async () => {
    const short = new SqliteExecutor(db, new QueryStats(systemClock), { busyWaitMs: 50 });
    const committed = (db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n;
    other.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (4)');
    try {
      // WAL: a reader sees the last commit while the other connection writes.
      assert.equal((await short.all<{ n: number }>('SELECT COUNT(*) AS n FROM t'))[0]!.n, committed);
      const started = performance.now();
      await assert.rejects(
        short.run('INSERT INTO t VALUES (5)'),
        (err) => err instanceof ApiError && err.code === 'db.unavailable',
      );
      assert.ok(performance.now() - started >= 50, 'it waited the whole busyWaitMs before giving up');
    } finally {
      other.exec('ROLLBACK');
    }
  });
});
