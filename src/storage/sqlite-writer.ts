import { Worker } from 'node:worker_threads';
import { ApiError, type ErrorCode } from '../errors/index.ts';
import { TimeSlice } from '../time/index.ts';
import type { ClickWriter } from './clicks.ts';
import { packClicks, packedBuffers } from './packed-clicks.ts';
import type { QueryStats } from './query-stats.ts';
import type { Row, SqlReader } from './sql.ts';
import { type CheckpointStats, CheckpointTally } from './sqlite-checkpointer.ts';
import type { CheckpointReport } from './sqlite-wal-checkpoint.ts';
import type { BatchResult, ClickBatch, CounterBatch, NewClick, Sighting } from './types.ts';

/**
 * Items a message carries. Posting copies (structured clone) on the sending thread: 10,000 clicks
 * are ~8 ms of it in one call, 1,000 under 1 ms, with the event loop let go between messages.
 */
const ITEMS_PER_MESSAGE = 1000;
/**
 * How long after a thread stopped another is started when no batch comes first; doubled after each
 * thread that stops again (a file that cannot be opened), up to {@link RESTART_MAX_MS}.
 */
const RESTART_AFTER_MS = 1000;
/**
 * Messages of single statements go no more often than this: sending a message and receiving its
 * answer cost the main thread 30–50 µs whatever it carries (waking the other thread), more than
 * the rest of a postback's work; at 1,000 postbacks/s ten or so share one.
 */
const STATEMENTS_EVERY_MS = 10;
const RESTART_MAX_MS = 60_000;

/**
 * What the node sends the writer thread: array parts first, then the message that applies them
 * (`drop` forgets the parts of a message that will not come).
 */
export type WriterMessage =
  | { id: number; op: 'part'; key: string; items: unknown[] }
  | { id: number; op: 'drop' }
  /** A click batch whose `rows` came ahead as parts of `PackedClicks`. */
  | { id: number; op: 'clicks'; now: number; batch: ClickBatch }
  | { id: number; op: 'counters'; now: number; batch: CounterBatch }
  | { id: number; op: 'sightings'; now: number; batch: { server_id: string; rows: Sighting[] } }
  | { id: number; op: 'run'; now: number; sql: string; params: unknown[] }
  | { id: number; op: 'statements'; now: number; items: WriterStatement[] };

/** One statement of a `statements` message, answered with its rows. */
export interface WriterStatement {
  sql: string;
  params: unknown[];
}

/** What one statement of a `statements` message gave: its rows, or its own failure. */
export type WriterStatementAnswer = { rows: Row[] } | { error: WriterFailure };

/** A failure as it crosses threads: the error's own message and code, and its first cause's. */
export interface WriterFailure {
  message: string;
  code: ErrorCode | null;
  cause: { name: string; code: string | null; message: string } | null;
  unavailable: boolean;
}

export type WriterAnswer =
  | { id: number; result: unknown }
  | { id: number; error: WriterFailure }
  | { checkpoint: CheckpointReport };

export interface SqliteWriterOptions {
  path: string;
  stats: QueryStats;
  /** `storage.sqlite.cache_mb` for the writer's connection: the click log's index pages live there. */
  cacheMb?: number;
  busyTimeoutMs: number;
  walAutocheckpoint?: number;
  /**
   * Checkpoint the write-ahead log from the writer's connection this often (what
   * {@link SqliteCheckpointer}'s thread does otherwise: one thread, not two; each thread that runs
   * TypeScript loads its own copy of Node's type stripper, ~35 MB of RSS).
   */
  checkpointIntervalMs?: number;
}

interface QueuedStatement extends WriterStatement {
  resolve: (rows: Row[]) => void;
  reject: (e: Error) => void;
}

interface Pending {
  worker: Worker;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  start: number;
}

