/**
 * The worker side of {@link SqliteCheckpointer}: its own connection to the node's SQLite file,
 * copying the write-ahead log into the database every `intervalMs` (a passive checkpoint: it never
 * waits for, nor blocks, the node's writer). Answers `close` by closing its connection and leaving.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const db = new DatabaseSync(path);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

function run(): void {
  try {
    const r = checkpoint.get() as { busy: number; log: number; checkpointed: number } | undefined;
    // `log`: pages in the log; `checkpointed`: how many of them are in the database now.
    if (r !== undefined) parentPort!.postMessage({ log: r.log, checkpointed: r.checkpointed });
  } catch (err) {
    // The node's own connection checkpoints when the log grows past its limit: nothing is lost.
    parentPort!.postMessage({ error: (err as Error).message });
  }
}

const timer = setInterval(run, intervalMs);
parentPort!.on('message', (m: unknown) => {
  if (m !== 'close') return;
  clearInterval(timer);
  run();
  db.close();
  parentPort!.close();
});
