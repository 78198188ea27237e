/**
 * Instrumentation overhead of the outgoing HTTP client: keep-alive loopback GETs through a bare
 * undici Agent vs through Sluice's HttpClient (instrumented base dispatcher + retry loop + capture
 * at debug level, which is off), alternated in rounds in one run; medians and the ratio.
 *
 *   node bench/http-client/overhead.bench.ts [--rounds 11] [--seconds 2] [--concurrency 16]
 */
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Agent } from 'undici';
import { Redactor } from '../../src/config/index.ts';
import { HttpClient } from '../../src/http-client/index.ts';
import { Telemetry } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { median } from '../_util.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '11' },
    seconds: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '16' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);

// The upstream runs in its own process, so what is measured here is the client's own cost.
const upstream = spawn(
  process.execPath,
  [
    '-e',
    `const s = require('node:http').createServer((q, r) => r.writeHead(200, {'content-type': 'text/plain'}).end('ok'));
     s.keepAliveTimeout = 60000; s.listen(0, '127.0.0.1', () => console.log(s.address().port));`,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const port = await new Promise<number>((r) =>
  upstream.stdout!.once('data', (d) => r(Number(String(d).trim()))),
);
const origin = `http://127.0.0.1:${port}`;

const bare = new Agent({ keepAliveTimeout: 10_000, connections: 64 });
const telemetry = new Telemetry({
  clock: systemClock,
  serverId: 'bench',
  version: undefined,
  commit: 'bench',
  prefix: 'sluice',
  controllerBucketsMs: [1],
  httpBucketsMs: [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000],
  taskBucketsMs: [1],
  isLeader: () => true,
  processMetrics: false,
});
const client = new HttpClient({
  telemetry,
  logger: pino({ level: 'info' }, pino.destination('/dev/null')),
  clock: systemClock,
  timeoutMs: 10_000,
  totalTimeoutMs: 30_000,
  retries: 0,
  backoffMs: 100,
  maxBackoffMs: 5000,
  captureBodyBytes: 2048,
  redactor: new Redactor({ secretQueryParams: ['token'] }),
  recentFailures: 50,
  propagateRequestId: true,
});

const variants: Record<string, () => Promise<void>> = {
  'bare undici Agent': async () => {
    const res = await bare.request({ origin, path: '/x', method: 'GET' });
    await res.body.text();
  },
  'instrumented dispatcher': async () => {
    const res = await client.dispatcher.request({ origin, path: '/x', method: 'GET' });
    await res.body.text();
  },
  'Sluice HttpClient': async () => {
    await client.request({ url: `${origin}/x` });
  },
};

/** Requests per second and this process's CPU microseconds per request. */
async function round(call: () => Promise<void>): Promise<[number, number]> {
  let done = 0;
  const cpu = process.cpuUsage();
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await call();
        done++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return [done / seconds, (used.user + used.system) / done];
}

const rps: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
const cpu: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (const call of Object.values(variants)) await round(call); // warm-up
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? Object.keys(variants) : Object.keys(variants).reverse();
  for (const name of order) {
    const [a, b] = await round(variants[name]!);
    rps[name]!.push(a);
    cpu[name]!.push(b);
  }
}
const names = Object.keys(variants);
const base = names[0]!;
console.log(
  `HTTP client overhead: ${rounds} rounds × ${seconds}s, ${concurrency} concurrent keep-alive GETs, upstream in another process`,
);
for (const name of names) {
  console.log(
    `  ${name.padEnd(24)} ${median(rps[name]!).toFixed(0).padStart(6)} req/s  ${median(cpu[name]!).toFixed(1).padStart(6)} client CPU-µs/req` +
      `  req/s ratio ${(median(rps[name]!) / median(rps[base]!)).toFixed(3)}  CPU ratio ${(median(cpu[name]!) / median(cpu[base]!)).toFixed(3)}`,
  );
}
console.log(
  `  target: Sluice HttpClient req/s ratio ≥ 0.97; requests counted by the instrumentation: ${telemetry.http.recorder.count}`,
);
await client.close();
await bare.close();
upstream.kill();
