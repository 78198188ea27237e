import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  autocannonClient,
  type BenchServer,
  interleave,
  type LoadClient,
  type Measurement,
  measure,
  startNginx,
  startServer,
  wrkClient,
} from '../../bench/http/load.ts';
import { requestMix, type SluiceScenario } from '../../bench/http/scenarios.ts';

/**
 * The benchmark harness's own building blocks, run briefly: it proves the harness measures what it
 * says (the server's own CPU per request it received, with the load generator in another process),
 * never a speed. Fixed amounts, so what was sent and what the server counted compare exactly.
 */
describe('the HTTP load harness', () => {
  const scenario: SluiceScenario = { flows: 3, streams: 4, macros: 'all', country: true };
  let client: LoadClient;
  let fastify: BenchServer;
  let sluice: BenchServer;
  before(async () => {
    [client, fastify, sluice] = await Promise.all([
      autocannonClient(),
      startServer('fastify', 'fastify-302'),
      startServer('Sluice', 'sluice', { scenario }),
    ]);
  });
  after(async () => {
    await Promise.all([client?.close(), fastify?.stop(), sluice?.stop()]);
  });

  const sane = (m: Measurement, n: number) => {
    const seen = JSON.stringify(m);
    assert.equal(m.load.sent, n, seen);
    assert.equal(m.load.answered, n, seen);
    assert.equal(m.serverRequests, n, `the server counted every request the load generator sent: ${seen}`);
    assert.equal(m.load.redirects, n, `every answer was a redirect: ${seen}`);
    assert.equal(m.load.bad, 0, seen);
    assert.ok(m.cpuUsPerReq > 0 && Number.isFinite(m.cpuUsPerReq), seen);
    assert.ok(m.rps > 0 && m.load.p99Ms >= m.load.p50Ms, seen);
  };

  test('a bare fastify 302 in its own process: 200 requests sent, 200 counted by the server, its CPU read', async () => {
    assert.notEqual(fastify.pid, process.pid);
    const before = await fastify.stats();
    sane(
      await measure(fastify, client, { mix: { paths: ['/go/bench'] }, connections: 10, amount: 200 }),
      200,
    );
    const stats = await fastify.stats();
    assert.equal(stats.requests - before.requests, 200);
    assert.ok(stats.cpuUs > before.cpuUs && stats.rss > 0);
  });

  test('a Sluice node seeded through storage answers random slugs with a country header, one read per flow', async () => {
    const mix = requestMix(scenario);
    assert.deepEqual(mix.paths, ['/go/f0', '/go/f1', '/go/f2']);
    assert.equal(mix.header?.name, 'cf-ipcountry');
    sane(await measure(sluice, client, { mix, connections: 10, amount: 200 }), 200);
    // Concurrent misses on one slug share one load: three slugs, at most three loads.
    const reads = await sluice.reads();
    assert.ok(reads.flows >= 1 && reads.flows <= 3, `flow reads ${reads.flows}`);
    assert.equal(reads.streams, reads.flows);
  });

  test('interleaved rounds measure every entry once per round, A B then B A, after an uncounted warm-up', async () => {
    const entries = [sluice, fastify].map((server) => ({ server, mix: { paths: ['/go/f0'] } }));
    const order: string[] = [];
    const before = await fastify.stats();
    const results = await interleave(entries, client, {
      rounds: 2,
      window: { amount: 200 },
      warmup: { amount: 100 },
      connections: 5,
      onMeasure: (round, e) => order.push(`${round}:${e.server.name}`),
    });
    assert.deepEqual(order, ['0:Sluice', '0:fastify', '1:fastify', '1:Sluice']);
    for (const e of entries) {
      const ms = results.of.get(e)!;
      assert.equal(ms.length, 2);
      for (const m of ms) sane(m, 200);
    }
    assert.equal((await fastify.stats()).requests - before.requests, 100 + 2 * 200);
  });

  test('with a base, every entry is measured right next to it, before and after in turn, and paired with it', async () => {
    const [a, b, base] = [sluice, sluice, fastify].map((server) => ({ server, mix: { paths: ['/go/f1'] } }));
    const name = new Map([
      [a, 'A'],
      [b, 'B'],
      [base, 'base'],
    ]);
    const order: string[] = [];
    const results = await interleave([a!, b!, base!], client, {
      rounds: 2,
      window: { amount: 100 },
      connections: 5,
      base,
      onMeasure: (round, e, _m, mix) =>
        order.push(
          `${round}:${name.get(e)}${mix === e.mix ? '' : ` on ${[a, b].find((x) => x!.mix === mix) === a ? 'A' : 'B'}'s requests`}`,
        ),
    });
    // Round 0: base A, B base; round 1 (reversed): B base, base A. The base is sent the requests of
    // the entry it is paired with.
    assert.deepEqual(order, [
      "0:base on A's requests",
      '0:A',
      '0:B',
      "0:base on B's requests",
      '1:B',
      "1:base on B's requests",
      "1:base on A's requests",
      '1:A',
    ]);
    const ms = results.of.get(base!)!;
    assert.equal(ms.length, 4);
    assert.deepEqual(results.baseOf.get(a!), [ms[0], ms[3]]);
    assert.deepEqual(results.baseOf.get(b!), [ms[1], ms[2]]);
  });

  test('nginx return 302 as a peer, where nginx is installed', async (t) => {
    const nginx = await startNginx('nginx');
    if (typeof nginx === 'string') return t.skip(nginx);
    try {
      // Enough requests for its CPU, read from /proc in clock ticks (10 ms), to show.
      sane(
        await measure(nginx, client, { mix: { paths: ['/go/bench'] }, connections: 10, amount: 5000 }),
        5000,
      );
    } finally {
      await nginx.stop();
    }
  });

  test('wrk as the load generator, where it is installed', async (t) => {
    const wrk = wrkClient();
    if (wrk === undefined) return t.skip('wrk is not installed');
    try {
      const m = await measure(fastify, wrk, {
        mix: { paths: ['/go/a', '/go/b'], header: { name: 'cf-ipcountry', values: ['DE', 'US'] } },
        connections: 5,
        seconds: 1,
      });
      assert.ok(m.load.answered > 0 && m.load.bad === 0 && m.cpuUsPerReq > 0);
      // Cut off at the window's end, a request may reach the server and not come back.
      assert.ok(m.serverRequests >= m.load.answered && m.serverRequests <= m.load.answered + 5);
    } finally {
      await wrk.close();
    }
  });
});
