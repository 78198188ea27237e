/**
 * One server under load, in its own process so the load generator's CPU is not counted:
 * `node bench/http/server-child.ts <variant>` prints its port, then answers `cpu` messages on IPC
 * with its CPU microseconds so far. Variants:
 *   telemetry-on   Sluice's server (createServer) with a fixed 200 route, recording on
 *   telemetry-off  the same with per-route recording off (headers stay)
 *   bare-302       a bare fastify app (no logger, no hooks) answering a fixed 302
 *   sluice-go      a real Sluice node (startNode) serving /go/bench from its cache
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.ts';
import { createServer } from '../../src/http/index.ts';
import { startNode } from '../../src/main.ts';
import { Telemetry } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';

const variant = process.argv[2];
let port: number;

if (variant === 'telemetry-on' || variant === 'telemetry-off') {
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
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
} else if (variant === 'bare-302') {
  const app = Fastify();
  app.get('/go/:slug', (_req, reply) => {
    reply.code(302).header('location', 'https://example.com/').send();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
} else if (variant === 'sluice-go') {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  writeFileSync(
    join(dir, 'config.bench.yml'),
    `app:\n  server:\n    port: 0\nstorage:\n  sqlite:\n    path: ${join(dir, 'b.db')}\nobservability:\n  logging:\n    level: warn\n`,
  );
  const node = await startNode({ configDir: dir, mode: 'bench', env: {}, cwd: dir });
  const flow = await node.storage.flows.create({
    slug: 'bench',
    name: 'b',
    status: 'active',
    rotation: 'weight',
  });
  for (let i = 0; i < 5; i++) {
    await node.storage.streams.create({
      flow_id: flow.id,
      name: `s${i}`,
      type: i === 0 ? 'forced' : 'regular',
      position: i,
      weight: 100 * (i + 1),
      status: 'active',
      filters: i === 0 ? { countries_include: ['JP'] } : { countries_exclude: ['US'] },
      target_url: `https://example.com/${i}?s={stream}`,
      redirect_code: 302,
    });
  }
  port = Number(new URL(node.url).port);
} else {
  throw new Error(`unknown variant ${variant}`);
}

process.on('message', (m) => {
  if (m === 'cpu') {
    const u = process.cpuUsage();
    process.send!({ cpu: u.user + u.system });
  }
});
process.send!({ port });
