/**
 * `soak crash`: kill -9 under full load, on each backend. A node (`sluice start`, default
 * `clicks.flush_interval_ms` and `stats_flush`) takes closed-loop `/go` load; each 302's click id
 * and the moment it was answered are noted; SIGKILL; the click log and the counters are then read
 * straight from the database. Figures per round: the answered clicks lost, how many milliseconds
 * of answering they span (the kill's time minus the oldest lost click's answer), and whether the
 * counters (stream hits, flow clicks), the click log's rows and the hourly rollups agree.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { Agent, request } from 'undici';
import { openPostgres, openSqlite, type Storage } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { START_LIMIT_MS } from '../../test/helpers/cli.ts';
import { dropSchema, PG_URL, testSchema } from '../../test/helpers/postgres.ts';
import { check, type Outcome, PERSON, persistedHits, seedFlow, sleep } from '../harness.ts';

const CLI = resolve(import.meta.dirname, '../../src/cli.ts');
/** Kills a backend takes; one in a short run (`npm test`). */
const roundsOf = (seconds: number) => (seconds < 5 ? 1 : 3);
/** The default `clicks.flush_interval_ms`, the bound a crash's loss is judged by. */
const FLUSH_INTERVAL_MS = 1000;

interface Backend {
  name: 'sqlite' | 'postgres';
  yaml: string;
  store(): Storage;
  /** The click ids the log holds. */
  ids(): Promise<Set<string>>;
  cleanup(): Promise<void>;
}

function sqliteBackend(dir: string): Backend {
  const file = join(dir, 'crash.db');
  return {
    name: 'sqlite',
    yaml: `storage:\n  sqlite:\n    path: ${file}\n`,
    store: () => openSqlite(file, systemClock),
    ids: async () => {
      const db = new DatabaseSync(file, { readOnly: true });
      try {
        return new Set(
          db
            .prepare('SELECT click_id FROM clicks')
            .all()
            .map((r) => String(r.click_id)),
        );
      } finally {
        db.close();
      }
    },
    cleanup: async () => {},
  };
}

function postgresBackend(): Backend {
  const schema = testSchema();
  return {
    name: 'postgres',
    yaml: `storage:\n  driver: postgres\n  postgres:\n    url: ${PG_URL}\n    schema: ${schema}\n    pool_max: 5\n`,
    store: () => openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock }),
    ids: async () => {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        const { rows } = await client.query(`SELECT click_id FROM ${schema}.clicks`);
        return new Set(rows.map((r: { click_id: string }) => r.click_id));
      } finally {
        await client.end();
      }
    },
    cleanup: () => dropSchema(schema),
  };
}

function startNode(dir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--max-semi-space-size=16', CLI, 'start', '--config-dir', dir], {
    cwd: dir,
    env: { PATH: process.env.PATH, APP_MODE: 'crash' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no start: ${out}`)), START_LIMIT_MS);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const line = out.split('\n').find((l) => l.includes('"sluice started"'));
      if (line === undefined) return;
      clearTimeout(timer);
      child.stdout!.removeAllListeners('data');
      child.stdout!.resume();
      res({ child, url: JSON.parse(line).url as string });
    });
  });
}

/** One round: load for `seconds`, SIGKILL under it, then what the database holds. */
async function round(b: Backend, dir: string, seconds: number, workers: number, flowId: string) {
  const { child, url } = await startNode(dir);
  const exited = new Promise((r) => child.on('exit', r));
  const answered = new Map<string, number>();
  let killed = false;
  const dispatcher = new Agent({ connections: workers, pipelining: 1 });
  const worker = async () => {
    while (!killed) {
      try {
        const res = await request(`${url}/go/crash`, { dispatcher, headers: PERSON });
        await res.body.dump();
        const at = Date.now();
        const id = res.headers['x-click-id'];
        if (res.statusCode === 302 && typeof id === 'string' && !killed) answered.set(id, at);
      } catch {
        // The kill: every request in flight fails.
      }
    }
  };
  const load = Promise.all(Array.from({ length: workers }, worker));
  await sleep(seconds * 1000);
  const killAt = Date.now();
  killed = true;
  child.kill('SIGKILL');
  await exited;
  await load;
  await dispatcher.close();
  const stored = await b.ids();
  let lost = 0;
  let oldestLost = Number.POSITIVE_INFINITY;
  for (const [id, at] of answered) {
    if (stored.has(id)) continue;
    lost++;
    oldestLost = Math.min(oldestLost, at);
  }
  const store = b.store();
  try {
    const persisted = await persistedHits(store, flowId);
    return {
      answered: answered.size,
      lost,
      lostMs: lost === 0 ? 0 : killAt - oldestLost,
      rate: answered.size / seconds,
      ...persisted,
    };
  } finally {
    await store.close();
  }
}

export async function crash(o: { seconds: number; connections: number }): Promise<Outcome> {
  const out: Outcome = { scenario: 'crash', figures: {}, checks: [] };
  const seconds = o.seconds;
  const workers = Math.min(o.connections, 100);
  for (const make of [sqliteBackend, postgresBackend]) {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-crash-'));
    const b = make(dir);
    try {
      writeFileSync(join(dir, 'config.crash.yml'), `app:\n  server:\n    port: 0\n${b.yaml}`);
      const seed = b.store();
      await seed.migrate();
      const flowId = await seedFlow(seed, 'crash');
      await seed.close();
      const lostMs: number[] = [];
      for (let i = 0; i < roundsOf(seconds); i++) {
        const r = await round(b, dir, seconds, workers, flowId);
        lostMs.push(r.lostMs);
        out.figures[`${b.name} round ${i + 1}`] =
          `${r.answered} answered (${Math.round(r.rate)}/s), ${r.lost} lost = ${r.lostMs} ms; ` +
          `totals now: hits ${r.hits}, flow clicks ${r.clicks}, log rows ${r.logged}, rollups ${r.rolledUp}`;
        check(out, `${b.name} round ${i + 1}: clicks answered`, r.answered > 0, r);
        check(
          out,
          `${b.name} round ${i + 1}: counters, click log and rollups agree`,
          r.hits === r.logged && r.clicks === r.logged && r.rolledUp === r.logged,
          r,
        );
        // How fast the database wrote what came: judged by `npm run soak` on its machine.
        check(
          out,
          `${b.name} round ${i + 1}: lost at most clicks.flush_interval_ms of answered clicks`,
          r.lostMs <= FLUSH_INTERVAL_MS,
          r,
          { speed: true },
        );
      }
      out.figures[`${b.name} lost ms (min–max)`] = `${Math.min(...lostMs)}–${Math.max(...lostMs)}`;
    } finally {
      await b.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}
