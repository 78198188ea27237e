/**
 * One server under load, in its own process, so neither the load generator's CPU nor another
 * server's is counted in its own:
 *
 *   node bench/http/server-child.ts <variant> [--port N] [--scenario JSON]
 *
 * With an IPC channel (forked by bench/http/load.ts) it sends `{ port, pid }` once listening and
 * answers `stats` with its CPU µs so far (`process.cpuUsage()`, all its threads; and its main
 * thread's alone, `process.threadCpuUsage()`), the requests its
 * HTTP server has received and its RSS; a Sluice variant also answers `reads` with how many times
 * the routing cache read a flow and its streams from storage, and `clicks` with its click log's
 * figures (and with `count`, the clicks its database holds and how many carry a sub1, counted on a
 * connection of its own; the reference programs answer that count too). A server writing to
 * PostgreSQL names its connections (`application_name`) and says the name once listening, so that
 * the harness can read its backends' CPU. Without IPC (the start-up benchmark)
 * it only listens. Each variant imports only what it needs, so a bare peer's start-up and memory
 * carry nothing of Sluice's. Variants:
 *   node-http-302  bare `node:http`: a fixed 302 with a Location header (and `/healthz`)
 *   fastify-302    a bare fastify app (no logger, no hooks): the same 302 on `/go/:slug`, `/healthz`
 *   sluice         a real Sluice node (startNode, SQLite in a temp dir) with flows seeded through
 *                  storage as `--scenario` describes (see `SluiceScenario`)
 *   telemetry-on   Sluice's server (createServer) with a fixed 200 route, recording on
 *   telemetry-off  the same with per-route recording off (the tracing headers stay)
 *   ref-ua         the reference program for `/go` on SQLite (bench/http/peers/ref-ua.ts): the same
 *                  job as Sluice's `/go` by a plain fastify app, its flows from `--scenario`
 *   ref-ua-pg      the same writing its clicks to a schema of its own on PostgreSQL
 *                  (bench/http/peers/ref-ua-pg.ts)
 */
import type { Server } from 'node:http';
import { parseArgs } from 'node:util';
import type { ClicksSection } from '../../src/telemetry/index.ts';
import type { RefProgram } from './peers/ref-ua.ts';
import { type SluiceScenario, seedScenario } from './scenarios.ts';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { port: { type: 'string', default: '0' }, scenario: { type: 'string' } },
});
const variant = positionals[0];
const port = Number(values.port);
const host = '127.0.0.1';
const LOCATION = 'https://example.com/';

let server: Server;
let reads: (() => { flows: number; streams: number }) | undefined;
/** Sluice: its click log's figures; Sluice and the reference programs: the clicks their database holds. */
let clicks:
  | ((count: boolean) => Promise<{ stats?: ClicksSection; rows?: { all: number; sub1: number } }>)
  | undefined;
/** Whose PostgreSQL backends do this server's writing: their `application_name` (see `stats` in load.ts). */
let dbApplicationName: string | undefined;
const pgUrl = process.env.SLUICE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

