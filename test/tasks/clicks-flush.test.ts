import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type CronTaskConfig, KIND_SCOPES } from '../../src/config/index.ts';
import type { FlowRecord } from '../../src/storage/index.ts';
import { CLICK_WAIT_WITH_TASK_MS, clickWrites } from '../../src/tasks/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';

test('clicks.flush runs on every node by default (each node writes its own buffer)', () => {
  assert.equal(KIND_SCOPES['clicks.flush'], 'all');
});

describe('how the click log is written, and how long postbacks on other nodes wait for a click', () => {
  const task = (schedule: string, enabled = true) =>
    ({ kind: 'clicks.flush', schedule, enabled, timeout_ms: 30_000 }) as CronTaskConfig;
  test('by its own timer without an enabled clicks.flush task: a second more than its interval', () => {
    assert.deepEqual(clickWrites({}, 60_000), { timerMs: 60_000, waitMs: 61_000 });
    assert.deepEqual(clickWrites({ w: task('*/5 * * * * *', false) }, 1000), { timerMs: 1000, waitMs: 2000 });
  });
  test("by the task otherwise, its timer off: the wait is a fixed bound, whatever the schedule's gaps", () => {
    for (const schedule of ['*/5 * * * * *', '* * 0 * * *', '0 0 31 4 *'])
      assert.deepEqual(clickWrites({ w: task(schedule) }, 1000), {
        timerMs: 0,
        waitMs: CLICK_WAIT_WITH_TASK_MS + 1000,
      });
  });
});

describe('a clicks.flush task writes the click log instead of its timer (#14)', () => {
  let t: TestNode;
  let admin: string;
  before(async () => {
    // A schedule that never comes, and the once-a-second `stats_flush` task (which persists the
    // click log too) off: the only writes are the runs the test asks for.
    t = await startTestNode({
      yaml: `clicks:\n  flush_interval_ms: 10\ncron:\n  tasks:\n    click_writer:\n      kind: clicks.flush\n      schedule: '0 0 1 1 *'\n    stats_flush:\n      enabled: false\n`,
    });
    admin = await t.token('admin');
  });
  after(() => t.close());

  test('a click waits in the buffer until the task runs, then it is stored and the run counted', async () => {
    const flow = (await (
      await t.acp('/acp/traffic-flows/create', admin, { slug: 'cf', name: 'cf' })
    ).json()) as FlowRecord;
    await t.acp('/acp/streams/create', admin, {
      flow_id: flow.id,
      name: 's',
      type: 'default',
      target_url: 'https://x.test/',
    });
    const res = await fetch(`${t.url}/go/cf`, { redirect: 'manual', headers: { 'user-agent': CHROME } });
    const id = res.headers.get('x-click-id')!;
    // Ten times the 10 ms the click log's own timer would have taken: it is off.
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(t.node.clickLog.stats().buffered, 1);
    assert.equal(await t.node.storage.clicks.get(id), undefined);
    await t.node.scheduler.runNow('click_writer').done;
    assert.ok(await t.node.storage.clicks.get(id), 'stored by the task');
    const entry = t.node.scheduler.list().find((x) => x.name === 'click_writer')!;
    assert.equal(entry.runtime.runs, 1);
    assert.equal(entry.runtime.failures, 0);
  });
});
