/**
 * The load harness: every server in a process of its own, the load generator in another (autocannon
 * forked into bench/http/load-client.ts, or `wrk` when asked for and installed), and the harness
 * only reading figures. The headline figure is the server's own CPU time per request: its CPU µs
 * over the measured window (from the server process itself) divided by the requests it received.
 * req/s, by contrast, depends on how much of the two cores the load generator and everything else
 * on the machine leave to the server. Variants are measured in interleaved rounds after a warm-up
 * that is not counted, each paired with a base variant measured right next to it; reports give
 * medians, and ratios taken pair by pair.
 */
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ClicksSection } from '../../src/telemetry/index.ts';
import type { RequestMix, SluiceScenario } from './scenarios.ts';

/** How much load: for so many seconds, or exactly so many requests (autocannon only). */
export type LoadLength = { seconds: number; amount?: undefined } | { amount: number; seconds?: undefined };

/**
 * A load to put on some server. `rate`: about this many requests a second in all, so that servers
 * of different speeds are compared near one load rather than each at its own saturation (see
 * docs/PERFORMANCE.md: on loopback a saturated server's writes also pay for waking the client).
 * With wrk each connection waits `connections / rate` seconds, rounded to whole milliseconds, after
 * each answer, so a slower server gets somewhat fewer (the rate reached is in each result; the
 * rounding caps it too: 50 connections at 4,000 wait 13 ms, ≤ 3,846 req/s); autocannon paces to it.
 */
export type Load = { mix: RequestMix; connections: number; rate?: number | undefined } & LoadLength;

export type LoadSpec = { origin: string } & Load;

export interface LoadResult {
  client: 'autocannon' | 'wrk';
  /** Requests sent and responses received, as the load generator counted them. */
  sent: number;
  answered: number;
  /** 3xx answers (autocannon; wrk does not tell). */
  redirects: number | undefined;
  /** Answers that are neither 2xx nor 3xx, plus connection errors and timeouts. */
  bad: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
}

export interface ServerStats {
  /** CPU µs the server process has used so far (all its threads). */
  cpuUs: number;
  /**
   * CPU µs its main thread (the event loop, which bounds what one process answers) has used so far;
   * absent for a server that is not Node.
   */
  mainCpuUs?: number;
  /** Requests its HTTP server has received so far. */
  requests: number;
  rss: number;
  /**
   * A server writing to PostgreSQL: CPU µs its database backends have used so far (those named
   * after it, read from /proc by the harness); NaN when /proc does not show them (a remote server).
   */
  dbCpuUs?: number;
}

export interface BenchServer {
  name: string;
  origin: string;
  pid: number;
  stats(): Promise<ServerStats>;
  /** Sluice only: flow and stream reads the routing cache made from storage so far. */
  reads(): Promise<{ flows: number; streams: number }>;
  /** Sluice only: its click log's figures. */
  clicks(): Promise<ClicksSection>;
  /** Sluice only: the clicks its database holds now, and those with a sub1 (a `COUNT(*)`: not while measuring). */
  clickRows(): Promise<{ all: number; sub1: number }>;
  stop(): Promise<void>;
}

export interface LoadClient {
  name: 'autocannon' | 'wrk';
  run(spec: LoadSpec): Promise<LoadResult>;
  close(): Promise<void>;
}

/** `npm start` runs a node with this flag (docs/PERFORMANCE.md); every Node server here gets it alike. */
export const NODE_SERVER_FLAGS = ['--max-semi-space-size=16'];

/** Request/response over a child's IPC channel; a child that exits fails what is still waiting. */
function ipc(proc: ChildProcess) {
  let next = 0;
  const waiting = new Map<number, { res: (m: never) => void; rej: (e: Error) => void }>();
  proc.on('message', (m: { id?: number }) => {
    if (m.id === undefined) return;
    waiting.get(m.id)?.res(m as never);
    waiting.delete(m.id);
  });
  proc.once('exit', (code, signal) => {
    for (const w of waiting.values()) w.rej(new Error(`child exited (${code ?? signal}) while asked`));
    waiting.clear();
  });
  return <T>(msg: object) =>
    new Promise<T>((res, rej) => {
      const id = ++next;
      waiting.set(id, { res: res as (m: never) => void, rej });
      proc.send({ ...msg, id });
    });
}

