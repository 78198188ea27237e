import { Worker } from 'node:worker_threads';
import type { CheckpointReport } from './sqlite-wal-checkpoint.ts';

/** How often the thread copies the write-ahead log into the database. */
export const CHECKPOINT_INTERVAL_MS = 1000;
/**
 * The node's own connection checkpoints only past this many log pages (4 KiB each: ~40 MB), a
 * safety net for a checkpoint thread that cannot keep up or has failed; SQLite's default is 1,000.
 */
export const WAL_PAGES_BEFORE_INLINE_CHECKPOINT = 10_000;

/** What the checkpoint thread has done, for the `db` section. */
export interface CheckpointStats {
  /** Checkpoints run. */
  runs: number;
  failures: number;
  /** Log pages not yet in the database after the last checkpoint (0 when it kept up; readers can hold some back). */
  backlog_pages: number;
  last_error: string | null;
}

/** What checkpoints have done, from their reports: the `db` section's `checkpoints`. */
export class CheckpointTally {
  readonly #stats: CheckpointStats = { runs: 0, failures: 0, backlog_pages: 0, last_error: null };

  record(r: CheckpointReport): void {
    if ('error' in r) {
      this.failed(r.error);
      return;
    }
    this.#stats.runs++;
    this.#stats.backlog_pages = Math.max(0, r.log - r.checkpointed);
  }

  /** The thread itself failed (it is not checkpointing until another starts). */
  failed(message: string): void {
    this.#stats.failures++;
    this.#stats.last_error = message;
  }

  stats(): CheckpointStats {
    return { ...this.#stats };
  }
}

/**
 * Checkpoints of a node's SQLite file on a thread of their own (#12). In WAL mode SQLite copies the
 * log back into the database from inside a `COMMIT` once the log passes 1,000 pages: on a node that
 * writes thousands of clicks a second that is a copy and an fsync of megabytes, on the main thread,
 * every few flushes (about half of a 20,000-row flush's `COMMIT` time, measured). Here a second
 * connection on a worker does it every second instead, and the node's connection is told to leave
 * it alone until the log is {@link WAL_PAGES_BEFORE_INLINE_CHECKPOINT} pages long. The thread never
 * keeps the process alive; {@link close} stops it before the node's connection closes (the last
 * connection to close checkpoints what is left).
 */
export class SqliteCheckpointer {
  readonly #worker: Worker;
  readonly #tally = new CheckpointTally();
  #closed: Promise<void> | undefined;
  #exited = false;

  constructor(path: string, intervalMs: number) {
    // No inherited Node flags: some (e.g. --input-type) are refused for a worker, none are needed.
    this.#worker = new Worker(new URL('./sqlite-checkpointer-worker.ts', import.meta.url), {
      workerData: { path, intervalMs },
      execArgv: [],
    });
    this.#worker.on('message', (r: CheckpointReport) => this.#tally.record(r));
    this.#worker.on('error', (err: Error) => this.#tally.failed(err.message));
    this.#worker.once('exit', () => {
      this.#exited = true;
    });
    this.#worker.unref();
  }

  stats(): CheckpointStats {
    return this.#tally.stats();
  }

  /** Stops the thread after one last checkpoint; waits at most `timeoutMs` for it, then ends it. */
  close(timeoutMs = 2000): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      const w = this.#worker;
      if (this.#exited) return resolve();
      const timer = setTimeout(() => void w.terminate(), timeoutMs);
      w.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      w.postMessage('close');
    });
    return this.#closed;
  }
}
