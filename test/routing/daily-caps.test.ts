import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { persistCounts, startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const BOT = 'Googlebot/2.1 (+http://www.google.com/bot.html)';

async function acp<T>(node: TestNode, token: string, path: string, body: unknown): Promise<T> {
  const res = await node.acp(path, token, body);
  const json = (await res.json()) as T;
  assert.equal(res.status, 200, `${path}: ${JSON.stringify(json)}`);
  return json;
}
async function where(node: TestNode, slug: string, ua = CHROME): Promise<string | null> {
  const res = await fetch(`${node.url}/go/${slug}`, { redirect: 'manual', headers: { 'user-agent': ua } });
  await res.arrayBuffer();
  return res.headers.get('location');
}
/** A flow whose forced stream takes at most `cap` clicks a day, then its default stream. */
async function cappedFlow(node: TestNode, token: string, slug: string, cap: number) {
  const flow = await acp<FlowRecord>(node, token, '/acp/traffic-flows/create', { slug, name: slug });
  const capped = await acp<StreamRecord>(node, token, '/acp/streams/create', {
    flow_id: flow.id,
    name: 'capped',
    type: 'forced',
    daily_cap: cap,
    target_url: 'https://capped.test/',
  });
  await acp(node, token, '/acp/streams/create', {
    flow_id: flow.id,
    name: 'rest',
    type: 'default',
    target_url: 'https://rest.test/',
  });
  return { flow, capped };
}

for (const backend of BACKENDS) {
  describe(`stream daily caps on ${backend.name}`, async () => {
    let t: TestNode;
    let admin: string;
    const { it } = await nodeSuite(backend, {
      onStart: async (node) => {
        t = node;
        admin = await t.token('admin');
      },
    });

    it('a stream at its cap is skipped; bots do not use it up; the count survives a flush and a cache reload', async () => {
      const { capped } = await cappedFlow(t, admin, 'cap-one', 3);
      assert.equal(capped.daily_cap, 3);
      await where(t, 'cap-one', BOT);
      const seen = [];
      for (let i = 0; i < 2; i++) seen.push(await where(t, 'cap-one'));
      // Persisted and read back, then the flow compiled afresh: the two clicks are still counted.
      await persistCounts(t.node);
      t.node.routing.cache.invalidate('cap-one');
      for (let i = 0; i < 3; i++) seen.push(await where(t, 'cap-one'));
      assert.deepEqual(seen, [
        'https://capped.test/',
        'https://capped.test/',
        'https://capped.test/',
        'https://rest.test/',
        'https://rest.test/',
      ]);
      const sim = await acp<{ trace: { name: string; result: string; reason: string }[] }>(
        t,
        admin,
        '/acp/routing/simulate',
        { slug: 'cap-one', user_agent: CHROME },
      );
      assert.match(
        sim.trace.find((s) => s.name === 'capped')!.reason,
        /daily cap reached: 3 of 3 clicks today/,
      );
      // The streams list says so too: a buyer saw only "3/day" while the offer took no more.
      const listed = await acp<{ items: (StreamRecord & { cap_today?: number | null })[] }>(
        t,
        admin,
        '/acp/streams/list',
        { filter: { flow_id: capped.flow_id } },
      );
      assert.deepEqual(Object.fromEntries(listed.items.map((s) => [s.name, s.cap_today])), {
        capped: 3,
        rest: undefined,
      });
      // Raised: the stream takes clicks again.
      await acp(t, admin, '/acp/streams/update', { id: capped.id, daily_cap: 4 });
      assert.equal(await where(t, 'cap-one'), 'https://capped.test/');
      assert.equal(await where(t, 'cap-one'), 'https://rest.test/');
    });

    it('a bad cap is refused', async () => {
      const { capped } = await cappedFlow(t, admin, 'cap-bad', 1);
      const res = await t.acp('/acp/streams/update', admin, { id: capped.id, daily_cap: -1 });
      assert.equal(res.status, 400);
    });
  });
}

const skipPg = !(await pgAvailable()) && 'PostgreSQL unavailable';
describe('a daily cap shared by two nodes on one PostgreSQL', { skip: skipPg }, () => {
  const schema = testSchema();
  let a: TestNode;
  let b: TestNode;
  let token: string;
  before(async () => {
    a = await startTestNode({ postgres: { schema }, yaml: 'app:\n  server:\n    id: cap-a\n' });
    b = await startTestNode({ postgres: { schema }, yaml: 'app:\n  server:\n    id: cap-b\n' });
    token = await a.token('admin');
  });
  after(async () => {
    await b.close();
    await a.close();
    await dropSchema(schema);
  });

  test("once a flush has carried one node's clicks, the other stops at the cap", async () => {
    await cappedFlow(a, token, 'cap-two', 3);
    assert.equal(await where(a, 'cap-two'), 'https://capped.test/');
    assert.equal(await where(a, 'cap-two'), 'https://capped.test/');
    await persistCounts(a.node);
    // b learns a's two clicks with its own next flush.
    await persistCounts(b.node);
    assert.equal(await where(b, 'cap-two'), 'https://capped.test/');
    assert.equal(await where(b, 'cap-two'), 'https://rest.test/');
    await persistCounts(b.node);
    await persistCounts(a.node);
    assert.equal(await where(a, 'cap-two'), 'https://rest.test/');
  });
});
