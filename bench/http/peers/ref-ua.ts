/**
 * `ref-ua`: the reference program for a SQLite node's `/go` (bench/http/peers/ref-hot-path.ts does
 * the request), every click written to SQLite from a worker thread, in batches. The clicks are
 * buffered on the event loop as flat values (ten a click, no object per click) and, every 500 ms
 * (as often as Sluice's click log cuts a batch), the buffer crosses to the writer thread
 * (ref-ua-writer.ts) in one message, which inserts it in one transaction: one `INSERT` per click,
 * one `COMMIT` per batch.
 *
 * The table has the indexes Sluice's click log has for the same lookups (by click id, newest
 * first, by flow, by sub1), in WAL mode with SQLite's default synchronous setting, as Sluice's
 * file. What it does not do that Sluice does: hourly rollups, routing counters, uniqueness,
 * idempotent batch ids, retries, telemetry.
 */
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import type { SluiceScenario } from '../scenarios.ts';
import { type ClickRow, REF_COLUMNS } from './ref-columns.ts';
import { refApp, refFlows } from './ref-hot-path.ts';

const WIDTH = REF_COLUMNS.length;
const FLUSH_MS = 500;

export const REF_SQLITE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS clicks (
    click_id TEXT PRIMARY KEY, flow_id TEXT NOT NULL, stream_id TEXT, created_at TEXT NOT NULL,
    country TEXT, device_type TEXT NOT NULL, os TEXT NOT NULL, browser TEXT NOT NULL, sub1 TEXT,
    is_bot INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS clicks_created ON clicks (created_at, click_id);
  CREATE INDEX IF NOT EXISTS clicks_flow ON clicks (flow_id, created_at, click_id);
  CREATE INDEX IF NOT EXISTS clicks_sub1 ON clicks (sub1, created_at, click_id) WHERE sub1 IS NOT NULL;`;

export interface RefProgram {
  app: ReturnType<typeof refApp>;
  /** Clicks the database acknowledged so far. */
  persisted(): number;
  /** Clicks the database holds now, and those with a sub1 (a `COUNT(*)` on a connection of its own). */
  rows(): Promise<{ all: number; sub1: number }>;
  /** Writes what is buffered and stops the writer. */
  stop(): Promise<void>;
}

/** Starts the program on `port` (0: any), its database at `path`. */
export async function startRefSqlite(opts: {
  scenario: SluiceScenario;
  path: string;
  port: number;
  host: string;
}): Promise<RefProgram> {
  const setup = new DatabaseSync(opts.path);
  setup.exec(`PRAGMA journal_mode = WAL; ${REF_SQLITE_SCHEMA}`);
  setup.close();
  const writer = new Worker(new URL('./ref-ua-writer.ts', import.meta.url), {
    workerData: { path: opts.path },
    execArgv: [],
    name: 'ref-writer',
  });
  let persisted = 0;
  let inFlight = 0;
  writer.on('message', (n: number) => {
    persisted += n;
    inFlight--;
  });
  await new Promise((res, rej) => writer.once('online', res).once('error', rej));
  let buf: unknown[] = [];
  const flush = () => {
    if (buf.length === 0) return;
    writer.postMessage(buf);
    inFlight++;
    buf = [];
  };
  const timer = setInterval(flush, FLUSH_MS);
  const app = refApp(refFlows(opts.scenario), (row: ClickRow) => {
    for (let i = 0; i < WIDTH; i++) buf.push(row[i]);
  });
  await app.listen({ port: opts.port, host: opts.host });
  return {
    app,
    persisted: () => persisted,
    rows: async () => {
      const db = new DatabaseSync(opts.path, { readOnly: true });
      try {
        const r = db.prepare('SELECT COUNT(*) AS n, COUNT(sub1) AS s FROM clicks').get() as {
          n: number;
          s: number;
        };
        return { all: r.n, sub1: r.s };
      } finally {
        db.close();
      }
    },
    stop: async () => {
      clearInterval(timer);
      await app.close();
      flush();
      while (inFlight > 0) await new Promise((r) => setTimeout(r, 10));
      writer.postMessage('close');
      await new Promise((r) => writer.once('exit', r));
    },
  };
}
