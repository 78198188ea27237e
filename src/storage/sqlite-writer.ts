import { Worker } from 'node:worker_threads';
import { ApiError, type ErrorCode } from '../errors/index.ts';
import { TimeSlice } from '../time/index.ts';
import type { QueryStats } from './query-stats.ts';
import type { BatchResult, ClickBatch, CounterBatch } from './types.ts';

/**
 * Items a message carries. Posting copies (structured clone) on the sending thread: 10,000 clicks
 * are ~8 ms of it in one call, 1,000 under 1 ms, with the event loop let go between messages.
 */
const ITEMS_PER_MESSAGE = 1000;

/** What the node sends the writer thread: array parts first, then the batch that applies them. */
export type WriterMessage =
  | { id: number; op: 'part'; key: string; items: unknown[] }
  | { id: number; op: 'clicks'; now: number; batch: ClickBatch }
  | { id: number; op: 'counters'; now: number; batch: CounterBatch };

export type WriterAnswer =
  | { id: number; result: unknown }
  | { id: number; error: { message: string; code: ErrorCode | null; unavailable: boolean } };

export interface SqliteWriterOptions {
  path: string;
  stats: QueryStats;
  /** `storage.sqlite.cache_mb` for the writer's connection: the click log's index pages live there. */
  cacheMb?: number;
  busyTimeoutMs: number;
  walAutocheckpoint?: number;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  start: number;
}

/**
 * The click log's and the counters' batches of a SQLite node, applied on a thread of their own
 * (#12). `node:sqlite` is synchronous: on the node's connection a batch's inserts and, above all,
 * its `COMMIT` (which writes every page the batch dirtied) held the event loop — 39–56 ms for a
 * counter flush of 10,000 streams, and a click batch on a log of a million clicks ~1 s of CPU for
 * 10,000 clicks, half of it in one `COMMIT` call. Here a second read-write connection to the same
 * file applies them with the same code (`SqlClicks.insertBatch`, `addCounters`, under their batch
 * guards), while the node's connection keeps everything else. SQLite lets one connection write at
 * a time: the node's connection does not sleep in SQLite's busy handler while this one commits,
 * its executor waits on a timer instead (`SqliteExecutor`), so `/go` is answered meanwhile.
 *
 * Each batch is timed as one query of the `db` section, from sending to the answer. Started on the
 * first batch; one batch at a time, in order; a thread that dies fails its batches with
 * `db.unavailable` (the click log and the counters keep them and retry with the same batch id,
 * so nothing is written twice) and the next batch starts a new one.
 */
export class SqliteWriter {
  readonly #o: SqliteWriterOptions;
  #worker: Worker | undefined;
  #next = 0;
  readonly #pending = new Map<number, Pending>();
  readonly #inflight = new Set<Promise<unknown>>();
  #closed = false;

  constructor(options: SqliteWriterOptions) {
    this.#o = options;
  }

  insertClicks(batch: ClickBatch, now: number): Promise<BatchResult> {
    return this.#send('clicks', batch, now, ['rows']) as Promise<BatchResult>;
  }

  addCounters(batch: CounterBatch, now: number): Promise<boolean> {
    return this.#send('counters', batch, now, ['streams', 'flows', 'days']) as Promise<boolean>;
  }

  #start(): Worker {
    // No inherited Node flags: some (e.g. --input-type) are refused for a worker, none are needed.
    const w = new Worker(new URL('./sqlite-writer-worker.ts', import.meta.url), {
      workerData: {
        path: this.#o.path,
        cacheMb: this.#o.cacheMb,
        busyTimeoutMs: this.#o.busyTimeoutMs,
        walAutocheckpoint: this.#o.walAutocheckpoint,
      },
      execArgv: [],
    });
    w.on('message', (m: WriterAnswer) => {
      const p = this.#pending.get(m.id);
      if (p === undefined) return;
      this.#pending.delete(m.id);
      // Idle, the thread does not keep the process alive; a batch under way does.
      if (this.#pending.size === 0) w.unref();
      if ('result' in m) {
        this.#o.stats.ok(p.start);
        p.resolve(m.result);
        return;
      }
      const e = m.error;
      const err =
        e.code !== null ? new ApiError(e.code, e.message) : new Error(`SQLite batch failed: ${e.message}`);
      this.#o.stats.failed(p.start, err, e.unavailable);
      p.reject(err);
    });
    w.on('error', (err: unknown) => this.#fail(w, err instanceof Error ? err : new Error(String(err))));
    w.on('exit', () => this.#fail(w, new Error('the SQLite writer thread stopped')));
    w.unref();
    return w;
  }

  #fail(w: Worker, err: Error): void {
    if (this.#worker === w) this.#worker = undefined;
    const failed = new ApiError('db.unavailable', err.message, { cause: err });
    for (const p of this.#pending.values()) {
      this.#o.stats.failed(p.start, failed, true);
      p.reject(failed);
    }
    this.#pending.clear();
  }

  async #send(
    op: 'clicks' | 'counters',
    batch: ClickBatch | CounterBatch,
    now: number,
    arrays: readonly string[],
  ): Promise<unknown> {
    if (this.#closed) throw new ApiError('db.unavailable', 'the SQLite writer is closed');
    this.#worker ??= this.#start();
    const w = this.#worker;
    w.ref();
    const id = ++this.#next;
    const start = this.#o.stats.clock.monotonic();
    const done = new Promise<unknown>((resolve, reject) => this.#pending.set(id, { resolve, reject, start }));
    this.#inflight.add(done);
    const settled = () => this.#inflight.delete(done);
    done.then(settled, settled);
    const head: Record<string, unknown> = { ...batch };
    const slice = new TimeSlice();
    try {
      for (const key of arrays) {
        const items = head[key] as unknown[] | undefined;
        if (items === undefined || items.length <= ITEMS_PER_MESSAGE) continue;
        for (let i = 0; i < items.length; i += ITEMS_PER_MESSAGE) {
          w.postMessage({
            id,
            op: 'part',
            key,
            items: items.slice(i, i + ITEMS_PER_MESSAGE),
          } satisfies WriterMessage);
          await slice.pause();
        }
        head[key] = [];
      }
      w.postMessage({ id, op, now, batch: head } as unknown as WriterMessage);
    } catch (err) {
      // A batch that cannot be cloned is a programming error; its parts sent so far stay unused.
      this.#pending.get(id)?.resolve(undefined);
      this.#pending.delete(id);
      throw err;
    }
    return done;
  }

  /**
   * Waits for the batches under way (a graceful stop's last flush among them), then closes the
   * writer's connection and stops the thread; ends it after `timeoutMs` if it does not stop.
   */
  async close(timeoutMs = 5000): Promise<void> {
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
