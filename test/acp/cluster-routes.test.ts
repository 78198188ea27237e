import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestNode, type TestNode } from '../helpers/node.ts';

let t: TestNode;
before(async () => {
  t = await startTestNode();
});
after(() => t.close());

test('a registry row an older node wrote with credentials in its address shows without them', async () => {
  // This version refuses user:password@ in cluster.advertise_url; an older node's row keeps its own
  // until the node is forgotten, and every viewer reads the cluster views (an upgrade test).
  await t.node.storage.cluster.heartbeat({
    server_id: 'old-node',
    started_at: new Date().toISOString(),
    version: 'old',
    commit: 'c0ffee',
    is_leader: false,
    url: 'http://ops:Hunter2pw@127.0.0.1:1/base?x=1',
  });
  const viewer = await t.token('viewer', 'vic');
  for (const path of ['/acp/cluster/nodes', '/acp/cluster/metrics']) {
    const res = await t.acp(path, viewer, {});
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.ok(!text.includes('Hunter2pw') && !text.includes('ops@'), `${path}: ${text}`);
    const old = (JSON.parse(text) as { items: { server_id: string; url: string | null }[] }).items.find(
      (n) => n.server_id === 'old-node',
    );
    assert.equal(old?.url, 'http://127.0.0.1:1/base?x=1', path);
  }
});
