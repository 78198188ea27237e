import { Worker } from 'node:worker_threads';
import { ApiError } from '../errors/index.ts';
import type { QueryStats } from './query-stats.ts';
import { QueryTimeout, type Row, type SqlReader } from './sql.ts';

const toParam = (v: unknown) =>
  v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : v instanceof Date ? v.toISOString() : v;

/**
 * Long reads of a SQLite node on a worker thread (#12): `node:sqlite` is synchronous, and a report
 * that scans a day of a million clicks (~0.8 s) would hold the event loop, and so every `/go`
 * answer, for all of it. A second, read-only connection to the same file on its own thread reads
 * what the node's connection has committed (WAL) while the node goes on answering. Started on the
 * first read (a node that never runs a report pays nothing), stopped with the storage; one query
 * at a time, in order.
 */
export class SqliteReader implements SqlReader {
  readonly #path: string;
  readonly #stats: QueryStats;
  #worker: Worker | undefined;
  #next = 0;
  readonly #pending = new Map<
    number,
    {
      resolve: (rows: Row[]) => void;
      reject: (e: Error) => void;
      start: number;
      budgetMs?: number;
      /** The chunks' rows so far. */
      rows: Row[];
    }
  >();

  constructor(path: string, stats: QueryStats) {
    this.#path = path;
    this.#stats = stats;
  }

  #start(): Worker {
    // No inherited Node flags: some (e.g. --input-type) are refused for a worker, none are needed.
    const w = new Worker(new URL('./sqlite-reader-worker.ts', import.meta.url), {
      workerData: { path: this.#path },
      execArgv: [],
      // The thread's name in /proc and profiles (the benchmarks read its CPU by it).
      name: 'sqlite-reader',
    });
    w.on(
      'message',
      (m: {
        id: number;
        rows?: Row[];
        more?: boolean;
        error?: { message: string; errcode: number | null; timeout: boolean };
      }) => {
        const p = this.#pending.get(m.id);
        if (p === undefined) return;
        if (m.rows !== undefined) for (const row of m.rows) p.rows.push(row);
        if (m.more === true) return;
        this.#pending.delete(m.id);
        // Idle, the thread does not keep the process alive; a query under way does.
        if (this.#pending.size === 0) w.unref();
        if (m.error === undefined) {
          this.#stats.ok(p.start);
          p.resolve(p.rows);
        } else if (m.error.timeout && p.budgetMs !== undefined) {
          // The statement's own doing (it took too long), not the database's state.
          const err = new QueryTimeout(p.budgetMs);
          this.#stats.failed(p.start, err, false);
          p.reject(err);
        } else {
          const err = new ApiError('internal.error', `SQLite read failed: ${m.error.message}`);
          this.#stats.failed(p.start, err, false);
          p.reject(err);
        }
      },
    );
    // A worker that dies takes its queries with it; the next read starts a new one.
    w.on('error', (err: unknown) => this.#fail(err instanceof Error ? err : new Error(String(err))));
    w.on('exit', () => this.#fail(new Error('the SQLite reader thread stopped')));
    w.unref();
    return w;
  }

  #fail(err: Error): void {
    this.#worker = undefined;
    for (const p of this.#pending.values())
      p.reject(new ApiError('db.unavailable', err.message, { cause: err }));
    this.#pending.clear();
  }

  all<T = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    return this.#read(sql, params, undefined);
  }

  /** The statement calls `sluice_in_budget()` (true until `budgetMs` have passed on the thread). */
  allWithin<T = Row>(budgetMs: number, sql: string, params: readonly unknown[] = []): Promise<T[]> {
    return this.#read(sql, params, budgetMs);
  }

  #read<T>(sql: string, params: readonly unknown[], budgetMs: number | undefined): Promise<T[]> {
    this.#worker ??= this.#start();
    this.#worker.ref();
    const id = ++this.#next;
    return new Promise<T[]>((resolve, reject) => {
      this.#pending.set(id, {
        resolve: resolve as (rows: Row[]) => void,
        reject,
        start: this.#stats.clock.monotonic(),
        ...(budgetMs === undefined ? {} : { budgetMs }),
        rows: [],
      });
      this.#worker!.postMessage({ id, sql, params: params.map(toParam), budgetMs });
    });
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = undefined;
    if (w !== undefined) await w.terminate();
  }
}
