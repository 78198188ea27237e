import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { sha256Hex } from '../src/auth/index.ts';
import { openPostgres, openSqlite, type Storage } from '../src/storage/index.ts';
import { systemClock } from '../src/time/index.ts';
import { CLI, runCli, START_LIMIT_MS } from './helpers/cli.ts';
import { dropSchema, PG_URL, pgAvailable, pgBehindProxy, testSchema } from './helpers/postgres.ts';
import { stallClients } from './helpers/stall.ts';
import { until } from './helpers/until.ts';
import { USER_AGENTS } from './helpers/user-agents.ts';

/** A browser's user agent: a click without one is a bot (docs/routing.md#bots), never a hit. */
const PERSON = { 'user-agent': USER_AGENTS.chromeWindows };

/**
 * Starting and stopping as a supervisor sees it: a real node process, real sockets, the
 * signal from outside, and the counters read back from the database file after the exit.
 */

const ROOT = resolve(import.meta.dirname, '..');
const TIMEOUT_MS = 3000;

let dir: string;
let db: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-stop-'));
  db = join(dir, 'sluice.db');
  writeFileSync(
    join(dir, 'config.test.yml'),
    `app:\n  server:\n    port: 0\n    shutdown_timeout_ms: ${TIMEOUT_MS}\nstorage:\n  sqlite:\n    path: ${db}\n`,
  );
  await seedStopFlow(openSqlite(db, systemClock));
});

/** Migrates `store`, gives it the flow `stop` that {@link clicks} asks for, and closes it. */
async function seedStopFlow(store: Storage): Promise<void> {
  await store.migrate();
  const flow = await store.flows.create({ slug: 'stop', name: 's', status: 'active', rotation: 'position' });
  await store.streams.create({
    flow_id: flow.id,
    name: 'd',
    type: 'default',
    position: 0,
    weight: 1,
    status: 'active',
    filters: {},
    target_url: 'https://stop.test/',
    redirect_code: 302,
  });
  await store.close();
}

after(() => rmSync(dir, { recursive: true, force: true }));

