import autocannon from 'autocannon';
import {
  apiErrorLines,
  check,
  closedLoop,
  type Outcome,
  PERSON,
  persistedHits,
  seedFlow,
  startCluster,
  Tally,
} from '../harness.ts';

type Controllers = Record<string, { count: number; errors: number }>;

/**
 * Nothing lost under load: two node processes on one PostgreSQL, `connections` autocannon
 * connections split over them on `/go/:slug` (one request in ten to an unknown slug) for about
 * `seconds`, plus ACP calls (lists, and creates with an invalid body). Then SIGTERM to both.
 */
export async function load(o: { seconds: number; connections: number }): Promise<Outcome> {
  const out: Outcome = { scenario: 'load', figures: {}, checks: [] };
  const c = await startCluster({ ids: ['load-a', 'load-b'] });
  try {
    const flowId = await seedFlow(c.store, 'load');
    await seedFlow(c.store, 'warm');
    const perNode = Math.max(1, Math.floor(o.connections / c.nodes.length));

    // A fixed number of requests (not a duration) so autocannon waits for every answer; the
    // number comes from a warm-up of both nodes at once on another flow, so the run lasts about
    // `seconds` (a little more: the ACP calls share the machine).
    const warm = await Promise.all(
      c.nodes.map((n) =>
        autocannon({ url: `${n.url}/go/warm`, connections: perNode, duration: 2, headers: PERSON }),
      ),
    );

    const before = await Promise.all(
      c.nodes.map(
        async (n) => (await c.acp<{ controllers: Controllers }>(n, '/acp/system/metrics')).body.controllers,
      ),
    );
    let done = false;
    const acpTally = new Tally();
    const acpLoad = Promise.all(
      c.nodes.map(async (n) => {
        let i = 0;
        const t = await closedLoop({
          url: n.url,
          method: 'POST',
          workers: 4,
          headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
          paths: () => (++i % 2 === 0 ? '/acp/streams/list' : '/acp/traffic-flows/create'),
          body: () => (i % 2 === 0 ? '{"limit":5}' : '{"slug":"Not A Slug"}'),
          until: () => done,
        });
        acpTally.add(t);
      }),
    );
    const started = performance.now();
    const runs = await Promise.all(
      c.nodes.map((n, i) =>
        autocannon({
          url: n.url,
          connections: perNode,
          amount: Math.max(1000, Math.round(warm[i]!.requests.average * o.seconds)),
          headers: PERSON,
          requests: [
            ...Array.from({ length: 9 }, () => ({ path: '/go/load' })),
            { path: '/go/no-such-flow' },
          ],
        }),
      ),
    );
    const elapsed = (performance.now() - started) / 1000;
    done = true;
    await acpLoad;

    const after = await Promise.all(
      c.nodes.map(
        async (n) => (await c.acp<{ controllers: Controllers }>(n, '/acp/system/metrics')).body.controllers,
      ),
    );
    const codes = (r: autocannon.Result, code: string) =>
      (r as unknown as { statusCodeStats: Record<string, { count: number }> }).statusCodeStats[code]?.count ??
      0;
    const redirects = runs.reduce((n, r) => n + codes(r, '302'), 0);
    const notFound = runs.reduce((n, r) => n + codes(r, '404'), 0);
    const transport = runs.reduce((n, r) => n + r.errors + r.timeouts, 0);
    out.figures = {
      nodes: c.nodes.length,
      connections: perNode * c.nodes.length,
      seconds: Number(elapsed.toFixed(1)),
      'go requests': runs.reduce((n, r) => n + r.requests.total, 0),
      'go req/s': Math.round(runs.reduce((n, r) => n + r.requests.total, 0) / elapsed),
      'go p99 ms': Math.max(...runs.map((r) => r.latency.p99)),
      '302s seen': redirects,
      '404s seen': notFound,
      'acp calls': acpTally.answered,
      'acp errors': acpTally.errorsAnswered,
      'transport errors': transport + acpTally.failed,
    };
    check(out, 'no transport errors or timeouts', transport + acpTally.failed === 0, {
      transport,
      acp: acpTally.toJSON(),
    });
    check(
      out,
      'no 5xx',
      runs.every((r) => r['5xx'] === 0) && [...acpTally.byStatus.keys()].every((s) => s < 500),
      {
        go: runs.map((r) => r['5xx']),
        acp: acpTally.toJSON(),
      },
    );
    for (const [i, n] of c.nodes.entries()) {
      const served = (after[i]!['/go/:slug']?.count ?? 0) - (before[i]!['/go/:slug']?.count ?? 0);
      check(
        out,
        `${n.id}: controllers["/go/:slug"].count grew by the requests it served`,
        served === runs[i]!.requests.total,
        {
          controllers: served,
          autocannon: runs[i]!.requests.total,
        },
      );
    }

    // SIGTERM: both flush; the database holds exactly the redirects seen.
    const exits = await Promise.all(c.nodes.map((n) => n.stop('SIGTERM')));
    check(
      out,
      'both nodes exit 0 on SIGTERM',
      exits.every((e) => e === 0),
      exits,
    );

    // Every error answer has its one api error line, each with its own request id. Counted once the
    // nodes have exited: a node writes its log asynchronously, so a line can reach us after the
    // answer it belongs to; only a closed stdout says every line is in.
    const lines = apiErrorLines(c.nodes);
    const errorAnswers = notFound + acpTally.errorsAnswered;
    check(out, 'api error lines = error answers', lines.length === errorAnswers, {
      lines: lines.length,
      errorAnswers,
    });
    const ids = new Set(lines.map((l) => l.request_id));
    check(out, 'every api error line has its own request id', ids.size === lines.length, { ids: ids.size });
    out.figures['api error lines'] = lines.length;
    const persisted = await persistedHits(c.store, flowId);
    out.figures['hits persisted'] = persisted.hits;
    check(out, 'persisted hits = 302s seen', persisted.hits === redirects, { ...persisted, redirects });
    check(out, 'persisted flow clicks = 302s seen', persisted.clicks === redirects, {
      ...persisted,
      redirects,
    });
    // Every click answered is in the click log (and in the report rollups), none twice.
    out.figures['clicks logged'] = persisted.logged;
    check(out, 'click log rows = 302s seen', persisted.logged === redirects, { ...persisted, redirects });
    check(out, 'report rollups = 302s seen', persisted.rolledUp === redirects, { ...persisted, redirects });
    return out;
  } finally {
    await c.close();
  }
}