if (variant === 'node-http-302') {
  const { createServer } = await import('node:http');
  server = createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    res.writeHead(302, { location: LOCATION }).end();
  });
  await new Promise<void>((res) => server.listen(port, host, res));
} else if (variant === 'fastify-302') {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  app.get('/go/:slug', (_req, reply) => {
    reply.code(302).header('location', LOCATION).send();
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  await app.listen({ port, host });
  server = app.server;
} else if (variant === 'sluice') {
  const { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { randomBytes } = await import('node:crypto');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { startNode } = await import('../../src/main.ts');
  const { openPostgres, openSqlite } = await import('../../src/storage/index.ts');
  const { systemClock } = await import('../../src/time/index.ts');
  const scenario = JSON.parse(values.scenario ?? '{"flows":0}') as SluiceScenario;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const schema =
    scenario.backend === 'postgres' ? `sluice_bench_${randomBytes(4).toString('hex')}` : undefined;
  process.on('SIGTERM', () => {
    if (schema === undefined) process.exit(0);
    void (async () => {
      const { default: pg } = await import('pg');
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    })().finally(() => process.exit(0));
  });
  // The shipped defaults but for the listening address and the database (production's
  // Prometheus exposition on, info logs: no line is written per click either way).
  const storage =
    schema === undefined
      ? `storage:\n  sqlite:\n    path: ${join(dir, 'b.db')}\n`
      : // Its connections named after its schema, so the harness finds their backends.
        `storage:\n  driver: postgres\n  postgres:\n    url: ${pgUrl}${pgUrl.includes('?') ? '&' : '?'}application_name=${schema}\n    schema: ${schema}\n`;
  dbApplicationName = schema;
  writeFileSync(
    join(dir, 'config.bench.yml'),
    `app:\n  server:\n    host: ${host}\n    port: ${port}\n${storage}` +
      'observability:\n  metrics:\n    prometheus_enabled: true\n  logging:\n    level: info\n' +
      (scenario.config ?? ''),
  );
  if (scenario.flows > 0 && schema !== undefined) {
    const seed = openPostgres({ url: pgUrl, poolMax: 2, schema, clock: systemClock });
    await seed.migrate();
    await seedScenario(seed, scenario);
    await seed.close();
  } else if (scenario.flows > 0) {
    // Seeded through storage before the node starts, on tmpfs where there is one: SQLite syncs
    // each insert to disk, and 11,000 of them took 20 s on this machine (0.7 s on tmpfs). The
    // node then runs on a copy in the temp dir, on disk as a deployment's would be.
    const shm = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    const seedDir = mkdtempSync(join(shm, 'sluice-bench-seed-'));
    const seed = openSqlite(join(seedDir, 'b.db'), systemClock);
    await seed.migrate();
    await seedScenario(seed, scenario);
    await seed.close(); // the last connection closing checkpoints the WAL into the file
    copyFileSync(join(seedDir, 'b.db'), join(dir, 'b.db'));
    rmSync(seedDir, { recursive: true, force: true });
  }
  const node = await startNode({ configDir: dir, mode: 'bench', env: {}, cwd: dir });
  // Counted here, around the storage the routing cache reads through: nothing is added to src/.
  const flows = node.storage.flows;
  const streams = node.storage.streams;
  const count = { flows: 0, streams: 0 };
  const getBySlug = flows.getBySlug.bind(flows);
  const ofFlow = streams.ofFlow.bind(streams);
  flows.getBySlug = (slug) => {
    count.flows++;
    return getBySlug(slug);
  };
  streams.ofFlow = (id) => {
    count.streams++;
    return ofFlow(id);
  };
  reads = () => ({ ...count });
  // Counted on a connection of its own, as an operator's query would be.
  clicks = async (count) => {
    const stats = node.clickLog.stats();
    if (!count) return { stats };
    if (schema === undefined) {
      const { DatabaseSync } = await import('node:sqlite');
      const db = new DatabaseSync(join(dir, 'b.db'), { readOnly: true });
      try {
        const row = db.prepare('SELECT COUNT(*) AS n, COUNT(sub1) AS s FROM clicks').get() as {
          n: number;
          s: number;
        };
        return { stats, rows: { all: row.n, sub1: row.s } };
      } finally {
        db.close();
      }
    }
    const { default: pg } = await import('pg');
    const c = new pg.Client({ connectionString: pgUrl });
    await c.connect();
    try {
      const r = await c.query<{ n: string; s: string }>(
        `SELECT COUNT(*) AS n, COUNT(sub1) AS s FROM ${schema}.clicks`,
      );
      return { stats, rows: { all: Number(r.rows[0]!.n), sub1: Number(r.rows[0]!.s) } };
    } finally {
      await c.end();
    }
  };
  server = node.app.server;
} else if (variant === 'ref-ua' || variant === 'ref-ua-pg') {
  const scenario = JSON.parse(values.scenario ?? '{"flows":0}') as SluiceScenario;
  let ref: RefProgram;
  if (variant === 'ref-ua') {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { startRefSqlite } = await import('./peers/ref-ua.ts');
    // In the temp dir, on disk, as the Sluice node's file.
    const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-ref-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    ref = await startRefSqlite({ scenario, path: join(dir, 'ref.db'), port, host });
  } else {
    const { startRefPostgres } = await import('./peers/ref-ua-pg.ts');
    const pgRef = await startRefPostgres({ scenario, url: pgUrl, port, host });
    dbApplicationName = pgRef.applicationName;
    ref = pgRef;
  }
  process.on('SIGTERM', () => void ref.stop().finally(() => process.exit(0)));
  clicks = async (count) => (count ? { rows: await ref.rows() } : {});
  server = ref.app.server;
} else if (variant === 'telemetry-on' || variant === 'telemetry-off') {
  const { pino } = await import('pino');
  const { loadConfig } = await import('../../src/config/index.ts');
  const { createServer } = await import('../../src/http/index.ts');
  const { Telemetry } = await import('../../src/telemetry/index.ts');
  const { systemClock } = await import('../../src/time/index.ts');
  const { config } = loadConfig({ configDir: 'config', mode: 'test', env: {} });
  const telemetry = new Telemetry({
    clock: systemClock,
    serverId: 'bench',
    version: undefined,
    commit: 'bench',
    prefix: 'sluice',
    controllerBucketsMs: config.observability.metrics.controller_buckets_ms,
    httpBucketsMs: [1],
    taskBucketsMs: [1],
    isLeader: () => true,
    processMetrics: false,
  });
  const logger = pino({ level: 'info' }, pino.destination('/dev/null'));
  const app = createServer({
    config,
    logger,
    telemetry,
    serverId: 'bench',
    instrument: variant === 'telemetry-on',
  });
  app.get('/ping', async () => ({ ok: true }));
  await app.listen({ port, host });
  server = app.server;
} else {
  throw new Error(`unknown variant ${variant}`);
}

if (process.send !== undefined) {
  // One listener more on every server alike: the divisor of CPU-µs/request is what the server got.
  let requests = 0;
  server.on('request', () => {
    requests++;
  });
  process.on('message', (m: { id: number; cmd: 'stats' | 'reads' | 'clicks'; count?: boolean }) => {
    if (m.cmd === 'stats') {
      const u = process.cpuUsage();
      const main = process.threadCpuUsage();
      process.send!({
        id: m.id,
        cpuUs: u.user + u.system,
        mainCpuUs: main.user + main.system,
        requests,
        rss: process.memoryUsage.rss(),
      });
    } else if (m.cmd === 'clicks') {
      if (clicks === undefined) process.send!({ id: m.id });
      else
        clicks(m.count === true).then(
          (c) => process.send!({ id: m.id, clicks: c }),
          (err: Error) => process.send!({ id: m.id, error: err.message }),
        );
    } else {
      process.send!({ id: m.id, reads: reads?.() });
    }
  });
  // A harness that dies leaves no server behind.
  process.on('disconnect', () => process.exit(0));
  process.send({ port: (server.address() as { port: number }).port, pid: process.pid, dbApplicationName });
}
