/**
 * What Sluice costs away from the warm hot path:
 * - start-up: from spawning the process to the first `/healthz` 200, for `sluice start` on an empty
 *   database (it migrates) and on an existing one (a restart), against a bare fastify app and bare
 *   `node:http` started the same way (same Node flags as `npm start`);
 * - idle RSS one second after that first 200;
 * - a cache miss: a burst of concurrent requests to one cold slug on a running node, how many
 *   times storage was read (flow, streams), and when the first and the last answer came, against
 *   the same burst once the slug is cached, and a burst to a slug that has no flow.
 * Rounds are interleaved; medians are reported.
 *
 *   node bench/routing/cold-start.bench.ts [--rounds 3] [--burst 50] [--slugs 10]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import {
  atExit,
  type BenchServer,
  freePort,
  killOnExit,
  machine,
  median,
  NODE_SERVER_FLAGS,
  procRss,
  startServer,
} from '../http/load.ts';
import { COUNTRIES, type SluiceScenario, slugOf } from '../http/scenarios.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    burst: { type: 'string', default: '50' },
    slugs: { type: 'string', default: '10' },
  },
});
const ROUNDS = Number(values.rounds);
const BURST = Number(values.burst);
const SLUGS = Number(values.slugs);
const CLI = resolve(import.meta.dirname, '../../src/cli.ts');
const CHILD = resolve(import.meta.dirname, '../http/server-child.ts');
const IDLE_MS = 1000;

console.log(`machine: ${machine()}`);

/** 200 from GET /healthz, or false while nothing listens yet. */
const healthy = (port: number) =>
  new Promise<boolean>((res) => {
    const req = get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (r) => {
      r.resume();
      res(r.statusCode === 200);
    });
    req.once('error', () => res(false));
  });

const exited = (p: ChildProcess) =>
  p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise((r) => p.once('exit', r));

/** Spawns a server, polls /healthz every 2 ms until a 200, waits a second, reads its RSS, stops it. */
async function startOnce(args: (port: number) => string[]): Promise<{ ms: number; rssMb: number }> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = spawn(process.execPath, [...NODE_SERVER_FLAGS, ...args(port)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  killOnExit(proc);
  try {
    while (!(await healthy(port))) {
      if (proc.exitCode !== null)
        throw new Error(`server exited (${proc.exitCode}) before /healthz answered`);
      if (performance.now() - t0 > 30_000) throw new Error('no /healthz 200 within 30 s');
      await sleep(2);
    }
    const ms = performance.now() - t0;
    await sleep(IDLE_MS);
    return { ms, rssMb: procRss(proc.pid!) / 2 ** 20 };
  } finally {
    proc.kill('SIGTERM');
    await exited(proc);
  }
}

function sluiceDir(port: number, dir: string): string {
  writeFileSync(
    join(dir, 'config.bench.yml'),
    `app:\n  server:\n    host: 127.0.0.1\n    port: ${port}\nstorage:\n  sqlite:\n    path: ${join(dir, 'b.db')}\n` +
      'observability:\n  metrics:\n    prometheus_enabled: true\n  logging:\n    level: info\n',
  );
  return dir;
}

const START = ['Sluice, first start (empty database)', 'Sluice, restart', 'bare fastify', 'bare node:http'];
const starts = new Map<string, { ms: number; rssMb: number }[]>(START.map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-start-'));
  const forget = atExit(() => rmSync(dir, { recursive: true, force: true }));
  const sluice = (port: number) => [CLI, 'start', '--config-dir', sluiceDir(port, dir), '--mode', 'bench'];
  const order: [string, (port: number) => string[]][] = [
    [START[0]!, sluice],
    [START[1]!, sluice],
    [START[2]!, (port) => [CHILD, 'fastify-302', '--port', String(port)]],
    [START[3]!, (port) => [CHILD, 'node-http-302', '--port', String(port)]],
  ];
  // The restart must follow the first start; the peers go before them in odd rounds.
  if (round % 2 === 1) order.push(...order.splice(0, 2));
  for (const [name, args] of order) starts.get(name)!.push(await startOnce(args));
  rmSync(dir, { recursive: true, force: true });
  forget();
}
console.log(`\nstart-up, ${ROUNDS} rounds (medians; RSS ${IDLE_MS} ms after the first 200)`);
console.log('| process | to first /healthz 200 | idle RSS |');
console.log('|---|---:|---:|');
for (const [name, xs] of starts) {
  console.log(
    `| ${name} | ${median(xs.map((x) => x.ms)).toFixed(0)} ms | ${median(xs.map((x) => x.rssMb)).toFixed(0)} MB |`,
  );
}

/** Fires `n` requests at once on warm keep-alive connections; first and last answer in ms. */
async function burst(pool: Pool, path: string, n: number) {
  const statuses = new Set<number>();
  const t0 = performance.now();
  const times = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await pool.request({
        path,
        method: 'GET',
        headers: { 'cf-ipcountry': COUNTRIES[i % COUNTRIES.length]! },
      });
      const t = performance.now() - t0;
      statuses.add(r.statusCode);
      await r.body.dump();
      return t;
    }),
  );
  return { first: Math.min(...times), last: Math.max(...times), statuses };
}

