/**
 * The writer thread of `ref-ua` (bench/http/peers/ref-ua.ts): one connection to its SQLite file, a
 * batch a message (ten values a click, flat), one transaction a batch, one `INSERT` a click. A file
 * of its own, so that the thread loads `node:sqlite` and nothing of the HTTP side.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { REF_COLUMNS } from './ref-columns.ts';

const WIDTH = REF_COLUMNS.length;

function writerThread(path: string): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL;');
  const insert = db.prepare(
    `INSERT INTO clicks (${REF_COLUMNS.join(', ')}) VALUES (${REF_COLUMNS.map(() => '?').join(', ')})`,
  );
  let ms = Number.NaN;
  let iso = '';
  parentPort!.on('message', (values: unknown[] | 'close') => {
    if (values === 'close') {
      db.close();
      parentPort!.close();
      return;
    }
    db.exec('BEGIN');
    for (let o = 0; o < values.length; o += WIDTH) {
      // A batch's clicks come in time order: each millisecond's ISO text is made once.
      if (values[o + 3] !== ms) {
        ms = values[o + 3] as number;
        iso = new Date(ms).toISOString();
      }
      const v = values as (string | number | null)[];
      insert.run(
        v[o]!,
        v[o + 1]!,
        v[o + 2]!,
        iso,
        v[o + 4]!,
        v[o + 5]!,
        v[o + 6]!,
        v[o + 7]!,
        v[o + 8]!,
        v[o + 9]!,
      );
    }
    db.exec('COMMIT');
    parentPort!.postMessage(values.length / WIDTH);
  });
}

writerThread((workerData as { path: string }).path);
