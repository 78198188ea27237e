import { check, closedLoop, type NodeProcess, type Outcome, sleep, startCluster } from '../harness.ts';

interface Metrics {
  host: { memory: { rss_bytes: number; heap_used_bytes?: number } };
  controllers: Record<string, unknown>;
  cache: { entries: number; max_entries: number };
}

const MB = 1024 * 1024;

/**
 * Load of random unknown paths, slugs and ACP paths: memory stays flat and the recorder keeps one
 * entry per registered route (every unmatched path shares `__unmatched__`); the routing cache stays
 * within its bound.
 */
export async function memory(o: { seconds: number }): Promise<Outcome> {
  const out: Outcome = { scenario: 'memory', figures: {}, checks: [] };
  const c = await startCluster({ ids: ['mem-a'], yaml: 'cache:\n  max_entries: 2000\n' });
  try {
    const [n] = c.nodes as [NodeProcess];
    // A marker no route has, so a random path that became a recorder entry is easy to spot.
    const random = () => `q9${Math.random().toString(36).slice(2, 10)}`;
    const shapes = [
      () => `/go/${random()}`,
      () => `/${random()}/${random()}`,
      () => `/acp/${random()}`,
      () => `/go/${random()}?utm=${random()}`,
      () => `/metrics/${random()}`,
    ];
    let i = 0;
    let done = false;
    const load = closedLoop({
      url: n.url,
      paths: () => shapes[i++ % shapes.length]!(),
      workers: 32,
      until: () => done,
    });
    const samples: { t: number; rss: number }[] = [];
    const t0 = performance.now();
    const step = Math.max(500, Math.min(5000, (o.seconds * 1000) / 20));
    while (performance.now() - t0 < o.seconds * 1000) {
      await sleep(step);
      const m = (await c.acp<Metrics>(n, '/acp/system/metrics')).body;
      samples.push({ t: performance.now() - t0, rss: m.host.memory.rss_bytes });
    }
    done = true;
    const tally = await load;
    const m = (await c.acp<Metrics>(n, '/acp/system/metrics')).body;
    const keys = Object.keys(m.controllers);
    const unexpected = keys.filter((k) => k.includes('q9'));
    // Memory after the first fifth (warm) against the end, and the peak.
    const warm = samples[Math.floor(samples.length / 5)]!.rss;
    const end = samples.at(-1)!.rss;
    const peak = Math.max(...samples.map((s) => s.rss));
    const secondHalf = samples.slice(Math.floor(samples.length / 2));
    const growth = secondHalf.at(-1)!.rss - secondHalf[0]!.rss;
    out.figures = {
      seconds: o.seconds,
      requests: tally.answered,
      'req/s': Math.round(tally.answered / o.seconds),
      'recorder entries (controllers keys)': keys.length,
      'cache entries / max': `${m.cache.entries} / ${m.cache.max_entries}`,
      'RSS after warm-up MB': Math.round(warm / MB),
      'RSS peak MB': Math.round(peak / MB),
      'RSS end MB': Math.round(end / MB),
      'RSS growth over the second half MB': Number((growth / MB).toFixed(1)),
    };
    check(out, 'no random path became a recorder entry', unexpected.length === 0, unexpected.slice(0, 5));
    check(
      out,
      'recorder entries stay few (registered routes + __unmatched__)',
      keys.length < 40,
      keys.length,
    );
    check(out, 'every request answered (no transport errors)', tally.failed === 0, tally.toJSON());
    if (o.seconds >= 120) {
      // Only a long run says anything about a leak; a short one is still warming up.
      check(out, 'RSS flat over the second half (growth < 10 % of the warm RSS)', growth < warm * 0.1, {
        growth,
        warm,
      });
    }
    return out;
  } finally {
    await c.close();
  }
}
