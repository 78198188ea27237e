import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { type CliNode, startCli } from '../helpers/cli.ts';
import { flowWithDefault, startTestNode } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, routingListeners, testSchema } from '../helpers/postgres.ts';
import { TcpProxy } from '../helpers/tcp-proxy.ts';
import { until } from '../helpers/until.ts';
import { USER_AGENTS } from '../helpers/user-agents.ts';

/** A browser's user agent: a click without one is a bot (docs/routing.md#bots), never a hit. */
const PERSON = { 'user-agent': USER_AGENTS.chromeWindows };

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('two nodes on one PostgreSQL', { skip }, () => {
  test('a write on one node reaches the other at once (LISTEN/NOTIFY), counters sum', async () => {
    const schema = testSchema();
    // A long TTL: only the notification can explain the second node seeing the change quickly.
    const yaml = 'cache:\n  ttl_ms: 600000\n';
    const a = await startTestNode({ postgres: { schema }, yaml });
    const b = await startTestNode({ postgres: { schema }, yaml });
    try {
      const admin = await a.token('admin');
      const flow = (await (
        await a.acp('/acp/traffic-flows/create', admin, { slug: 'shared', name: 's' })
      ).json()) as FlowRecord;
      const stream = (await (
        await a.acp('/acp/streams/create', admin, {
          flow_id: flow.id,
          name: 'd',
          type: 'default',
          target_url: 'https://one.test/',
        })
      ).json()) as StreamRecord;
      // Every look counts a click: the test counts them itself rather than assuming how many polls
      // it took for the change to arrive.
      let looks = 0;
      const where = async (url: string) => {
        const res = await fetch(`${url}/go/shared`, { redirect: 'manual', headers: PERSON });
        await res.arrayBuffer();
        assert.equal(res.status, 302);
        looks++;
        return res.headers.get('location');
      };
      assert.equal(await where(b.url), 'https://one.test/');
      await until(
        'both nodes to listen for routing changes',
        async () => (await routingListeners(schema)) === 2,
        10_000,
        25,
      );
      await (
        await a.acp('/acp/streams/update', admin, { id: stream.id, target_url: 'https://two.test/' })
      ).arrayBuffer();
      await until(
        'node b to see the new target',
        async () => (await where(b.url)) === 'https://two.test/',
        // Far below the 10-minute TTL, far above any notification delay on a busy machine.
        10_000,
        25,
      );

      const N = 50;
      await Promise.all([
        ...Array.from({ length: N }, () =>
          fetch(`${a.url}/go/shared`, { redirect: 'manual', headers: PERSON }).then((r) => r.arrayBuffer()),
        ),
        ...Array.from({ length: N }, () =>
          fetch(`${b.url}/go/shared`, { redirect: 'manual', headers: PERSON }).then((r) => r.arrayBuffer()),
        ),
      ]);
      await Promise.all([a.node.clickLog.flush(), b.node.clickLog.flush()]);
      const got = await a.node.storage.streams.get(stream.id);
      // Every look on b (however many polls the change took to arrive) plus 2N.
      assert.equal(got?.hits, 2 * N + looks);
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });
  test("a flow made or paused on one node is in the other's totals at once, not at the next refresh", async () => {
    const schema = testSchema();
    const a = await startTestNode({ postgres: { schema } });
    const b = await startTestNode({ postgres: { schema } });
    try {
      await until(
        'both nodes to listen for routing changes',
        async () => (await routingListeners(schema)) === 2,
        10_000,
        25,
      );
      const admin = await a.token('admin');
      const viewer = await b.token('viewer');
      const totals = async () => {
        const res = await b.acp('/acp/system/metrics', viewer, {});
        return ((await res.json()) as { traffic_flows: { total: number; active: number } }).traffic_flows;
      };
      const flow = (await (
        await a.acp('/acp/traffic-flows/create', admin, { slug: 'counted', name: 'c' })
      ).json()) as FlowRecord;
      // Half the 2 s periodic refresh: node b hears of the change by a's notice. (Before, the
      // totals were re-read every 10 s and the ACP lists disagreed with them meanwhile.)
      await until("b's totals to count the new flow", async () => (await totals()).total === 1, 1_000, 10);
      assert.equal((await totals()).active, 1);
      await (
        await a.acp('/acp/traffic-flows/update', admin, { id: flow.id, status: 'paused' })
      ).arrayBuffer();
      await until("b's totals to see it paused", async () => (await totals()).active === 0, 1_000, 10);
      assert.equal((await totals()).total, 1);
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });
});

describe('a node that could not listen for a while', { skip }, () => {
  test('reloads what it cached once it listens again: a change made meanwhile reaches it at once', async () => {
    const schema = testSchema();
    const pg = new URL(PG_URL);
    const proxy = new TcpProxy(pg.hostname, Number(pg.port || 5432));
    await proxy.start();
    const via = new URL(PG_URL);
    via.port = String(proxy.port);
    // No TTL and no cache_reload run within the test: only the reload on listening again can
    // explain node b seeing the change.
    const still = 'cache:\n  ttl_ms: 600000\ncron:\n  tasks:\n    cache_reload:\n      enabled: false\n';
    const a = await startTestNode({ postgres: { schema }, yaml: still });
    const b = await startTestNode({
      yaml: `storage:\n  driver: postgres\n  postgres:\n    url: ${via.toString()}\n    schema: ${schema}\n${still}`,
    });
    try {
      const admin = await a.token('admin');
      const flow = await flowWithDefault(a, admin, 'missed', 'https://one.test/');
      const where = async () => {
        const res = await fetch(`${b.url}/go/missed`, { redirect: 'manual', headers: PERSON });
        await res.arrayBuffer();
        return res.headers.get('location');
      };
      assert.equal(await where(), 'https://one.test/');
      await until('both nodes to listen', async () => (await routingListeners(schema)) === 2, 10_000, 25);
      await proxy.down();
      await until('node b to stop listening', async () => (await routingListeners(schema)) === 1, 10_000, 25);
      const [stream] = await a.node.storage.streams.ofFlow(flow.id);
      const updated = await a.acp('/acp/streams/update', admin, {
        id: stream!.id,
        target_url: 'https://two.test/',
      });
      assert.equal(updated.status, 200);
      await updated.arrayBuffer();
      assert.equal(await where(), 'https://one.test/', 'node b missed the notice');
      await proxy.up();
      await until('node b to listen again', async () => (await routingListeners(schema)) === 2, 10_000, 25);
      await until(
        'node b to route to the new target',
        async () => (await where()) === 'https://two.test/',
        10_000,
        25,
      );
    } finally {
      await a.close();
      await b.close();
      await proxy.down();
      await dropSchema(schema);
    }
  });
});

describe('PostgreSQL down and back', { skip }, () => {
  test('the hot path serves from cache, the ACP answers 503, /readyz fails, all recover by themselves', async () => {
    const pg = new URL(PG_URL);
    const proxy = new TcpProxy(pg.hostname, Number(pg.port || 5432));
    await proxy.start();
    const schema = testSchema();
    const via = new URL(PG_URL);
    via.port = String(proxy.port);
    const t = await startTestNode({
      yaml: `storage:\n  driver: postgres\n  postgres:\n    url: ${via.toString()}\n    schema: ${schema}\ncache:\n  ttl_ms: 200\n`,
    });
    try {
      const admin = await t.token('admin');
      const flow = await flowWithDefault(t, admin, 'resilient', 'https://up.test/');
      const click = async () => {
        const res = await fetch(`${t.url}/go/resilient`, { redirect: 'manual', headers: PERSON });
        await res.arrayBuffer();
        return res.status;
      };
      assert.equal(await click(), 302);

      await proxy.down();
      // Past the cache TTL, as the cache itself sees it: only stale data is left.
      await until(
        'the cached flow to go stale',
        () => t.node.routing.cache.peek('resilient') === undefined,
        5000,
        25,
      );
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${t.url}/go/resilient`, { redirect: 'manual', headers: PERSON });
        const text = await r.text();
        assert.equal(
          r.status,
          302,
          `served from the stale cache entry: ${text} ${JSON.stringify(t.logs.lines.slice(-4))}`,
        );
      }
      const acp = await t.acp('/acp/traffic-flows/list', admin, {});
      assert.equal(acp.status, 503);
      const body = (await acp.json()) as { error: { code: string } };
      assert.equal(body.error.code, 'db.unavailable');
      assert.equal(t.logs.apiErrors(acp.headers.get('x-request-id')!).length, 1);
      assert.equal((await fetch(`${t.url}/readyz`)).status, 503);
      const cold = await fetch(`${t.url}/go/never-cached`, { redirect: 'manual', headers: PERSON });
      assert.equal(cold.status, 503);
      await cold.arrayBuffer();
      await t.node.clickLog.flush(); // fails, keeps the counts
      assert.equal(t.node.storage.stats().status, 'down');

      await proxy.up();
      await until('readyz', async () => (await fetch(`${t.url}/readyz`)).status === 200, 5000, 25);
      const list = await t.acp('/acp/traffic-flows/list', admin, {});
      assert.equal(list.status, 200);
      await list.arrayBuffer();
      await t.node.clickLog.flush();
      assert.equal(
        (await t.node.storage.flows.get(flow.id))?.clicks,
        6,
        'clicks made while down were kept and persisted',
      );
      assert.equal(t.node.storage.stats().status, 'up');
    } finally {
      await t.close();
      await proxy.down();
      await dropSchema(schema);
    }
  });
});

describe('two node processes on one PostgreSQL', { skip }, () => {
  test('clicks served by both, then SIGTERM to both: persisted counters equal the redirects', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { openPostgres } = await import('../../src/storage/index.ts');
    const { systemClock } = await import('../../src/time/index.ts');
    const schema = testSchema();
    const dir = mkdtempSync(join(tmpdir(), 'sluice-2p-'));
    writeFileSync(
      join(dir, 'config.test.yml'),
      `app:\n  server:\n    port: 0\nstorage:\n  driver: postgres\n  postgres:\n    url: ${PG_URL}\n    schema: ${schema}\n`,
    );
    const store = openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock });
    await store.migrate();
    const flow = await store.flows.create({
      slug: 'two-procs',
      name: 't',
      status: 'active',
      rotation: 'weight',
    });
    for (const name of ['a', 'b']) {
      await store.streams.create({
        flow_id: flow.id,
        name,
        type: 'regular',
        position: 0,
        weight: 1,
        status: 'active',
        filters: {},
        target_url: `https://${name}.test/`,
        redirect_code: 302,
      });
    }
    const nodes: CliNode[] = [];
    try {
      for (let i = 0; i < 2; i++)
        nodes.push(await startCli(['--config-dir', dir, '--mode', 'test'], { cwd: dir }));
      const urls = nodes.map((n) => n.url);
      let redirects = 0;
      await Promise.all(
        urls.flatMap((u) =>
          Array.from({ length: 150 }, async () => {
            const res = await fetch(`${u}/go/two-procs`, { redirect: 'manual', headers: PERSON });
            await res.arrayBuffer();
            if (res.status === 302) redirects++;
          }),
        ),
      );
      for (const n of nodes) n.child.kill('SIGTERM');
      assert.deepEqual(await Promise.all(nodes.map((n) => n.exited)), [0, 0]);
      const streams = await store.streams.ofFlow(flow.id);
      assert.equal(redirects, 300);
      assert.equal(
        streams.reduce((sum, s) => sum + s.hits, 0),
        redirects,
      );
      assert.equal((await store.flows.get(flow.id))?.clicks, redirects);
    } finally {
      for (const n of nodes) n.child.kill('SIGKILL');
      await store.close();
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
