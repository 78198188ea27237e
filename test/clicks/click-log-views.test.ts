import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ProcedureResult } from '../../src/procedures/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { newClick } from '../helpers/records.ts';

/** A family's value in a text exposition (`P_name value`, no labels). */
const sample = (body: string, name: string): number | undefined => {
  const m = body.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : undefined;
};

describe("a node's click log in system metrics, the exposition and procedure 6", () => {
  let t: TestNode;
  let viewer: string;
  before(async () => {
    // Flushed by hand only (the click log's timer a minute away, the once-a-second `stats_flush`
    // task that persists it off): what the test appends stays where the test put it.
    t = await startTestNode({
      yaml:
        'clicks:\n  buffer_max: 1000\n  flush_interval_ms: 60000\nobservability:\n  metrics:\n    prometheus_enabled: true\n' +
        'cron:\n  tasks:\n    stats_flush:\n      enabled: false\n',
    });
    viewer = await t.token('viewer');
  });
  after(() => t.close());

  const metrics = async () =>
    ((await (await t.acp('/acp/system/metrics', viewer)).json()) as { clicks: Record<string, unknown> })
      .clicks;
  const scrape = async () => (await fetch(`${t.url}/metrics`)).text();
  const acpHealth = async () => {
    const r = (await (await t.acp('/acp/system/procedures', viewer, {})).json()) as {
      procedures: ProcedureResult[];
    };
    return r.procedures.find((p) => p.key === 'acp_health')!;
  };

  test('nothing dropped: figures agree in JSON and exposition, and procedure 6 is quiet', async () => {
    for (let i = 0; i < 5; i++) assert.equal(t.node.clickLog.append(newClick({ flow_id: 'views' })), true);
    assert.deepEqual(await metrics(), {
      buffered: 5,
      unacked: 0,
      buffer_max: 1000,
      persisted: 0,
      dropped: 0,
      failed_flushes: 0,
      last_error: null,
      failing_since: null,
      uniqueness: { entries: 0, max_entries: 1_000_000, early_evictions: 0 },
    });
    assert.equal(await t.node.clickLog.persist(), 5);
    const m = await metrics();
    assert.equal(m.persisted, 5);
    assert.equal(m.buffered, 0);
    const body = await scrape();
    assert.equal(sample(body, 'sluice_clicks_persisted_total'), 5);
    assert.equal(sample(body, 'sluice_clicks_dropped_total'), 0);
    assert.equal(sample(body, 'sluice_clicks_buffered'), 0);
    assert.equal(sample(body, 'sluice_clicks_unacked'), 0);
    assert.equal(sample(body, 'sluice_clicks_buffer_max'), 1000);
    assert.equal(sample(body, 'sluice_clicks_failed_flushes_total'), 0);
    assert.match(body, /^# TYPE sluice_clicks_dropped_total counter$/m);
    assert.match(body, /^# TYPE sluice_clicks_buffered gauge$/m);
    const p6 = await acpHealth();
    assert.equal(p6.status, 'ok');
    assert.equal(p6.items.find((i) => i.subject === 'click log')?.finding, false);
  });

  test('a full buffer drops and counts; every view shows it and procedure 6 makes it a finding', async () => {
    let taken = 0;
    for (let i = 0; i < 1003; i++) if (t.node.clickLog.append(newClick({ flow_id: 'views' }))) taken++;
    assert.equal(taken, 1000);
    const m = await metrics();
    assert.equal(m.dropped, 3);
    assert.equal(m.buffered, 1000);
    const body = await scrape();
    assert.equal(sample(body, 'sluice_clicks_dropped_total'), 3);
    assert.equal(sample(body, 'sluice_clicks_buffered'), 1000);
    const p6 = await acpHealth();
    assert.equal(p6.status, 'finding');
    assert.match(p6.summary, /click log: 3 clicks dropped since start/);
    assert.match(p6.summary, /buffer 100 % full/);
    // Written out, the buffer is empty again; the drops stay counted (cumulative since start).
    assert.equal(await t.node.clickLog.persist(), 1000);
    assert.equal((await metrics()).dropped, 3);
    assert.equal((await acpHealth()).status, 'finding');
  });
});

describe("the uniqueness table's early evictions in system metrics and the exposition", () => {
  let t: TestNode;
  let viewer: string;
  before(async () => {
    t = await startTestNode({
      yaml: 'routing:\n  uniqueness_max_entries: 1000\nobservability:\n  metrics:\n    prometheus_enabled: true\n',
    });
    viewer = await t.token('viewer');
  });
  after(() => t.close());

  test('a full table evicts pairs early; the count (the over-count of uniques) shows in both views alike', async () => {
    const uniqueness = async () =>
      ((await (await t.acp('/acp/system/metrics', viewer)).json()) as { clicks: { uniqueness: unknown } })
        .clicks.uniqueness;
    assert.deepEqual(await uniqueness(), { entries: 0, max_entries: 1000, early_evictions: 0 });
    // The node's own table, as /go fills it: 1,003 visitors on one flow within the TTL.
    for (let i = 0; i < 1003; i++) assert.equal(t.node.clickDescriber.uniqueness.check('flow-u', i), true);
    // The first three visitors left early: their next click counts unique again (the over-count).
    assert.equal(t.node.clickDescriber.uniqueness.check('flow-u', 0), true);
    assert.deepEqual(await uniqueness(), { entries: 1000, max_entries: 1000, early_evictions: 4 });
    const body = await (await fetch(`${t.url}/metrics`)).text();
    assert.equal(sample(body, 'sluice_uniqueness_early_evictions_total'), 4);
    assert.equal(sample(body, 'sluice_uniqueness_entries'), 1000);
    assert.equal(sample(body, 'sluice_uniqueness_max_entries'), 1000);
    assert.match(body, /^# TYPE sluice_uniqueness_early_evictions_total counter$/m);
    assert.match(body, /^# TYPE sluice_uniqueness_entries gauge$/m);
  });
});
