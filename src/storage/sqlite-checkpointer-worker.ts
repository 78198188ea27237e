/**
 * The worker side of {@link SqliteCheckpointer}: its own connection to the node's SQLite file,
 * checkpointing every `intervalMs` (`checkpointEvery`). Answers `close` by closing its connection
 * and leaving.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { checkpointEvery } from './sqlite-wal-checkpoint.ts';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const db = new DatabaseSync(path);
const loop = checkpointEvery(db, intervalMs, (r) => parentPort!.postMessage(r));
parentPort!.on('message', (m: unknown) => {
  if (m !== 'close') return;
  loop.stop();
  loop.run();
  db.close();
  parentPort!.close();
});
