/**
 * autocannon in a process of its own (forked by bench/http/load.ts), so the CPU it spends
 * generating load is never the server's and never slows the harness that reads the server's
 * figures. It stays up for a whole benchmark: each `{ id, run }` message is one load, answered
 * with `{ id, result }`.
 */
import autocannon from 'autocannon';
import type { LoadResult, LoadSpec } from './load.ts';

async function run(spec: LoadSpec): Promise<LoadResult> {
  const { paths, header, userAgent, subs } = spec.mix;
  const ua: Record<string, string> = userAgent === undefined ? {} : { 'user-agent': userAgent };
  const single = paths.length === 1 && header === undefined && subs === undefined;
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(Math.random() * xs.length)]!;
  const path = () =>
    subs !== undefined && Math.random() < 1 / 3
      ? `${pick(paths)}?sub1=c${1 + Math.floor(Math.random() * subs)}`
      : pick(paths);
  const out = await autocannon({
    url: single ? `${spec.origin}${paths[0]}` : spec.origin,
    headers: ua,
    connections: spec.connections,
    ...(spec.rate === undefined ? {} : { overallRate: spec.rate }),
    pipelining: 1,
    // autocannon notices the end (time up, or the amount answered) only at its sampling tick,
    // 1 s by default: an idle second at the end of every short load.
    sampleInt: 100,
    ...(spec.amount === undefined ? { duration: spec.seconds } : { amount: spec.amount }),
    ...(single
      ? {}
      : {
          // A random slug (and country) per request, as many clients of a real audience would send.
          requests: [
            {
              setupRequest: (req) => ({
                ...req,
                path: path(),
                headers:
                  header === undefined
                    ? { ...req.headers, ...ua }
                    : { ...ua, [header.name]: pick(header.values) },
              }),
            },
          ],
        }),
  });
  return {
    client: 'autocannon',
    sent: out.requests.sent,
    answered: out.requests.total,
    redirects: out['3xx'],
    bad: out['1xx'] + out['4xx'] + out['5xx'] + out.errors + out.timeouts,
    seconds: (out.finish.getTime() - out.start.getTime()) / 1000,
    p50Ms: out.latency.p50,
    p99Ms: out.latency.p99,
  };
}

process.on('message', (m: { id: number; run: LoadSpec }) => {
  run(m.run).then(
    (result) => process.send!({ id: m.id, result }),
    (err: Error) => process.send!({ id: m.id, error: err.message }),
  );
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true });
