import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { TaskItem } from '../../src/cron/index.ts';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';
import { USER_AGENTS } from '../helpers/user-agents.ts';

describe('cron tasks through the ACP, with real task kinds', () => {
  let up: Server;
  let upUrl: string;
  const seenHeaders: Record<string, string | string[] | undefined>[] = [];
  let t: TestNode;
  let viewer: string;
  let operator: string;
  let admin: string;
  before(async () => {
    up = createServer((req, res) => {
      seenHeaders.push(req.headers);
      if (req.url?.startsWith('/healthy')) res.writeHead(200).end('ok');
      else if (req.url?.startsWith('/head-refused')) res.writeHead(req.method === 'HEAD' ? 405 : 200).end();
      else if (!req.url?.startsWith('/hangs')) res.writeHead(503).end('down');
      // /hangs never answers.
    });
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', () => r()));
    upUrl = `http://127.0.0.1:${(up.address() as AddressInfo).port}`;
    t = await startTestNode({
      yaml: [
        'cron:',
        '  tasks:',
        '    probe_ok:',
        '      kind: http.probe',
        "      schedule: '0 0 1 1 *'",
        '      execution_scope: all',
        `      url: ${upUrl}/healthy`,
        '      headers: { x-api-key: probe-secret-value }',
        '    probe_bad:',
        '      kind: http.probe',
        "      schedule: '0 0 1 1 *'",
        '      execution_scope: leader',
        `      url: ${upUrl}/broken`,
        '      retries: 1',
        // Only run by hand here: a scheduled run (every 5 minutes) could be under way when the
        // test asks for one and answer it 409, or check the targets before the test made them.
        '    targets_check:',
        "      schedule: '0 0 1 1 *'",
        // A short run: a target that hangs must still be marked within it.
        '      timeout_ms: 2000',
        '    quiet:',
        '      kind: cache.reload',
        "      schedule: '0 0 1 1 *'",
        '      enabled: false',
        '',
      ].join('\n'),
    });
    [viewer, operator, admin] = await Promise.all([t.token('viewer'), t.token('operator'), t.token('admin')]);
  });
  after(async () => {
    await t.close();
    up.closeAllConnections();
    await new Promise<void>((r) => up.close(() => r()));
  });

  const list = async (body: unknown = {}) => {
    const res = await t.acp('/acp/cron-tasks/list', viewer, body);
    assert.equal(res.status, 200);
    return (await res.json()) as { items: TaskItem[]; total: number };
  };
  const runNow = async (name: string, token = operator) => t.acp('/acp/cron-tasks/run', token, { name });
  const settle = async (name: string) => {
    let item: TaskItem | undefined;
    await until(
      `${name} to finish`,
      async () => {
        item = (await list({ filter: { name } })).items.find((x) => x.name === name);
        return item !== undefined && !item.runtime.running && item.runtime.last_finished_at !== null;
      },
      10_000,
    );
    return item!;
  };

  test('the list has built-in and configured tasks with their scope, schedule and runtime block', async () => {
    const { items, total } = await list();
    assert.equal(total, items.length);
    const byName = Object.fromEntries(items.map((i) => [i.name, i]));
    for (const name of ['stats_flush', 'cache_reload', 'targets_check', 'probe_ok', 'probe_bad', 'quiet'])
      assert.ok(byName[name], name);
    assert.equal(byName.targets_check!.execution_scope, 'leader');
    assert.equal(byName.stats_flush!.execution_scope, 'all');
    assert.equal(byName.quiet!.enabled, false);
    assert.equal(byName.quiet!.next_run_at, null);
    assert.equal(byName.probe_ok!.schedule, '0 0 1 1 *');
    assert.deepEqual(Object.keys(byName.probe_ok!.runtime).sort(), [
      'failures',
      'failures_last_hour',
      'failures_prev_hour',
      'last_duration_ms',
      'last_error',
      'last_finished_at',
      'last_started_at',
      'p95',
      'p95_last_hour',
      'running',
      'running_since',
      'runs',
      'skipped',
    ]);
  });

  test('run-now needs the operator role and answers 202 with a run id', async () => {
    assert.equal((await runNow('probe_ok', viewer)).status, 403);
    const res = await runNow('probe_ok');
    assert.equal(res.status, 202);
    const body = (await res.json()) as { run_id: string };
    assert.match(body.run_id, /^[0-9a-f-]{36}$/);
    const item = await settle('probe_ok');
    assert.equal(item.runtime.runs, 1);
    assert.equal(item.runtime.failures, 0);
    const seen = seenHeaders.at(-1)!;
    assert.equal(seen['x-api-key'], 'probe-secret-value', 'the probe sends its headers');
    assert.equal(seen['x-request-id'], body.run_id, 'outgoing calls carry the run id');
    assert.ok(!t.logs.raw.includes('probe-secret-value'), 'but never logs them');
    assert.equal((await runNow('nope')).status, 404);
  });

  test('a probe answered with an unexpected status fails; its calls are in recent failures, filtered by task', async () => {
    await (await runNow('probe_bad', admin)).arrayBuffer();
    const item = await settle('probe_bad');
    assert.equal(item.runtime.failures, 1);
    assert.equal(item.runtime.last_error, 'Error: expected HTTP 200, got 503');
    assert.equal(item.runtime.failures_last_hour, 1);
    const res = await t.acp('/acp/http-client/recent-failures', operator, { task: 'probe_bad' });
    const failures = (await res.json()) as {
      items: { task: string; run_id: string; attempt: number; status: number }[];
    };
    assert.deepEqual(
      failures.items.map((f) => [f.task, f.attempt, f.status]),
      [
        ['probe_bad', 2, 503],
        ['probe_bad', 1, 503],
      ],
    );
    const lines = t.logs.lines.filter((l) => l.task === 'probe_bad');
    assert.ok(lines.some((l) => l.message === 'http call failed'));
    assert.ok(lines.some((l) => l.message === 'task run failed'));
    assert.equal(new Set(lines.map((l) => l.run_id)).size, 1, 'one run, one run id across its lines');
  });

  test('filter and sort are done by the server', async () => {
    const failing = await list({ filter: { failing: true } });
    assert.deepEqual(
      failing.items.map((i) => i.name),
      ['probe_bad'],
    );
    const byFailures = await list({ sort: { by: 'failures', order: 'desc' } });
    assert.equal(byFailures.items[0]?.name, 'probe_bad');
    const byName = await list({ sort: { by: 'name' } });
    assert.deepEqual(
      byName.items.map((i) => i.name),
      [...byName.items.map((i) => i.name)].sort(),
    );
    assert.equal((await list({ filter: { running: true } })).total, 0);
    assert.equal((await t.acp('/acp/cron-tasks/list', viewer, { sort: { by: 'colour' } })).status, 400);
  });

  test('targets.check marks unreachable targets on their stream; stats.flush persists counters', async () => {
    const flow = (await (
      await t.acp('/acp/traffic-flows/create', admin, { slug: 'checked', name: 'c' })
    ).json()) as FlowRecord;
    const mk = async (name: string, url: string) =>
      (await (
        await t.acp('/acp/streams/create', admin, {
          flow_id: flow.id,
          name,
          type: 'regular',
          target_url: url,
        })
      ).json()) as StreamRecord;
    const ok = await mk('ok', `${upUrl}/healthy?s={stream}`);
    const headRefused = await mk('get-only', `${upUrl}/head-refused`);
    const bad = await mk('bad', `${upUrl}/broken`);
    const hangs = await mk('hangs', `${upUrl}/hangs`);
    const run = await runNow('targets_check');
    assert.equal(run.status, 202);
    await run.arrayBuffer();
    await settle('targets_check');
    const streams = await t.node.storage.streams.ofFlow(flow.id);
    const status = Object.fromEntries(streams.map((s) => [s.id, [s.target_status, s.target_error]]));
    assert.deepEqual(status[ok.id], ['ok', null]);
    assert.deepEqual(status[headRefused.id], ['ok', null], 'HEAD refused, GET answered');
    assert.deepEqual(status[bad.id], ['unreachable', 'HTTP 503']);
    assert.equal(status[hangs.id]?.[0], 'unreachable', 'a target that never answers, within the run');
    assert.match(String(status[hangs.id]?.[1]), /timeout/i);

    for (let i = 0; i < 3; i++)
      await (
        await fetch(`${t.url}/go/checked`, {
          redirect: 'manual',
          headers: { 'user-agent': USER_AGENTS.chromeWindows },
        })
      ).arrayBuffer();
    // stats_flush also ticks every second on its own, so a manual run may meet 409 already_running.
    assert.ok([202, 409].includes((await runNow('stats_flush')).status));
    const clicks = async () => (await t.node.storage.flows.get(flow.id))?.clicks ?? 0;
    await until('the clicks to be persisted', async () => (await clicks()) >= 3, 10_000, 20);
    assert.equal(await clicks(), 3);
  });
});
