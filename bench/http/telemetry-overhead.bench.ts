/**
 * What full per-route telemetry costs a served route: Sluice's server with a fixed 200 route,
 * recording on and off, each in its own process, the load generator in another, measured in
 * interleaved rounds after a warm-up (bench/http/load.ts). The headline is the server's own CPU
 * µs per request; req/s depends on what the rest of the machine leaves to the server. The two are
 * measured in pairs, one right after the other, and the ratios taken pair by pair.
 *
 *   node bench/http/telemetry-overhead.bench.ts [--rounds 9] [--seconds 2] [--connections 50]
 *        [--client auto|wrk|autocannon]
 */
import { parseArgs } from 'node:util';
import { interleave, loadClient, machine, median, roundRatio, startServer } from './load.ts';

const { values } = parseArgs({
  options: {
    // Nine short rounds: on two shared cores, five rounds left the median a few percent adrift.
    rounds: { type: 'string', default: '9' },
    seconds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '50' },
    client: { type: 'string', default: 'auto' },
  },
});
const client = await loadClient(values.client);
const off = await startServer('telemetry off', 'telemetry-off');
const on = await startServer('telemetry on (default)', 'telemetry-on');
const entries = [off, on].map((server) => ({ server, mix: { paths: ['/ping'] } }));
console.log(`machine: ${machine()}`);
try {
  const results = await interleave(entries, client, {
    base: entries[0],
    rounds: Number(values.rounds),
    window: { seconds: Number(values.seconds) },
    warmup: { seconds: 2 },
    connections: Number(values.connections),
  });
  const [a, b] = entries.map((e) => results.of.get(e)!);
  const paired = results.baseOf.get(entries[1]!)!;
  console.log(
    `route with full telemetry vs off (${client.name}): ${values.rounds} rounds × ${values.seconds} s, ` +
      `${values.connections} connections (targets: CPU ≤ 1.05, req/s ≥ 0.95)`,
  );
  for (const [name, ms, base] of [
    ['telemetry off', a!, a!],
    ['telemetry on (default)', b!, paired],
  ] as const) {
    console.log(
      `  ${name.padEnd(24)} ${median(ms.map((m) => m.cpuUsPerReq)).toFixed(1)} server CPU-µs/req ` +
        `(× ${roundRatio(ms, base, (m) => m.cpuUsPerReq).toFixed(3)})  ${median(ms.map((m) => m.rps)).toFixed(0)} req/s ` +
        `(× ${roundRatio(ms, base, (m) => m.rps).toFixed(3)})  p99 ${median(ms.map((m) => m.p99Ms)).toFixed(1)} ms` +
        `${ms.some((m) => m.load.bad > 0) ? '  (unexpected answers!)' : ''}`,
    );
  }
} finally {
  await client.close();
  await Promise.all([off.stop(), on.stop()]);
}
