/**
 * `GET /go/:slug` on a real Sluice node (cache hit, 5 streams with country filters, weighted
 * rotation, full telemetry) against a bare fastify route answering a fixed 302, alternated in one run.
 *
 *   node bench/routing/go-load.bench.ts [--rounds 5] [--seconds 4] [--connections 50]
 */
import { parseArgs } from 'node:util';
import { compare, report } from '../http/load.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
  },
});
const results = await compare(
  [
    { name: 'bare fastify fixed 302', child: 'bare-302', path: '/go/bench' },
    { name: 'Sluice /go/:slug', child: 'sluice-go', path: '/go/bench' },
  ],
  { rounds: Number(values.rounds), seconds: Number(values.seconds), connections: Number(values.connections) },
);
report(
  `/go/:slug vs a bare 302: ${values.rounds} rounds × ${values.seconds}s, ${values.connections} connections (target: req/s ≥ 0.70)`,
  results,
  'bare fastify fixed 302',
);