/** The first message of a forked child, or its failure to start. */
function firstMessage<T>(proc: ChildProcess, what: string): Promise<T> {
  return new Promise<T>((res, rej) => {
    const onExit = (code: number | null) => rej(new Error(`${what} exited (${code}) before it was ready`));
    proc.once('exit', onExit);
    proc.once('message', (m: T) => {
      proc.off('exit', onExit);
      res(m);
    });
  });
}

let signalsExit = false;

/**
 * Runs `undo` when the harness exits, however it exits (returns what unregisters it): a child
 * with no IPC channel (nginx, wrk, `sluice start`) would outlive a harness that dies, and so would
 * temp dirs. Forked children leave on their own (`disconnect`).
 */
export function atExit(undo: () => void): () => void {
  if (!signalsExit) {
    // A signal's default action skips 'exit' listeners; exiting on it runs them.
    signalsExit = true;
    process.once('SIGINT', () => process.exit(130));
    process.once('SIGTERM', () => process.exit(143));
  }
  process.once('exit', undo);
  return () => process.off('exit', undo);
}

export function killOnExit(proc: ChildProcess): void {
  proc.once(
    'exit',
    atExit(() => proc.kill()),
  );
}

const exited = (proc: ChildProcess) =>
  proc.exitCode !== null || proc.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((res) => proc.once('exit', () => res()));

/** A server variant of bench/http/server-child.ts in its own process. */
export async function startServer(
  name: string,
  variant: string,
  opts: {
    scenario?: SluiceScenario;
    /**
     * Another checkout's bench/http/server-child.ts (e.g. a `git worktree` of `main`): its Sluice,
     * measured in the same run as this one's.
     */
    child?: string;
    /** Node flags beyond {@link NODE_SERVER_FLAGS} (e.g. `--cpu-prof`). */
    flags?: readonly string[];
  } = {},
): Promise<BenchServer> {
  const args = [variant, ...(opts.scenario ? ['--scenario', JSON.stringify(opts.scenario)] : [])];
  const proc = fork(opts.child ?? resolve(import.meta.dirname, 'server-child.ts'), args, {
    execArgv: [...NODE_SERVER_FLAGS, ...(opts.flags ?? [])],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = await firstMessage<{ port: number; pid: number; dbApplicationName?: string }>(proc, name);
  const ask = ipc(proc);
  const app = ready.dbApplicationName;
  return {
    name,
    origin: `http://127.0.0.1:${ready.port}`,
    pid: ready.pid,
    stats: async () => {
      const stats = await ask<ServerStats>({ cmd: 'stats' });
      return app === undefined ? stats : { ...stats, dbCpuUs: await pgBackendsCpuUs(app) };
    },
    reads: async () => {
      const m = await ask<{ reads?: { flows: number; streams: number } }>({ cmd: 'reads' });
      if (m.reads === undefined) throw new Error(`${name} does not count storage reads`);
      return m.reads;
    },
    clicks: async () => {
      const m = await ask<{ clicks?: { stats?: ClicksSection }; error?: string }>({ cmd: 'clicks' });
      if (m.error !== undefined) throw new Error(`${name}: ${m.error}`);
      if (m.clicks?.stats === undefined) throw new Error(`${name} has no click log`);
      return m.clicks.stats;
    },
    clickRows: async () => {
      const m = await ask<{ clicks?: { rows: { all: number; sub1: number } }; error?: string }>({
        cmd: 'clicks',
        count: true,
      });
      if (m.error !== undefined) throw new Error(`${name}: counting clicks failed: ${m.error}`);
      if (m.clicks === undefined) throw new Error(`${name} has no click log`);
      return m.clicks.rows;
    },
    stop: async () => {
      proc.kill('SIGTERM');
      await exited(proc);
    },
  };
}

/**
 * CPU µs used so far by the PostgreSQL backends whose `application_name` is `name` (at
 * `SLUICE_TEST_PG_URL`), read from /proc: the database's share of a server's clicks. Backends only:
 * the WAL writer and checkpointer, which the clicks also keep busy, serve every client of the
 * server and are not counted; nor is a backend that ended since the last reading. NaN when /proc
 * does not show the backends (a database on another machine).
 */
export async function pgBackendsCpuUs(name: string): Promise<number> {
  const { default: pg } = await import('pg');
  const c = new pg.Client({
    connectionString: process.env.SLUICE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  });
  await c.connect();
  try {
    const r = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
      name,
    ]);
    let us = 0;
    for (const { pid } of r.rows) {
      try {
        us += procCpuUs(pid);
      } catch {
        return Number.NaN;
      }
    }
    return us;
  } finally {
    await c.end();
  }
}