interface BurstRow {
  reads: { flows: number; streams: number }[];
  cpuUs: number[];
  first: number[];
  last: number[];
  statuses: Set<number>;
}
const rows = new Map<string, BurstRow>();
/** No request at all: what the reads and CPU questions over IPC cost the node themselves. */
const IDLE = 'no request (the measurement itself)';
async function measureBurst(server: BenchServer, pool: Pool, name: string, path: string, n = BURST) {
  const [reads0, stats0] = [await server.reads(), await server.stats()];
  const b = n === 0 ? { first: Number.NaN, last: Number.NaN, statuses: [] } : await burst(pool, path, n);
  const [reads1, stats1] = [await server.reads(), await server.stats()];
  const r = rows.get(name) ?? { reads: [], cpuUs: [], first: [], last: [], statuses: new Set() };
  rows.set(name, r);
  r.reads.push({ flows: reads1.flows - reads0.flows, streams: reads1.streams - reads0.streams });
  r.cpuUs.push(stats1.cpuUs - stats0.cpuUs);
  r.first.push(b.first);
  r.last.push(b.last);
  for (const s of b.statuses) r.statuses.add(s);
}

/** Flows that only warm the node up (after the 2 × SLUGS measured ones). */
const WARM_FLOWS = 50;
const shapes: [string, SluiceScenario][] = [
  ['10 streams', { flows: 2 * SLUGS + WARM_FLOWS, streams: 10, macros: 'all', country: true }],
  ['100 streams', { flows: 2 * SLUGS + WARM_FLOWS, streams: 100, macros: 'all', country: true }],
];
const nodes = await Promise.all(shapes.map(([name, scenario]) => startServer(name, 'sluice', { scenario })));
const pools = nodes.map((n) => new Pool(n.origin, { connections: BURST }));
try {
  // Every connection opened, and the node warmed up as one that has served a while is (its JIT
  // having seen misses, hits and unknown slugs) before anything is measured.
  for (const [k, pool] of pools.entries()) {
    await burst(pool, '/healthz', BURST);
    for (let j = 0; j < 4 * WARM_FLOWS; j++) {
      await burst(
        pool,
        j % 4 === 3 ? `/go/warm-nope-${j}` : `/go/${slugOf(shapes[k]![1], 2 * SLUGS + (j % WARM_FLOWS))}`,
        BURST,
      );
    }
  }
  for (let i = 0; i < SLUGS; i++) {
    for (const [k, [shape, scenario]] of shapes.entries()) {
      const [node, pool] = [nodes[k]!, pools[k]!];
      const path = `/go/${slugOf(scenario, i)}`;
      await measureBurst(node, pool, `${BURST} at once, cold slug, ${shape}`, path);
      await measureBurst(node, pool, `${BURST} at once, the same slug cached, ${shape}`, path);
      await measureBurst(
        node,
        pool,
        `${BURST} at once, unknown slug (no flow), ${shape} node`,
        `/go/nope-${i}`,
      );
      const alone = `/go/${slugOf(scenario, SLUGS + i)}`;
      await measureBurst(node, pool, `1 request, cold slug, ${shape}`, alone, 1);
      await measureBurst(node, pool, `1 request, the same slug cached, ${shape}`, alone, 1);
      await measureBurst(node, pool, IDLE, '', 0);
    }
  }
} finally {
  await Promise.all(pools.map((p) => p.close()));
  await Promise.all(nodes.map((n) => n.stop()));
}
const idleUs = median(rows.get(IDLE)!.cpuUs);
rows.delete(IDLE);
console.log(`\nrequests to one slug at once, on warm keep-alive connections, ${SLUGS} slugs each (medians)`);
console.log(
  `server CPU: over the requests, net of what measuring costs the node (${(idleUs / 1000).toFixed(2)} ms)`,
);
console.log(
  '| requests | storage reads: flow + streams | server CPU | first answer | last answer | statuses |',
);
console.log('|---|---:|---:|---:|---:|---|');
for (const [name, r] of rows) {
  console.log(
    `| ${name} | ${median(r.reads.map((x) => x.flows))} + ${median(r.reads.map((x) => x.streams))} ` +
      `(max ${Math.max(...r.reads.map((x) => x.flows + x.streams))}) | ` +
      `${((median(r.cpuUs) - idleUs) / 1000).toFixed(2)} ms | ${median(r.first).toFixed(1)} ms | ` +
      `${median(r.last).toFixed(1)} ms | ${[...r.statuses].join(', ')} |`,
  );
}
console.log(`after: ${machine()}`);
