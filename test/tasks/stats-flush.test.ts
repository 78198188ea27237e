import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { USER_AGENTS } from '../helpers/user-agents.ts';

describe('a stats.flush run persists the hot path counters (they travel with their clicks)', () => {
  let t: TestNode;
  let admin: string;
  before(async () => {
    // The click log's own cut every 30 s and a stats_flush schedule that never comes: the only
    // write before the assertion is the run the test asks for.
    t = await startTestNode({
      yaml: "clicks:\n  flush_interval_ms: 60000\ncron:\n  tasks:\n    stats_flush:\n      schedule: '0 0 1 1 *'\n",
    });
    admin = await t.token('admin');
  });
  after(() => t.close());

  test('hits and clicks answered before a run are in the lists when it ends', async () => {
    const flow = (await (
      await t.acp('/acp/traffic-flows/create', admin, { slug: 'sf', name: 'sf' })
    ).json()) as FlowRecord;
    const stream = (await (
      await t.acp('/acp/streams/create', admin, {
        flow_id: flow.id,
        name: 's',
        type: 'default',
        target_url: 'https://x.test/',
      })
    ).json()) as StreamRecord;
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${t.url}/go/sf`, {
        redirect: 'manual',
        headers: { 'user-agent': USER_AGENTS.chromeWindows },
      });
      assert.equal(res.status, 302);
    }
    const stored = async () => {
      const streams = await t.node.storage.streams.list({
        filter: { flow_id: flow.id },
        sort: { by: 'position', order: 'asc' },
        limit: 10,
      });
      return streams.items.find((s) => s.id === stream.id)?.hits;
    };
    assert.equal(await stored(), 0, 'nothing is written before the run');
    await t.node.scheduler.runNow('stats_flush').done;
    assert.equal(await stored(), 3);
    const runtime = t.node.scheduler.list().find((x) => x.name === 'stats_flush')!.runtime;
    assert.equal(runtime.failures, 0);
  });
});