/** A free loopback port, for servers that cannot be told to take port 0 and say which they got. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** Where a program is on PATH (or in /usr/sbin, which a non-root PATH may lack), if anywhere. */
export function which(program: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin']) {
    if (dir === '') continue;
    const path = join(dir, program);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {}
  }
  return undefined;
}

const CLOCK_TICK_US = (() => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const hz = Number(r.stdout?.trim());
  return 1e6 / (Number.isFinite(hz) && hz > 0 ? hz : 100);
})();

/** utime + stime of a process (all its threads) from /proc, in µs (clock-tick resolution). */
export function procCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; the fields after it are counted from its ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_US;
}

/**
 * A process's CPU µs so far by thread kind, from /proc/<pid>/task: `main` (the event loop),
 * `v8-helpers` (V8's platform threads: parallel and concurrent GC, background compilation),
 * `libuv` (the thread pool), each named worker thread by its name (Sluice's `sqlite-writer`, the
 * reference's `ref-writer`), `other` for the rest (unnamed workers, the inspector's). A thread that
 * ended is no longer counted, so read a window's before and after with the same threads alive.
 */
export function procThreadsCpuUs(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tasks) {
    try {
      const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const us = (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_US;
      const kind =
        Number(tid) === pid
          ? 'main'
          : comm === 'V8Worker'
            ? 'v8-helpers'
            : comm.startsWith('libuv')
              ? 'libuv'
              : /writer|reader/.test(comm)
                ? comm
                : 'other';
      out[kind] = (out[kind] ?? 0) + us;
    } catch {}
  }
  return out;
}

export function procRss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/**
 * nginx answering `return 302` on a loopback port, one process (no master, no daemon), no access
 * log, keep-alive connections never closed after N requests (as Node's are not). Requests are
 * counted by its stub_status, CPU read from /proc. A string says why it could not be started.
 */