interface Started {
  child: ChildProcess;
  url: string;
  /** `at`: when, on this process's monotonic clock; `wall`: the same on the wall clock (the node's logs). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number; wall: number }>;
  out: () => string;
}

/** Spawns a process and waits for the node's `sluice started` record, which carries its URL. */
function launch(
  command: string,
  args: string[],
  opts: { detached?: boolean; configDir?: string; env?: Record<string, string> } = {},
): Promise<Started> {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, APP_CONFIG_DIR: opts.configDir ?? dir, APP_MODE: 'test', ...opts.env },
    detached: opts.detached ?? false,
  });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  // The exit, then its output read to the end — unless an orphaned child holds the pipes open.
  const closed = new Promise((res) => child.on('close', res));
  const exited = new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    at: number;
    wall: number;
  }>((res) =>
    child.on('exit', (code, signal) => {
      const at = performance.now();
      const wall = Date.now();
      void Promise.race([closed, new Promise((r) => setTimeout(r, 2000).unref())]).then(() =>
        res({ code, signal, at, wall }),
      );
    }),
  );
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no start: ${out}`)), START_LIMIT_MS);
    const look = () => {
      // Whole lines only: a chunk may end in the middle of one.
      for (const line of out.split('\n').slice(0, -1)) {
        if (!line.includes('"sluice started"')) continue;
        clearTimeout(timer);
        res({ child, url: JSON.parse(line).url as string, exited, out: () => out });
        return;
      }
    };
    child.stdout!.on('data', look);
    void exited.then(() => rej(new Error(`exited before starting: ${out}`)));
  });
}

async function clicks(url: string, n: number): Promise<number> {
  let redirected = 0;
  for (let i = 0; i < n; i += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, n - i) }, async () => {
        const res = await fetch(`${url}/go/stop`, { redirect: 'manual', headers: PERSON });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    redirected += batch.filter((s) => s === 302).length;
  }
  return redirected;
}

async function persistedClicks(): Promise<number> {
  const store = openSqlite(db, systemClock);
  try {
    return (await store.flows.getBySlug('stop'))?.clicks ?? 0;
  } finally {
    await store.close();
  }
}

describe('graceful stop', () => {
  for (const stalled of [1, 50]) {
    test(`with ${stalled} client(s) stalled mid-request, SIGTERM exits 0 in time and persists every answered click`, async () => {
      const node = await launch(process.execPath, [CLI, 'start']);
      const before = await persistedClicks();
      const sockets = await stallClients(node.url, stalled, '/go/stop');
      try {
        const answered = await clicks(node.url, 100);
        assert.equal(answered, 100);
        const sent = performance.now();
        node.child.kill('SIGTERM');
        const exit = await node.exited;
        assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, node.out());
        // Not a speed check: the deadline is promised (docs/configuration.md#keys,
        // `shutdown_timeout_ms`: the stop ends within the timeout + 1 s), judged by the node's own
        // clock from the signal to the end of its stop (exit 0 says its hard-exit timer, armed at
        // the signal for that long, did not fire). From out here the OS's delivery of the signal
        // and of the exit adds to it: on two cores shared with other suites that read 4,030 ms
        // once, and 6,412 ms with the suite several files at a time on a machine shared with other
        // suites, for stops the node timed within its bound. So from out here the bound only tells
        // a stop that hangs from one that ends.
        const at = (message: string) => {
          const line = node
            .out()
            .split('\n')
            .find((l) => l.includes(`"message":"${message}"`));
          assert.ok(line, `${message}: ${node.out()}`);
          return Date.parse(JSON.parse(line).time);
        };
        const stop = at('sluice stopped') - at('signal received');
        assert.ok(stop < TIMEOUT_MS + 1000, `stopped after ${stop} ms`);
        assert.ok(
          exit.at - sent < TIMEOUT_MS + 15_000,
          `exited ${Math.round(exit.at - sent)} ms after the signal`,
        );
        assert.equal((await persistedClicks()) - before, answered);
        const closed = node
          .out()
          .split('\n')
          .find((l) => l.includes('connections closed at the stop deadline'));
        assert.ok(closed, node.out());
        assert.equal(JSON.parse(closed).stalled, stalled);
      } finally {
        for (const s of sockets) s.destroy();
        node.child.kill('SIGKILL');
      }
    });
  }
});

/** The JSON records a node printed, in order (its stderr lines, mixed in by {@link launch}, left out). */
function records(out: string): Record<string, unknown>[] {
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/**
 * A config dir for a SQLite node seeded with the `stop` flow, whose clicks and counts stay in
 * memory until its stop writes them (neither the click log's timer nor `stats_flush` comes first).
 */
async function heldWritesConfig(timeoutMs: number): Promise<{ dir: string; db: string }> {
  const own = mkdtempSync(join(tmpdir(), 'sluice-held-'));
  const file = join(own, 'sluice.db');
  await seedStopFlow(openSqlite(file, systemClock));
  writeFileSync(
    join(own, 'config.test.yml'),
    `app:\n  server:\n    port: 0\n    shutdown_timeout_ms: ${timeoutMs}\nstorage:\n  sqlite:\n    path: ${file}\n` +
      "clicks:\n  flush_interval_ms: 60000\ncron:\n  tasks:\n    stats_flush:\n      schedule: '0 0 0 1 1 *'\n",
  );
  return { dir: own, db: file };
}

describe('a second signal during a stop', () => {
  test('exits 1 at once, and its last record says what the stop had not written', async () => {
    // A stop held up by a stalled client for far longer than the test takes.
    const held = await heldWritesConfig(120_000);
    try {
      const node = await launch(process.execPath, [CLI, 'start'], { configDir: held.dir });
      const sockets = await stallClients(node.url, 1, '/go/stop');
      try {
        assert.equal(await clicks(node.url, 7), 7);
        node.child.kill('SIGTERM');
        await until(
          'the first signal taken',
          () => node.out().includes('"message":"signal received"'),
          30_000,
        );
        // A repeat within a second of the first is its echo (a group signal and npm's copy of it):
        // this one comes later, so it is someone who will not wait for the stop.
        await new Promise((r) => setTimeout(r, 1100));
        node.child.kill('SIGTERM');
        const exit = await node.exited;
        assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 1, signal: null }, node.out());
        const last = records(node.out()).at(-1);
        assert.equal(last?.level, 'error', node.out());
        assert.match(String(last?.message), /second signal/);
        assert.equal(last?.clicks_buffered, 7, node.out());
        assert.equal(last?.clicks_unacked, 0);
        assert.deepEqual(last?.counts_unpersisted, { clicks: 7, no_match: 0, bots: 0, uniques: 1 });
      } finally {
        for (const s of sockets) s.destroy();
        node.child.kill('SIGKILL');
      }
    } finally {
      rmSync(held.dir, { recursive: true, force: true });
    }
  });
});

describe('a stop while another connection holds the SQLite write lock', () => {
  test('ends at its deadline: the forced exit does not wait for the writer thread', async () => {
    const held = await heldWritesConfig(300);
    try {
      const node = await launch(process.execPath, [CLI, 'start'], { configDir: held.dir });
      // Another process's transaction (here this one's connection), held for the whole stop.
      const locker = new DatabaseSync(held.db);
      try {
        assert.equal(await clicks(node.url, 5), 5);
        locker.exec('BEGIN IMMEDIATE');
        node.child.kill('SIGTERM');
        const exit = await node.exited;
        assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 1, signal: null }, node.out());
        const timedOut = records(node.out()).find((r) => r.message === 'graceful stop timed out; exiting');
        assert.ok(timedOut, node.out());
        assert.equal(Number(timedOut.clicks_buffered) + Number(timedOut.clicks_unacked), 5);
        // The record is written at the deadline (the timeout + 1 s) and the exit follows it at once.
        // It used to wait for the writer thread asleep in SQLite's busy handler, up to its 5 s
        // (3.7 s after the record, measured): the bound sits between, far from both on a busy machine.
        const after = exit.wall - Date.parse(String(timedOut.time));
        assert.ok(after < 2500, `exited ${after} ms after the deadline`);
      } finally {
        node.child.kill('SIGKILL');
        if (locker.isTransaction) locker.exec('ROLLBACK');
        locker.close();
      }
    } finally {
      rmSync(held.dir, { recursive: true, force: true });
    }
  });
});

/** The pids of a process's children, from /proc (Linux, as the CI machine). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('npm start is signal-transparent', { skip: process.platform !== 'linux' && 'needs /proc' }, () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    for (const target of ['npm', 'group'] as const) {
      test(`${signal} to ${target === 'npm' ? "npm start's process" : 'its process group'}: the node stops gracefully, nothing is left, npm exits 0`, async () => {
        // detached: npm leads its own process group, as under a supervisor or a shell's job control.
        const npm = await launch('npm', ['start', '--silent'], { detached: true });
        const pid = npm.child.pid!;
        const nodes = childrenOf(pid);
        try {
          assert.equal(nodes.length, 1, `npm runs the node directly (no shell in between): ${nodes}`);
          const before = await persistedClicks();
          const answered = await clicks(npm.url, 10);
          process.kill(target === 'npm' ? pid : -pid, signal);
          const exit = await npm.exited;
          assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, npm.out());
          assert.match(npm.out(), /"message":"sluice stopped"/);
          assert.equal(alive(nodes[0]!), false, `the node process is gone: ${npm.out()}`);
          assert.equal((await persistedClicks()) - before, answered, npm.out());
        } finally {
          try {
            process.kill(-pid, 'SIGKILL');
          } catch {}
        }
      });
    }
  }
});

describe('a stop asked for while the node starts', () => {
  test('is carried out once it has started: exit 0, and it says so', async () => {
    const child = spawn(process.execPath, [CLI, 'start'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, APP_CONFIG_DIR: dir, APP_MODE: 'test' },
    });
    let out = '';
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
      child.on('exit', (code, signal) => res({ code, signal })),
    );
    const closed = new Promise((res) => child.on('close', res));
    try {
      // The server is listening inside the start, before the node is started: the signal comes then.
      await new Promise<void>((res, rej) => {
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('Server listening')) res();
        });
        void exited.then(() => rej(new Error(`exited before listening: ${out}`)));
      });
      child.kill('SIGTERM');
      const exit = await exited;
      assert.deepEqual(exit, { code: 0, signal: null }, out);
      await closed; // its output read to the end
      assert.match(out, /"message":"sluice stopped"/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('a stop asked for while the node loads its code', () => {
  test('is held from the first statement and carried out once it has started: exit 0', async () => {
    const preload = resolve(import.meta.dirname, 'helpers/signal-while-loading.ts');
    const child = spawn(process.execPath, ['--import', preload, CLI, 'start'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, APP_CONFIG_DIR: dir, APP_MODE: 'test' },
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
      child.on('exit', (code, signal) => res({ code, signal })),
    );
    const closed = new Promise((res) => child.on('close', res));
    try {
      assert.deepEqual(await exited, { code: 0, signal: null }, out);
      await closed; // its output read to the end
      assert.match(out, /"signal":"SIGTERM","message":"signal received"/);
      assert.match(out, /"message":"sluice stopped"/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('run by npm', () => {
  /** src/command.ts: how long a node run by npm waits, once stopped, for npm's copy of the signal. */
  const NPM_ECHO_WAIT_MS = 250;
  const timeOf = (out: string, message: string) => {
    const line = out.split('\n').find((l) => l.includes(`"message":"${message}"`));
    assert.ok(line, `${message}: ${out}`);
    return Date.parse(JSON.parse(line).time);
  };

  test("signalled alone, the node waits a moment for npm's copy of the signal before it exits", async () => {
    // npm stops listening for signals when its script exits: a group's signal it had not taken yet
    // would then kill it. Here no npm forwards anything, so the node waits the whole moment.
    const node = await launch(process.execPath, [CLI, 'start'], { env: { npm_lifecycle_event: 'start' } });
    try {
      node.child.kill('SIGTERM');
      const exit = await node.exited;
      assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, node.out());
      // Log times are whole milliseconds: one of slack.
      const waited = exit.wall - timeOf(node.out(), 'sluice stopped');
      assert.ok(waited >= NPM_ECHO_WAIT_MS - 1, `exited ${waited} ms after its stop`);
    } finally {
      node.child.kill('SIGKILL');
    }
  });

  test("npm's copy of the signal, as a group signal brings it, is the same stop (exit 0)", async () => {
    const node = await launch(process.execPath, [CLI, 'start'], { env: { npm_lifecycle_event: 'start' } });
    try {
      node.child.kill('SIGTERM');
      node.child.kill('SIGTERM');
      const exit = await node.exited;
      assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, node.out());
      assert.doesNotMatch(node.out(), /exiting now/);
    } finally {
      node.child.kill('SIGKILL');
    }
  });
});

describe('a start that cannot listen', () => {
  test('a busy port is one configuration line naming app.server.port (exit 78), and the bootstrap token is not spent', async () => {
    const holder = createServer();
    await new Promise<void>((res) => holder.listen(0, '127.0.0.1', res));
    const port = (holder.address() as { port: number }).port;
    const devDir = mkdtempSync(join(tmpdir(), 'sluice-busy-'));
    try {
      writeFileSync(
        join(devDir, 'config.development.yml'),
        `app:\n  server:\n    port: ${port}\nstorage:\n  sqlite:\n    path: ${join(devDir, 'db.sqlite')}\n`,
      );
      const run = await runCli(['start', '--config-dir', devDir], { cwd: devDir });
      assert.equal(run.code, 78, run.stderr);
      const lines = run.stderr.trim().split('\n');
      assert.equal(lines.length, 1, run.stderr);
      assert.match(lines[0]!, new RegExp(`app\\.server\\.port: 127\\.0\\.0\\.1:${port} is already in use`));
      // And it says how to choose another port (a reader of README.md, "Two commands", finds the same).
      assert.match(
        lines[0]!,
        /app\.server\.port in the configuration, or APP__APP__SERVER__PORT=<port> in the environment/,
      );
      assert.doesNotMatch(run.stdout + run.stderr, /Created ACP operator/);
    } finally {
      holder.close();
      rmSync(devDir, { recursive: true, force: true });
    }
  });
});

/**
 * A node's config dir for PostgreSQL reached through `url` (a proxy the test takes down), a fresh
 * schema seeded with the `stop` flow, and a click log that writes only when the stop does.
 */
async function pgStopConfig(url: string, schema: string, timeoutMs: number, extra = ''): Promise<string> {
  await seedStopFlow(openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock }));
  const pgDir = mkdtempSync(join(tmpdir(), 'sluice-pg-stop-'));
  writeFileSync(
    join(pgDir, 'config.test.yml'),
    `app:\n  server:\n    port: 0\n    shutdown_timeout_ms: ${timeoutMs}\nstorage:\n  driver: postgres\n  postgres:\n` +
      `    url: ${url}\n    schema: ${schema}\n` +
      `clicks:\n  flush_interval_ms: 60000\n${extra}`,
  );
  return pgDir;
}

/**
 * A node started on {@link pgStopConfig} behind a proxy the test controls, with a connection of the
 * test's own to the schema (past the proxy); everything is taken down after `fn`, whatever it did.
 */
async function withPgStopNode(
  timeoutMs: number,
  extra: string,
  fn: (o: {
    proxy: Awaited<ReturnType<typeof pgBehindProxy>>['proxy'];
    node: Started;
    direct: Storage;
  }) => Promise<void>,
): Promise<void> {
  const { proxy, url } = await pgBehindProxy();
  const schema = testSchema();
  const direct = openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock });
  const pgDir = await pgStopConfig(url, schema, timeoutMs, extra);
  try {
    const node = await launch(process.execPath, [CLI, 'start'], { configDir: pgDir });
    try {
      await fn({ proxy, node, direct });
    } finally {
      node.child.kill('SIGKILL');
    }
  } finally {
    await direct.close();
    await proxy.down();
    rmSync(pgDir, { recursive: true, force: true });
    await dropSchema(schema);
  }
}

describe('a database that refuses for a moment during a stop', async () => {
  const available = await pgAvailable();
  test('costs no click and no count: the last writes are retried for what is left of the stop', {
    skip: !available && 'PostgreSQL unavailable',
  }, async () => {
    // The counts stay in memory until the stop writes them, too.
    await withPgStopNode(
      TIMEOUT_MS,
      'cron:\n  tasks:\n    stats_flush:\n      enabled: false\n',
      async ({ proxy, node, direct }) => {
        const answered = await clicks(node.url, 20);
        assert.equal(answered, 20);
        // Down for longer than the second the click log used to retry, far less than the stop's budget.
        await proxy.down();
        node.child.kill('SIGTERM');
        await new Promise((r) => setTimeout(r, 1_600));
        await proxy.up();
        const exit = await node.exited;
        assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, node.out());
        assert.doesNotMatch(node.out(), /could not write|counts are lost/);
        const flow = await direct.flows.getBySlug('stop');
        assert.equal(flow?.clicks, answered, 'every counted click persisted');
        const logged = await direct.clicks.list({ filter: { flow_id: flow!.id }, limit: 500 });
        assert.equal(logged.items.length, answered, 'every answered click in the log');
      },
    );
  });
});

describe('a database that answers slowly during a stop', async () => {
  const available = await pgAvailable();
  test('the click log writes first: every answered click is persisted, whatever else the stop could not finish', {
    skip: !available && 'PostgreSQL unavailable',
  }, async () => {
    // 400 ms each way: each of the stop's writes (the click log's, the counters', the last
    // sightings') is a transaction of four round trips, 3.2 s each. The stop's budget (4.5 s + 1 s)
    // holds the click log's with two round trips to spare (a connection opened through the proxy
    // first, say), but not the sightings' before it, which used to go first and cut the clicks'
    // short (this test fails with that order); the counts are what the budget now runs out on.
    await withPgStopNode(
      4500,
      "cron:\n  tasks:\n    stats_flush:\n      schedule: '0 0 0 1 1 *'\n",
      async ({ proxy, node, direct }) => {
        const answered = await clicks(node.url, 20);
        assert.equal(answered, 20);
        proxy.delay(400);
        node.child.kill('SIGTERM');
        const exit = await node.exited;
        assert.equal(exit.signal, null, node.out());
        const flow = await direct.flows.getBySlug('stop');
        const logged = await direct.clicks.list({ filter: { flow_id: flow!.id }, limit: 500 });
        assert.equal(logged.items.length, answered, `every answered click in the log: ${node.out()}`);
        assert.doesNotMatch(node.out(), /click log stopped with clicks it could not write/);
        if (exit.code !== 0) {
          // What the budget ran out on is said: none of it answered clicks.
          const all = records(node.out());
          const timedOut = all.find((r) => r.message === 'graceful stop timed out; exiting');
          const lost = all.find((r) => String(r.message).startsWith('sluice stopped without writing'));
          assert.ok(timedOut ?? lost, node.out());
          if (timedOut !== undefined)
            assert.deepEqual([timedOut.clicks_buffered, timedOut.clicks_unacked], [0, 0], node.out());
          else assert.equal(lost?.clicks_lost, 0, node.out());
        }
      },
    );
  });
});

describe('a stop that outruns its deadline', async () => {
  const available = await pgAvailable();
  test('exits 1 and its last record says how many clicks it had not written', {
    skip: !available && 'PostgreSQL unavailable',
  }, async () => {
    // PostgreSQL behind a proxy that goes silent: the stop's flushes wait on it past the deadline.
    // No stats_flush: it writes the click log too, and one between the clicks and the freeze would
    // leave the stop nothing to lose.
    await withPgStopNode(
      300,
      'cron:\n  tasks:\n    stats_flush:\n      enabled: false\n',
      async ({ proxy, node }) => {
        assert.equal(await clicks(node.url, 3), 3);
        proxy.freeze();
        node.child.kill('SIGTERM');
        assert.equal((await node.exited).code, 1, node.out());
        const last = node
          .out()
          .split('\n')
          .find((l) => l.includes('graceful stop timed out; exiting'));
        assert.ok(last, node.out());
        const record = JSON.parse(last) as { clicks_buffered: number; clicks_unacked: number };
        assert.equal(record.clicks_buffered + record.clicks_unacked, 3, last);
      },
    );
  });
});

/**
 * A database that takes connections and reads but refuses every write of the click log, as a full
 * disk does: PostgreSQL answers `disk_full` (53100), SQLite aborts the insert. The refusal comes
 * from a trigger on `clicks`, made by the test's own connection.
 */
const REFUSING: {
  name: string;
  node(timeoutMs: number): Promise<{ dir: string; cleanup(): Promise<void> }>;
}[] = [
  {
    name: 'sqlite',
    node: async (timeoutMs) => {
      const held = await heldWritesConfig(timeoutMs);
      const raw = new DatabaseSync(held.db);
      raw.exec(`CREATE TRIGGER refuse_clicks BEFORE INSERT ON clicks
          BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`);
      raw.close();
      return { dir: held.dir, cleanup: async () => rmSync(held.dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'postgres',
    node: async (timeoutMs) => {
      const schema = testSchema();
      const pgDir = await pgStopConfig(PG_URL, schema, timeoutMs);
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        await client.query(`CREATE FUNCTION ${schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
            CREATE TRIGGER refuse_clicks BEFORE INSERT ON ${schema}.clicks
              FOR EACH ROW EXECUTE FUNCTION ${schema}.refuse()`);
      } finally {
        await client.end();
      }
      return {
        dir: pgDir,
        cleanup: async () => {
          rmSync(pgDir, { recursive: true, force: true });
          await dropSchema(schema);
        },
      };
    },
  },
];

describe('a stop while the database refuses every write', () => {
  for (const backend of REFUSING) {
    test(`${backend.name}: exits 1, and its last record says how many answered clicks it lost`, async (t) => {
      if (backend.name === 'postgres' && !(await pgAvailable())) return t.skip('PostgreSQL unavailable');
      const made = await backend.node(1000);
      try {
        const node = await launch(process.execPath, [CLI, 'start'], { configDir: made.dir });
        try {
          assert.equal(await clicks(node.url, 20), 20);
          node.child.kill('SIGTERM');
          const exit = await node.exited;
          // It used to exit 0, its only trace one error record among the stop's.
          assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 1, signal: null }, node.out());
          const last = records(node.out()).at(-1);
          assert.equal(last?.level, 'error', node.out());
          assert.match(String(last?.message), /sluice stopped without writing every answered click/);
          assert.equal(last?.clicks_lost, 20, node.out());
          assert.match(node.out(), /stopped without writing 20 answered clicks/);
        } finally {
          node.child.kill('SIGKILL');
        }
      } finally {
        await made.cleanup();
      }
    });
  }
});

/**
 * A node on `backend` whose click log is written by a `clicks.flush` task every 10 s (its own timer
 * off), while `stats_flush` runs at the odd seconds (it wrote the counters, apart from the clicks and
 * never in the same turn, before 2026-11-28): its config dir, an admin token for its ACP, and how to read from outside whether its
 * database holds anything yet (the flow's clicks plus the click log's rows).
 */
async function killedNodeConfig(backend: 'sqlite' | 'postgres'): Promise<{
  dir: string;
  token: string;
  written(): Promise<number>;
  cleanup(): Promise<void>;
}> {
  const token = `slc_${'k'.repeat(32)}`;
  const acp =
    `acp:\n  operators:\n    - { name: t, role: admin, token_sha256: ${sha256Hex(token)} }\n` +
    "cron:\n  tasks:\n    click_writer:\n      kind: clicks.flush\n      schedule: '*/10 * * * * *'\n" +
    "    stats_flush:\n      schedule: '1-59/2 * * * * *'\n";
  if (backend === 'sqlite') {
    const own = mkdtempSync(join(tmpdir(), 'sluice-killed-'));
    const file = join(own, 'sluice.db');
    await seedStopFlow(openSqlite(file, systemClock));
    writeFileSync(
      join(own, 'config.test.yml'),
      `app:\n  server:\n    port: 0\nstorage:\n  sqlite:\n    path: ${file}\nclicks:\n  flush_interval_ms: 60000\n${acp}`,
    );
    return {
      dir: own,
      token,
      written: async () => {
        const raw = new DatabaseSync(file, { readOnly: true });
        try {
          const [row] = raw
            .prepare('SELECT clicks + (SELECT COUNT(*) FROM clicks) AS n FROM traffic_flows')
            .all();
          return Number(row?.n ?? 0);
        } finally {
          raw.close();
        }
      },
      cleanup: async () => rmSync(own, { recursive: true, force: true }),
    };
  }
  const schema = testSchema();
  const pgDir = await pgStopConfig(PG_URL, schema, TIMEOUT_MS, acp);
  const direct = openPostgres({ url: PG_URL, poolMax: 1, schema, clock: systemClock });
  return {
    dir: pgDir,
    token,
    written: async () => {
      const flow = await direct.flows.getBySlug('stop');
      const logged = await direct.clicks.list({ filter: {}, limit: 1 });
      return (flow?.clicks ?? 0) + logged.total;
    },
    cleanup: async () => {
      await direct.close();
      rmSync(pgDir, { recursive: true, force: true });
      await dropSchema(schema);
    },
  };
}

describe('a node killed under load', () => {
  for (const backend of ['sqlite', 'postgres'] as const) {
    test(`${backend}: after a restart the flows list, the streams list and the reports agree`, async (t) => {
      if (backend === 'postgres' && !(await pgAvailable())) return t.skip('PostgreSQL unavailable');
      const made = await killedNodeConfig(backend);
      try {
        const node = await launch(process.execPath, [CLI, 'start'], { configDir: made.dir });
        let killed = false;
        const load = Promise.all(
          Array.from({ length: 10 }, async () => {
            while (!killed) {
              try {
                const res = await fetch(`${node.url}/go/stop`, { redirect: 'manual', headers: PERSON });
                await res.arrayBuffer();
              } catch {
                // The kill.
              }
            }
          }),
        );
        try {
          // Under load, once something is written: counts and clicks kept apart were written apart.
          await until('a first write', async () => (await made.written()) > 0, 30_000, 50);
          node.child.kill('SIGKILL');
          await node.exited;
        } finally {
          killed = true;
          node.child.kill('SIGKILL');
          await load;
        }
        const again = await launch(process.execPath, [CLI, 'start'], { configDir: made.dir });
        try {
          const call = async <T>(path: string, body: unknown): Promise<T> => {
            const res = await fetch(again.url + path, {
              method: 'POST',
              headers: { authorization: `Bearer ${made.token}`, 'content-type': 'application/json' },
              body: JSON.stringify(body),
            });
            assert.equal(res.status, 200, path);
            return (await res.json()) as T;
          };
          const flows = await call<{ items: { id: string; clicks: number }[] }>('/acp/traffic-flows/list', {
            filter: { slug: 'stop' },
          });
          const flow = flows.items[0]!;
          const streams = await call<{ items: { hits: number }[] }>('/acp/streams/list', {
            filter: { flow_id: flow.id },
          });
          const day = 86_400_000;
          const report = (source: string) =>
            call<{ totals: { clicks: number } }>('/acp/reports/query', {
              from: new Date(Date.now() - day).toISOString().slice(0, 10),
              to: new Date(Date.now() + day).toISOString().slice(0, 10),
              filter: { flow_id: flow.id },
              source,
            });
          const figures = {
            flow_clicks: flow.clicks,
            stream_hits: streams.items.reduce((n, s) => n + s.hits, 0),
            report_rollups: (await report('rollups')).totals.clicks,
            report_click_log: (await report('clicks')).totals.clicks,
          };
          assert.ok(figures.flow_clicks > 0, JSON.stringify(figures));
          // They were written apart and disagreed for good (hits written, their clicks never).
          assert.deepEqual(
            figures,
            {
              flow_clicks: figures.flow_clicks,
              stream_hits: figures.flow_clicks,
              report_rollups: figures.flow_clicks,
              report_click_log: figures.flow_clicks,
            },
            JSON.stringify(figures),
          );
        } finally {
          again.child.kill('SIGTERM');
          await again.exited;
        }
      } finally {
        await made.cleanup();
      }
    });
  }
});