/**
 * The click log's and the counters' batches of a SQLite node, its click retention and its
 * postbacks' upserts ({@link statements}), applied on a thread of their own (#12). `node:sqlite` is synchronous: on the node's connection a batch's
 * inserts and, above all, its `COMMIT` (which writes every page the batch dirtied) held the event
 * loop — 32 ms for a counter flush of 10,000 streams, 207 ms for a 10,000-click batch into a log of
 * a million clicks (docs/PERFORMANCE.md), a retention chunk ~100 ms. Here a second read-write
 * connection to the same file runs the same code (`SqlClicks.insertBatch`, `addCounters`, under
 * their batch guards; retention's chunk statements), while the node's connection keeps everything
 * else. SQLite lets one connection write at a time: the node's connection does not sleep in
 * SQLite's busy handler while this one commits, its executor waits on a timer instead
 * (`SqliteExecutor`), so `/go` is answered meanwhile.
 *
 * Each message is timed as one query of the `db` section, from sending to the answer; one at a
 * time, in order. A thread that dies fails the messages it held with `db.unavailable` (the click
 * log and the counters keep their batches and retry them with the same batch id, so nothing is
 * written twice) and the next message starts a new thread. The thread never keeps the process
 * alive while idle.
 */
export class SqliteWriter implements ClickWriter {
  readonly #o: SqliteWriterOptions;
  #worker: Worker | undefined;
  #next = 0;
  readonly #pending = new Map<number, Pending>();
  readonly #inflight = new Set<Promise<unknown>>();
  readonly #checkpoints = new CheckpointTally();
  #restartMs = RESTART_AFTER_MS;
  #closed = false;
  /** Statements waiting for the next `statements` message, and the loop that sends them. */
  #statements: QueuedStatement[] = [];
  #sendingStatements: Promise<void> | undefined;
  #statementsSentAt = Number.NEGATIVE_INFINITY;

  constructor(options: SqliteWriterOptions) {
    this.#o = options;
  }

  /** What the writer's checkpoints have done (with `checkpointIntervalMs`). */
  checkpoints(): CheckpointStats {
    return this.#checkpoints.stats();
  }

