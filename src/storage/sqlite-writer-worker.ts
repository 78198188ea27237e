/**
 * The worker side of {@link SqliteWriter}: a second read-write connection to the node's SQLite file
 * that applies click and counter batches and visitors' first sightings with the same code the node's
 * own connection would use (`SqlClicks.insertBatch`, `addCounters`, each under its batch guard;
 * `SqlSightings.add`) and runs single statements (retention's chunks) and statements that answer
 * with rows (postbacks' upserts, several in one transaction). Large arrays arrive in parts before
 * the message that applies them (see `sqlite-writer.ts`); answers are `{id, result}` or `{id, error}`.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { ApiError, hasCode } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import { BatchGuard } from './batch-guard.ts';
import { SqlClicks } from './clicks.ts';
import { addCounters } from './counters.ts';
import { type PackedClicks, unpackClicks } from './packed-clicks.ts';
import type { QueryTimer } from './query-stats.ts';
import { SqlSightings } from './sightings.ts';
import { SqliteExecutor } from './sqlite-executor.ts';
import { checkpointEvery } from './sqlite-wal-checkpoint.ts';
import type {
  WriterAnswer,
  WriterFailure,
  WriterMessage,
  WriterStatement,
  WriterStatementAnswer,
} from './sqlite-writer.ts';
import type { ClickBatch, CounterBatch } from './types.ts';

const {
  path,
  cacheMb,
  busyTimeoutMs,
  walAutocheckpoint,
  checkpointIntervalMs,
  now: startedAt,
} = workerData as {
  path: string;
  cacheMb: number | undefined;
  busyTimeoutMs: number;
  walAutocheckpoint: number | undefined;
  checkpointIntervalMs: number | undefined;
  now: number;
};

const db = new DatabaseSync(path);
// Another connection's lock is waited for on this thread's timers (the executor's busy wait), never
// in SQLite's busy handler: a thread asleep inside SQLite cannot be ended, and `process.exit` waits
// for every worker thread to end, so a stop forced at its deadline waited up to the busy timeout
// for this one (another process holding the database's write lock).
db.exec('PRAGMA busy_timeout = 0; PRAGMA foreign_keys = ON;');
if (cacheMb !== undefined) db.exec(`PRAGMA cache_size = ${-Math.floor(cacheMb) * 1024}`);
if (walAutocheckpoint !== undefined) db.exec(`PRAGMA wal_autocheckpoint = ${walAutocheckpoint}`);

// Time is the node's: each message carries its clock's reading (guard rows, their pruning).
let now = startedAt;
const clock: Clock = { now: () => now, monotonic: () => performance.now() };
// The node times each message as one query; the statements here are not timed twice (and the
// telemetry package, with pino and prom-client, stays out of this thread: ~40 MB of RSS).
const untimed: QueryTimer = { clock, ok: () => {}, failed: () => {} };
const exec = new SqliteExecutor(db, untimed, { busyWaitMs: busyTimeoutMs });
const guard = new BatchGuard(exec, clock);
const clicks = new SqlClicks(exec, guard);
const sightings = new SqlSightings(exec);

/** Arrays sent ahead of the message that applies them, by message id and field. */
const parts = new Map<number, Map<string, unknown[]>>();

function withParts<T extends object>(id: number, head: T): T {
  const mine = parts.get(id);
  if (mine === undefined) return head;
  parts.delete(id);
  const out = { ...head } as Record<string, unknown>;
  for (const [key, items] of mine) out[key] = [...items, ...((out[key] as unknown[] | undefined) ?? [])];
  return out as T;
}

async function apply(m: Extract<WriterMessage, { now: number }>): Promise<unknown> {
  now = m.now;
  if (m.op === 'clicks') {
    const batch = withParts<ClickBatch>(m.id, m.batch);
    const packed = batch.rows as unknown as PackedClicks[];
    return clicks.insertBatch({ ...batch, rows: packed.flatMap(unpackClicks) });
  }
  if (m.op === 'counters') return addCounters(guard, withParts<CounterBatch>(m.id, m.batch));
  if (m.op === 'sightings') {
    const { server_id, rows } = withParts(m.id, m.batch);
    return sightings.add(server_id, rows);
  }
  if (m.op === 'statements') return statements(m.items);
  return exec.run(m.sql, m.params);
}

/**
 * Statements sent together (postbacks' upserts), in one transaction: one commit, one disk sync for
 * all. When one fails, the transaction is rolled back and each is run again on its own, so that
 * each answers for itself (the others are applied, the failing one gets its own error).
 */
async function statements(items: readonly WriterStatement[]): Promise<WriterStatementAnswer[]> {
  if (items.length > 1) {
    try {
      return await exec.transaction(async (tx) => {
        const out: WriterStatementAnswer[] = [];
        for (const it of items) out.push({ rows: await tx.all(it.sql, it.params) });
        return out;
      });
    } catch {}
  }
  const out: WriterStatementAnswer[] = [];
  for (const it of items) {
    try {
      out.push({ rows: await exec.all(it.sql, it.params) });
    } catch (err) {
      out.push({ error: failure(err) });
    }
  }
  return out;
}

/** The first cause as it would read on the node's own connection: its name, code and message. */
function causeOf(cause: unknown): WriterFailure['cause'] {
  if (cause === undefined || cause === null) return null;
  if (!(cause instanceof Error)) return { name: 'Error', code: null, message: String(cause) };
  const code = (cause as { code?: unknown }).code;
  return { name: cause.name, code: typeof code === 'string' ? code : null, message: cause.message };
}

function failure(err: unknown): WriterFailure {
  const e = err instanceof Error ? err : new Error(String(err));
  return {
    message: e.message,
    code: err instanceof ApiError ? err.code : null,
    cause: causeOf(e.cause),
    unavailable: hasCode(err, 'db.unavailable'),
  };
}

const answer = (a: WriterAnswer) => parentPort!.postMessage(a);

// One batch at a time, in the order sent: the node's connection and this one take turns anyway.
let queue: Promise<void> = Promise.resolve();

// What the checkpoint thread does for a node without this one, queued between batches: a batch's
// transaction lets the event loop turn, and a checkpoint inside it would fail.
const checkpoints =
  checkpointIntervalMs === undefined
    ? undefined
    : checkpointEvery(
        db,
        checkpointIntervalMs,
        (r) => parentPort!.postMessage({ checkpoint: r } satisfies WriterAnswer),
        (run) => {
          queue = queue.then(run);
        },
      );

parentPort!.on('message', (m: WriterMessage | 'close') => {
  if (m === 'close') {
    queue = queue.then(() => {
      checkpoints?.stop();
      checkpoints?.run();
      if (db.isOpen) db.close();
      parentPort!.close();
    });
    return;
  }
  if (m.op === 'drop') {
    parts.delete(m.id);
    return;
  }
  if (m.op === 'part') {
    const mine = parts.get(m.id) ?? new Map<string, unknown[]>();
    parts.set(m.id, mine);
    const list = mine.get(m.key) ?? [];
    mine.set(m.key, list);
    for (const item of m.items) list.push(item);
    return;
  }
  queue = queue.then(async () => {
    try {
      answer({ id: m.id, result: await apply(m) });
    } catch (err) {
      parts.delete(m.id);
      answer({ id: m.id, error: failure(err) });
    }
  });
});
