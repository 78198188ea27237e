import { randomUUID } from 'node:crypto';
import type { Clock } from '../time/index.ts';
import { deleteInChunks, type SqlExecutor } from './sql.ts';
import { idProblem } from './storable.ts';

/**
 * How long the guard row of an applied batch is kept. A batch is retried with its id until its
 * commit is acknowledged; the guard must outlive the longest such retry, or a batch whose first
 * commit went through but whose answer was lost would be written twice. Retries happen every flush
 * interval while the database is down, so the horizon is the longest outage a node lives through
 * holding a batch in memory: a week is well beyond that (a node's bounded buffer has long
 * overflowed by then) and costs about 100 bytes a batch, i.e. ~120 MB on PostgreSQL for a node that
 * flushes two kinds of batch every second for the whole week.
 */
export const APPLIED_BATCH_RETENTION_MS = 7 * 86_400_000;

/** How often a node prunes expired guard rows after applying a batch (any node may; it is idempotent). */
export const APPLIED_BATCH_PRUNE_EVERY_MS = 10 * 60_000;

/** Expired guard rows deleted per statement: short transactions, never a long lock. */
const PRUNE_CHUNK = 5000;

/** What a batch carries: its kind (`counters`, `clicks`), for the guard row only. */
export type BatchKind = 'counters' | 'clicks';

/**
 * A new batch id, unique across nodes without asking the database: a random UUID (122 random
 * bits). Made once when a batch is cut; every retry of that batch sends the same id.
 */
export function newBatchId(): string {
  return randomUUID();
}

/**
 * Records `id` as applied, inside the caller's transaction, before the batch's own statements.
 * False when the id was already there: that batch committed before (its acknowledgement was lost,
 * or it is being retried), so the caller writes nothing more and reports success. On PostgreSQL a
 * concurrent transaction inserting the same id waits for the first and then finds it (or, if the
 * first rolled back, takes its place), so two sends of one batch never both apply.
 */
export async function claimBatch(tx: SqlExecutor, id: string, kind: BatchKind, at: string): Promise<boolean> {
  const problem = idProblem(id);
  // A programming error, not input: batch ids are made by newBatchId.
  if (problem !== undefined) throw new Error(`batch id ${JSON.stringify(id)} ${problem}`);
  const n = await tx.run(
    'INSERT INTO applied_batches (batch_id, kind, applied_at) VALUES (?, ?, ?) ON CONFLICT (batch_id) DO NOTHING',
    [id, kind, at],
  );
  return n === 1;
}

/**
 * Deletes guard rows applied before `before` (an ISO timestamp), a chunk per statement with the
 * event loop let go between chunks; returns how many went.
 */
export function pruneAppliedBatches(exec: SqlExecutor, before: string): Promise<number> {
  return deleteInChunks(
    exec,
    `DELETE FROM applied_batches WHERE batch_id IN
       (SELECT batch_id FROM applied_batches WHERE applied_at < ? ORDER BY applied_at LIMIT ?)`,
    [before],
    PRUNE_CHUNK,
  );
}

/**
 * Applies guarded batches and, at most every {@link APPLIED_BATCH_PRUNE_EVERY_MS} per node, prunes
 * expired guard rows after a batch was applied, so no task has to be configured for it. A failed
 * prune is left for the next time: the batch it followed is already committed.
 */
export class BatchGuard {
  readonly #exec: SqlExecutor;
  readonly #clock: Clock;
  #lastPrune: number;

  constructor(exec: SqlExecutor, clock: Clock) {
    this.#exec = exec;
    this.#clock = clock;
    // Not at once: a node's first flushes stay a fixed number of statements.
    this.#lastPrune = clock.now();
  }

  /**
   * Runs `apply` in one transaction after claiming `id`; when the id was already applied, commits
   * nothing more and returns false. True when this call applied the batch.
   */
  async once(id: string, kind: BatchKind, apply: (tx: SqlExecutor) => Promise<void>): Promise<boolean> {
    const now = this.#clock.now();
    const applied = await this.#exec.transaction(async (tx) => {
      if (!(await claimBatch(tx, id, kind, new Date(now).toISOString()))) return false;
      await apply(tx);
      return true;
    });
    if (now - this.#lastPrune >= APPLIED_BATCH_PRUNE_EVERY_MS) {
      this.#lastPrune = now;
      await this.prune().catch(() => {});
    }
    return applied;
  }

  /** Deletes the guard rows older than the retention; how many went. */
  prune(): Promise<number> {
    const before = new Date(this.#clock.now() - APPLIED_BATCH_RETENTION_MS).toISOString();
    return pruneAppliedBatches(this.#exec, before);
  }
}
