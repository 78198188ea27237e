import type { DatabaseSync } from 'node:sqlite';

/** What one checkpoint reports: the log's pages and how many of them are in the database now, or why it failed. */
export type CheckpointReport = { log: number; checkpointed: number } | { error: string };

/**
 * Copies the write-ahead log back into the database every `intervalMs` with `db` (a passive
 * checkpoint: it never waits for, nor blocks, another connection's writer), on whichever worker
 * thread owns `db`: the checkpoint thread's, or a node's writer thread's. On a connection that also
 * writes, `schedule` must run each checkpoint outside that connection's transactions (SQLite
 * refuses a checkpoint inside one: "database table is locked"): the writer queues it behind its
 * batches. `stop` ends the loop; the owner runs one last checkpoint with `run`.
 */
export function checkpointEvery(
  db: DatabaseSync,
  intervalMs: number,
  report: (r: CheckpointReport) => void,
  schedule: (run: () => void) => void = (run) => run(),
): { run(): void; stop(): void } {
  const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const run = () => {
    try {
      const r = checkpoint.get() as { busy: number; log: number; checkpointed: number } | undefined;
      if (r !== undefined) report({ log: r.log, checkpointed: r.checkpointed });
    } catch (err) {
      // The writing connection checkpoints itself when the log grows past its limit: nothing is lost.
      report({ error: (err as Error).message });
    }
  };
  const timer = setInterval(() => schedule(run), intervalMs);
  return { run, stop: () => clearInterval(timer) };
}
