import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Report } from '../../src/reports/index.ts';
import type { FlowRecord } from '../../src/storage/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, testSchema } from '../helpers/postgres.ts';

const pick = (o: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.map((k) => [k, o[k]]));

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const skipPg = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('one report from either of two nodes sharing PostgreSQL', { skip: skipPg }, () => {
  const schema = testSchema();
  let a: TestNode;
  let b: TestNode;
  let token: string;
  const yaml = (id: string) => `app:\n  server:\n    id: ${id}\n`;
  before(async () => {
    a = await startTestNode({ postgres: { schema }, yaml: yaml('rep-a') });
    b = await startTestNode({ postgres: { schema }, yaml: yaml('rep-b') });
    token = await a.token('admin');
  });
  after(async () => {
    await b.close();
    await a.close();
    await dropSchema(schema);
  });

  test('clicks and a postback on both nodes: both answer the exact sums', async () => {
    const acp = async <T>(node: TestNode, path: string, body: unknown) => {
      const res = await node.acp(path, token, body);
      assert.equal(res.status, 200);
      return (await res.json()) as T;
    };
    const flow = await acp<FlowRecord>(a, '/acp/traffic-flows/create', {
      slug: 'two',
      name: 'two',
      cost_per_click: 0.5,
    });
    await acp(a, '/acp/streams/create', {
      flow_id: flow.id,
      name: 'all',
      type: 'default',
      target_url: 'https://x.test/',
    });
    const sent = { a: 4, b: 3 };
    const ids: string[] = [];
    for (const [node, n] of [
      [a, sent.a],
      [b, sent.b],
    ] as const)
      for (let i = 0; i < n; i++) {
        const res = await fetch(`${node.url}/go/two`, {
          redirect: 'manual',
          headers: {
            'user-agent': CHROME,
            'cf-ipcountry': 'NL',
            'x-forwarded-for': `203.0.113.${ids.length + 1}`,
          },
        });
        assert.equal(res.status, 302);
        ids.push(res.headers.get('x-click-id')!);
      }
    await a.node.clickLog.persist();
    await b.node.clickLog.persist();
    // The postback reaches node b for a click node a took.
    const pb = await fetch(`${b.url}/postback?key=${a.postbackKey}&click_id=${ids[0]}&payout=7&status=sale`);
    assert.equal(pb.status, 200);
    const now = new Date();
    const query = {
      from: new Date(now.getTime() - 3_600_000).toISOString(),
      to: new Date(now.getTime() + 3_600_000).toISOString(),
      group_by: ['country'],
      filter: { flow_id: flow.id },
    };
    const fromA = await acp<Report>(a, '/acp/reports/query', query);
    const fromB = await acp<Report>(b, '/acp/reports/query', query);
    assert.deepEqual(fromA.rows, fromB.rows);
    const nl = fromA.rows[0]!;
    assert.deepEqual(
      [nl.country, nl.clicks, nl.sales, nl.revenue, nl.cost, nl.profit],
      ['NL', sent.a + sent.b, 1, 7, (sent.a + sent.b) * 0.5, 7 - (sent.a + sent.b) * 0.5],
    );
  });

  test("a postback on one node for a click the other took a moment ago waits for that node's flush", async () => {
    // Behind a load balancer any node gets the postback; the click is in the other node's buffer
    // for up to a flush interval. It was a 404 (which a network may never retry).
    const flow = await a.node.storage.flows.getBySlug('two');
    assert.ok(flow, 'the flow of the test above');
    const res = await fetch(`${a.url}/go/two`, {
      redirect: 'manual',
      headers: { 'user-agent': CHROME, 'cf-ipcountry': 'NL', 'x-forwarded-for': '203.0.113.99' },
    });
    assert.equal(res.status, 302);
    const clickId = res.headers.get('x-click-id')!;
    assert.equal(await b.node.storage.clicks.get(clickId), undefined, 'not written yet');
    const pb = await fetch(
      `${b.url}/postback?key=${a.postbackKey}&click_id=${clickId}&payout=3&status=sale&txid=fresh`,
    );
    assert.equal(pb.status, 200, await pb.clone().text());
    assert.deepEqual(pick((await pb.json()) as Record<string, unknown>, ['ok', 'click_id', 'status']), {
      ok: true,
      click_id: clickId,
      status: 'sale',
    });
    // An id that was never made waits no longer than a real one could, then is the contract's 404.
    const unknown = `${clickId.slice(0, -4)}zzzz`;
    const missing = await fetch(`${b.url}/postback?key=${a.postbackKey}&click_id=${unknown}&payout=3`);
    assert.equal(missing.status, 404);
    await missing.arrayBuffer();
  });
});
