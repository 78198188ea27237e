/**
 * What full per-route telemetry costs a served route: the same route with recording on and off,
 * alternated over rounds in one run (autocannon on loopback, server in its own process).
 *
 *   node bench/http/telemetry-overhead.bench.ts [--rounds 9] [--seconds 3] [--connections 50]
 */
import { parseArgs } from 'node:util';
import { compare, report } from './load.ts';

const { values } = parseArgs({
  options: {
    // Nine short rounds: on two shared cores, five rounds left the median a few percent adrift.
    rounds: { type: 'string', default: '9' },
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
  },
});
const results = await compare(
  [
    { name: 'telemetry off', child: 'telemetry-off', path: '/ping' },
    { name: 'telemetry on (default)', child: 'telemetry-on', path: '/ping' },
  ],
  { rounds: Number(values.rounds), seconds: Number(values.seconds), connections: Number(values.connections) },
);
report(
  `route with full telemetry vs off: ${values.rounds} rounds × ${values.seconds}s, ${values.connections} connections (targets: req/s ≥ 0.95, CPU ≤ 1.05)`,
  results,
  'telemetry off',
);