  /**
   * Starts the thread now rather than on the first batch (~0.1 s), so that a node's first flush,
   * perhaps the last one of a graceful stop, does not wait for it.
   */
  start(): void {
    if (!this.#closed) this.#worker ??= this.#spawn();
  }

  /**
   * A click batch (`ClickWriter`), applied by `SqlClicks.insertBatch` on the thread. Its clicks
   * cross packed ({@link packClicks}), a part of {@link ITEMS_PER_MESSAGE} at a time.
   */
  insertBatch(batch: ClickBatch): Promise<BatchResult> {
    return this.#send({ op: 'clicks', now: this.#now(), batch }, ['rows'], packPart) as Promise<BatchResult>;
  }

  addCounters(batch: CounterBatch): Promise<boolean> {
    return this.#send({ op: 'counters', now: this.#now(), batch }, [
      'streams',
      'flows',
      'days',
    ]) as Promise<boolean>;
  }

  /** First sightings of visitors (`SqlSightings.add` on the thread); how many were added. */
  addSightings(serverId: string, rows: readonly Sighting[]): Promise<number> {
    return this.#send({ op: 'sightings', now: this.#now(), batch: { server_id: serverId, rows } }, [
      'rows',
    ]) as Promise<number>;
  }

  /** One statement on the writer's connection (a retention chunk); the rows it changed. */
  run(sql: string, params: readonly unknown[]): Promise<number> {
    return this.#send({ op: 'run', now: this.#now(), sql, params: [...params] }, []) as Promise<number>;
  }

  /**
   * One statement answered with its rows (a postback's conversion upsert), applied on the thread
   * so that its commit, a disk sync, never holds the event loop (0.3–0.6 ms a postback on the
   * node's connection: `/go`'s p99 rose from 2 to 62 ms under 1,000 postbacks/s). Statements go
   * in messages of many, one transaction each (one commit for all; see `sqlite-writer-worker.ts`
   * for a failure among them), at most one message every {@link STATEMENTS_EVERY_MS}: a lone
   * statement goes at once, those that follow within the window wait for its end. Each message is
   * timed as one query.
   */
  readonly statements: SqlReader = {
    all: <T = Row>(sql: string, params: readonly unknown[] = []) =>
      new Promise<T[]>((resolve, reject) => {
        this.#statements.push({ sql, params: [...params], resolve: resolve as (r: Row[]) => void, reject });
        this.#sendingStatements ??= this.#sendStatements();
      }),
  };

  async #sendStatements(): Promise<void> {
    while (this.#statements.length > 0) {
      const wait = this.#statementsSentAt + STATEMENTS_EVERY_MS - performance.now();
      // At least to the end of this turn of the event loop: those of the same turn go together.
      await new Promise<void>((r) => (wait > 0 ? setTimeout(r, wait) : setImmediate(r)));
      this.#statementsSentAt = performance.now();
      const items = this.#statements.splice(0, ITEMS_PER_MESSAGE);
      try {
        const answers = (await this.#send(
          { op: 'statements', now: this.#now(), items: items.map(({ sql, params }) => ({ sql, params })) },
          [],
        )) as WriterStatementAnswer[];
        for (const [i, a] of answers.entries()) {
          if ('rows' in a) items[i]!.resolve(a.rows);
          else items[i]!.reject(rebuilt(a.error));
        }
      } catch (err) {
        for (const item of items) item.reject(err instanceof Error ? err : new Error(String(err)));
      }
    }
    this.#sendingStatements = undefined;
  }

  /** The node's time, which the thread's batch guard uses (it has no clock of the node's own). */
  #now(): number {
    return this.#o.stats.clock.now();
  }

  #spawn(): Worker {
    // No inherited Node flags: some (e.g. --input-type) are refused for a worker, none are needed.
    const w = new Worker(new URL('./sqlite-writer-worker.ts', import.meta.url), {
      workerData: {
        path: this.#o.path,
        cacheMb: this.#o.cacheMb,
        busyTimeoutMs: this.#o.busyTimeoutMs,
        walAutocheckpoint: this.#o.walAutocheckpoint,
        checkpointIntervalMs: this.#o.checkpointIntervalMs,
        now: this.#now(),
      },
      execArgv: [],
      // The thread's name in /proc and profiles (the benchmarks read its CPU by it).
      name: 'sqlite-writer',
    });
    w.on('message', (m: WriterAnswer) => {
      if ('checkpoint' in m) {
        this.#checkpoints.record(m.checkpoint);
        if (!('error' in m.checkpoint)) this.#restartMs = RESTART_AFTER_MS;
        return;
      }
      const p = this.#pending.get(m.id);
      if (p === undefined) return;
      this.#settled(m.id, p);
      if ('result' in m) {
        this.#o.stats.ok(p.start);
        p.resolve(m.result);
        return;
      }
      const err = rebuilt(m.error);
      this.#o.stats.failed(p.start, err, m.error.unavailable);
      p.reject(err);
    });
    w.on('error', (err: unknown) => this.#fail(w, err instanceof Error ? err : new Error(String(err))));
    w.on('exit', () => this.#fail(w, new Error('the SQLite writer thread stopped')));
    w.unref();
    return w;
  }

  /** Forgets a message; its thread is let go when it holds nothing more. */
  #settled(id: number, p: Pending): void {
    this.#pending.delete(id);
    for (const other of this.#pending.values()) if (other.worker === p.worker) return;
    p.worker.unref();
  }

  /** A thread that failed or stopped: its messages fail, and the next message starts another. */
  #fail(w: Worker, err: Error): void {
    if (this.#worker === w) {
      this.#worker = undefined;
      if (this.#o.checkpointIntervalMs !== undefined && !this.#closed) {
        // The checkpoints stopped with the thread: a new one, without waiting for the next batch.
        this.#checkpoints.failed(err.message);
        setTimeout(() => this.start(), this.#restartMs).unref();
        this.#restartMs = Math.min(this.#restartMs * 2, RESTART_MAX_MS);
      }
    }
    const failed = new ApiError('db.unavailable', err.message, { cause: err });
    for (const [id, p] of this.#pending) {
      if (p.worker !== w) continue;
      this.#pending.delete(id);
      this.#o.stats.failed(p.start, failed, true);
      p.reject(failed);
    }
  }

  /**
   * Sends a message, its `arrays` (fields of its batch) ahead in parts when long; with `pack`,
   * every part of them is packed (and sent as a part, however short the array).
   */
  async #send(
    message: Record<string, unknown>,
    arrays: readonly string[],
    pack?: (items: unknown[]) => { item: unknown; transfer: ArrayBuffer[] },
  ): Promise<unknown> {
    if (this.#closed) throw new ApiError('db.unavailable', 'the SQLite writer is closed');
    this.start();
    const w = this.#worker!;
    w.ref();
    const id = ++this.#next;
    const start = this.#o.stats.clock.monotonic();
    const pending = { worker: w, start } as Pending;
    const done = new Promise<unknown>((resolve, reject) => {
      pending.resolve = resolve;
      pending.reject = reject;
    });
    this.#pending.set(id, pending);
    this.#inflight.add(done);
    const settled = () => this.#inflight.delete(done);
    done.then(settled, settled);
    try {
      const batch = message.batch as Record<string, unknown> | undefined;
      const head = batch === undefined ? message : { ...message, batch: { ...batch } };
      const slice = new TimeSlice();
      for (const key of arrays) {
        const items = batch?.[key] as unknown[] | undefined;
        if (items === undefined || (pack === undefined && items.length <= ITEMS_PER_MESSAGE)) continue;
        for (let i = 0; i < items.length; i += ITEMS_PER_MESSAGE) {
          const part = items.slice(i, i + ITEMS_PER_MESSAGE);
          if (pack === undefined) {
            w.postMessage({ id, op: 'part', key, items: part } satisfies WriterMessage);
          } else {
            const { item, transfer } = pack(part);
            w.postMessage({ id, op: 'part', key, items: [item] } satisfies WriterMessage, transfer);
          }
          await slice.pause();
        }
        (head.batch as Record<string, unknown>)[key] = [];
      }
      w.postMessage({ ...head, id });
    } catch (err) {
      // A value that cannot be copied to the thread (a programming error: clicks and counters are
      // plain data). The thread forgets the parts it was sent; the caller gets the error.
      if (this.#pending.get(id) === pending) {
        this.#settled(id, pending);
        this.#o.stats.failed(start, err, false);
        pending.resolve(undefined);
        w.postMessage({ id, op: 'drop' } satisfies WriterMessage);
      }
      throw err;
    }
    return done;
  }

  /**
   * Waits for the messages under way (a graceful stop's last flush among them), then closes the
   * writer's connection and stops the thread; ends it after `timeoutMs` if it does not stop.
   */
  async close(timeoutMs = 5000): Promise<void> {
    await this.#sendingStatements;
    this.#closed = true;
    await Promise.allSettled(this.#inflight);
    const w = this.#worker;
    this.#worker = undefined;
    if (w === undefined) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => void w.terminate(), timeoutMs);
      w.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      w.postMessage('close');
    });
  }
}

function packPart(items: unknown[]): { item: unknown; transfer: ArrayBuffer[] } {
  const packed = packClicks(items as NewClick[]);
  return { item: packed, transfer: packedBuffers(packed) };
}

/** The thread's failure as this thread's error: the same code and message, and the same first cause. */
function rebuilt(f: WriterFailure): Error {
  let opts = {};
  if (f.cause !== null) {
    const cause = Object.assign(new Error(f.cause.message), { name: f.cause.name });
    if (f.cause.code !== null) Object.assign(cause, { code: f.cause.code });
    opts = { cause };
  }
  return f.code !== null ? new ApiError(f.code, f.message, opts) : new Error(f.message, opts);
}