export async function startNginx(name: string): Promise<BenchServer | string> {
  const nginx = which('nginx');
  if (nginx === undefined) return 'nginx is not installed (Debian: apt-get install -y nginx-light)';
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-nginx-'));
  atExit(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'logs'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'nginx.conf'),
    `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  server {
    listen 127.0.0.1:${port};
    location = /nginx_status { stub_status; }
    location / { return 302 https://example.com/; }
  }
}
`,
  );
  const proc = spawn(nginx, ['-p', dir, '-e', `${dir}/logs/error.log`, '-c', join(dir, 'nginx.conf')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  killOnExit(proc);
  let stderr = '';
  proc.stderr!.on('data', (d) => {
    stderr += d;
  });
  const origin = `http://127.0.0.1:${port}`;
  let statusQueries = 0;
  const served = async (): Promise<number> => {
    statusQueries++;
    const text = await (await fetch(`${origin}/nginx_status`)).text();
    // "server accepts handled requests\n a b c": c counts every request, these queries included.
    return Number(text.split('\n')[2]!.trim().split(/\s+/)[2]) - statusQueries;
  };
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) {
      rmSync(dir, { recursive: true, force: true });
      return `nginx exited (${proc.exitCode}): ${stderr.trim()}`;
    }
    try {
      await served();
      break;
    } catch {
      if (i > 500) {
        proc.kill();
        rmSync(dir, { recursive: true, force: true });
        return 'nginx did not answer within 5 s';
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  return {
    name,
    origin,
    pid: proc.pid!,
    stats: async () => ({ requests: await served(), cpuUs: procCpuUs(proc.pid!), rss: procRss(proc.pid!) }),
    reads: () => Promise.reject(new Error('nginx reads nothing')),
    clicks: () => Promise.reject(new Error('nginx has no click log')),
    clickRows: () => Promise.reject(new Error('nginx has no click log')),
    stop: async () => {
      proc.kill('SIGTERM');
      await exited(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** autocannon, forked once into its own process and kept for every load of a benchmark. */
export async function autocannonClient(): Promise<LoadClient> {
  const proc = fork(resolve(import.meta.dirname, 'load-client.ts'), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await firstMessage(proc, 'autocannon client');
  const ask = ipc(proc);
  return {
    name: 'autocannon',
    run: async (spec) => {
      const m = await ask<{ result?: LoadResult; error?: string }>({ run: spec });
      if (m.result === undefined) throw new Error(`autocannon: ${m.error}`);
      return m.result;
    },
    close: async () => {
      proc.kill();
      await exited(proc);
    },
  };
}

/**
 * `wrk` (one thread) when installed, a process per load. Much lighter than autocannon per
 * request, so it leaves more of the machine to the server; it cannot send a fixed amount.
 */
export function wrkClient(): LoadClient | undefined {
  const wrk = which('wrk');
  if (wrk === undefined) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-wrk-'));
  atExit(() => rmSync(dir, { recursive: true, force: true }));
  let scripts = 0;
  const lua = (s: string) => JSON.stringify(s); // the strings here are plain ASCII: same escapes
  return {
    name: 'wrk',
    run: (spec) => {
      if (spec.amount !== undefined) return Promise.reject(new Error('wrk cannot send a fixed amount'));
      const { paths, header, userAgent, subs } = spec.mix;
      const ua = userAgent === undefined ? '' : `["User-Agent"] = ${lua(userAgent)}, `;
      const script = join(dir, `load-${++scripts}.lua`);
      const single = paths.length === 1 && header === undefined && subs === undefined;
      writeFileSync(
        script,
        (single
          ? `wrk.path = ${lua(paths[0]!)}\n${userAgent === undefined ? '' : `wrk.headers["User-Agent"] = ${lua(userAgent)}\n`}`
          : subs !== undefined
            ? // Each request built when sent: its sub1 is drawn from more values than could be built ahead.
              `local paths = {${paths.map(lua).join(',')}}
local values = ${header ? `{${header.values.map(lua).join(',')}}` : 'nil'}
function init(args) math.randomseed(os.time()) end
function request()
  local path = paths[math.random(#paths)]
  if math.random(3) == 1 then path = path .. "?sub1=c" .. math.random(${subs}) end
  local headers = { ${ua}}
  if values then headers[${lua(header?.name ?? '')}] = values[math.random(#values)] end
  return wrk.format(nil, path, headers)
end
`
            : `local paths = {${paths.map(lua).join(',')}}
local values = ${header ? `{${header.values.map(lua).join(',')}}` : 'nil'}
local reqs = {}
function init(args)
  math.randomseed(os.time())
  for i = 1, #paths do
    if values then
      for j = 1, #values do reqs[#reqs + 1] = wrk.format(nil, paths[i], { ${ua}[${lua(header?.name ?? '')}] = values[j] }) end
    else
      reqs[#reqs + 1] = wrk.format(nil, paths[i], { ${ua}})
    end
  end
end
function request() return reqs[math.random(#reqs)] end
`) +
          (spec.rate === undefined
            ? ''
            : `function delay() return ${Math.max(1, Math.round((spec.connections * 1000) / spec.rate))} end\n`) +
          `function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(99)))
end
`,
      );
      const seconds = Math.max(1, Math.round(spec.seconds));
      const args = [
        '-t1',
        `-c${spec.connections}`,
        `-d${seconds}s`,
        '--timeout',
        '5s',
        '-s',
        script,
        spec.origin,
      ];
      return new Promise<LoadResult>((res, rej) => {
        const proc = spawn(wrk, args, { stdio: ['ignore', 'pipe', 'inherit'] });
        killOnExit(proc);
        let out = '';
        proc.stdout.on('data', (d) => {
          out += d;
        });
        proc.once('error', rej);
        proc.once('exit', (code) => {
          const line = out.split('\n').find((l) => l.startsWith('WRK '));
          if (code !== 0 || line === undefined) return rej(new Error(`wrk exited ${code}: ${out}`));
          const [n, us, connect, read, write, status, timeout, p50, p99] = line
            .slice(4)
            .split(' ')
            .map(Number);
          res({
            client: 'wrk',
            sent: n!,
            answered: n!,
            redirects: undefined,
            bad: connect! + read! + write! + status! + timeout!,
            seconds: us! / 1e6,
            p50Ms: p50! / 1000,
            p99Ms: p99! / 1000,
          });
        });
      });
    },
    close: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The load generator named on a command line: `autocannon` (default), `wrk`, or `auto` (wrk if installed). */
export async function loadClient(name: string): Promise<LoadClient> {
  if (name === 'wrk' || name === 'auto') {
    const wrk = wrkClient();
    if (wrk !== undefined) return wrk;
    if (name === 'wrk') throw new Error('wrk is not installed (Debian: apt-get install -y wrk)');
  }
  if (name !== 'autocannon' && name !== 'auto') throw new Error(`unknown load generator ${name}`);
  return autocannonClient();
}

export interface Measurement {
  /** The headline: server CPU µs over the window / requests the server received in it. */
  cpuUsPerReq: number;
  /** The same for the server's main thread alone (Node servers; NaN otherwise). */
  mainCpuUsPerReq: number;
  /** The CPU of its PostgreSQL backends over the window per request (NaN when it has none, or unread). */
  dbCpuUsPerReq: number;
  /** The server's CPU per request by thread kind ({@link procThreadsCpuUs}), from /proc, clock ticks. */
  threadsUsPerReq: Record<string, number>;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Requests the server received in the window, and what the load generator counted. */
  serverRequests: number;
  load: LoadResult;
}

/** One load on one server: its CPU and request count read before and after, from the server itself. */
export async function measure(server: BenchServer, client: LoadClient, spec: Load): Promise<Measurement> {
  const before = await server.stats();
  const threadsBefore = procThreadsCpuUs(server.pid);
  const load = await client.run({ ...spec, origin: server.origin });
  const after = await server.stats();
  const threadsAfter = procThreadsCpuUs(server.pid);
  const serverRequests = after.requests - before.requests;
  const threadsUsPerReq: Record<string, number> = {};
  for (const [k, us] of Object.entries(threadsAfter))
    threadsUsPerReq[k] = (us - (threadsBefore[k] ?? 0)) / Math.max(serverRequests, 1);
  return {
    threadsUsPerReq,
    cpuUsPerReq: (after.cpuUs - before.cpuUs) / Math.max(serverRequests, 1),
    mainCpuUsPerReq:
      after.mainCpuUs === undefined || before.mainCpuUs === undefined
        ? Number.NaN
        : (after.mainCpuUs - before.mainCpuUs) / Math.max(serverRequests, 1),
    dbCpuUsPerReq:
      after.dbCpuUs === undefined || before.dbCpuUs === undefined
        ? Number.NaN
        : (after.dbCpuUs - before.dbCpuUs) / Math.max(serverRequests, 1),
    rps: load.answered / load.seconds,
    p50Ms: load.p50Ms,
    p99Ms: load.p99Ms,
    serverRequests,
    load,
  };
}

export interface Entry {
  server: BenchServer;
  mix: RequestMix;
}

export interface RoundOptions {
  rounds: number;
  /** Each measured window, and the warm-up before the first round (none when absent). */
  window: LoadLength;
  warmup?: LoadLength;
  connections: number;
  /** Requests a second offered to each server (see {@link Load}); absent: as fast as it answers. */
  rate?: number | undefined;
  /**
   * The entry every other one is compared with. When given, it is measured right next to each of
   * them in every round (before in one round, after in the next), and each measurement is paired
   * with that neighbour: on a shared machine whose other load changes within seconds, a pair taken
   * a second apart compares like with like far better than entries ten windows apart. The base's
   * window next to an entry is sent the entry's requests (its paths, headers, user agent): a ratio
   * compares two servers answering the same traffic, since a longer request costs any server more
   * to receive and parse.
   */
  base?: Entry;
  /** Called after each measurement (progress lines), with the requests it was sent. */
  onMeasure?: (round: number, entry: Entry, m: Measurement, mix: RequestMix) => void;
}

export interface Rounds {
  /**
   * Each entry's measurements, one per round (the base's: one per pair, in order, each on the
   * requests of the entry it was paired with).
   */
  of: Map<Entry, Measurement[]>;
  /** The base's measurement paired with each of an entry's, by round (when there is a base). */
  baseOf: Map<Entry, Measurement[]>;
}

/**
 * Each entry loaded for the warm-up (not counted), then measured once per round, in the order
 * A B C … in even rounds and … C B A in odd ones, so slow drift of the machine's other load falls
 * on all alike; with a base, as pairs (base A, B base, base C, … then reversed).
 */
export async function interleave(entries: Entry[], client: LoadClient, opts: RoundOptions): Promise<Rounds> {
  const spec = (mix: RequestMix, length: LoadLength): Load => ({
    mix,
    connections: opts.connections,
    rate: opts.rate,
    ...length,
  });
  const { base } = opts;
  if (opts.warmup !== undefined)
    for (const e of entries) await measure(e.server, client, spec(e.mix, opts.warmup));
  const of = new Map<Entry, Measurement[]>(entries.map((e) => [e, []]));
  const baseOf = new Map<Entry, Measurement[]>(entries.map((e) => [e, []]));
  const take = async (round: number, e: Entry, mix: RequestMix = e.mix) => {
    const m = await measure(e.server, client, spec(mix, opts.window));
    of.get(e)!.push(m);
    opts.onMeasure?.(round, e, m, mix);
    return m;
  };
  const others = entries.filter((e) => e !== base);
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? others : [...others].reverse();
    for (const [i, e] of order.entries()) {
      if (base === undefined) {
        await take(round, e);
      } else if ((round + i) % 2 === 0) {
        const b = await take(round, base, e.mix);
        await take(round, e);
        baseOf.get(e)!.push(b);
      } else {
        await take(round, e);
        baseOf.get(e)!.push(await take(round, base, e.mix));
      }
    }
  }
  if (base !== undefined) baseOf.set(base, of.get(base)!);
  return { of, baseOf };
}

export const median = (xs: readonly number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** The median of a[i]/b[i]: ratios taken pair by pair (or round by round), never of two medians. */
export const roundRatio = (
  a: readonly Measurement[],
  b: readonly Measurement[],
  f: (m: Measurement) => number,
) => median(a.map((m, i) => f(m) / f(b[i]!)));

/** What the figures were taken on, for the report's header. */
export function machine(): string {
  const c = cpus();
  return `${c.length} × ${c[0]?.model.trim() ?? 'CPU'}, Node.js ${process.version}, ${new Date().toISOString().slice(0, 10)}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;
}
