import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, testSchema } from '../helpers/postgres.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('a leader and a follower on one PostgreSQL, seen through the ACP', { skip }, () => {
  const schema = testSchema();
  let slow: Server;
  let a: TestNode;
  let b: TestNode;
  let tokenA: string;
  let tokenB: string;
  before(async () => {
    slow = createServer((_q, res) => setTimeout(() => res.writeHead(200).end(), 400));
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', () => r()));
    const yaml = (id: string) =>
      [
        'app:',
        `  server:\n    id: ${id}`,
        'cluster:',
        '  leader_election: postgres',
        '  lease_ttl_ms: 5000',
        '  renew_interval_ms: 200',
        'observability:',
        '  metrics:',
        '    prometheus_enabled: true',
        'cron:',
        '  tasks:',
        '    slow_probe:',
        '      kind: http.probe',
        "      schedule: '0 0 1 1 *'",
        '      execution_scope: all',
        `      url: http://127.0.0.1:${(slow.address() as AddressInfo).port}/`,
        '',
      ].join('\n');
    a = await startTestNode({ postgres: { schema }, yaml: yaml('node-a') });
    b = await startTestNode({ postgres: { schema }, yaml: yaml('node-b') });
    [tokenA, tokenB] = await Promise.all([a.token('operator'), b.token('operator')]);
  });
  after(async () => {
    await b.close();
    await a.close();
    await dropSchema(schema);
    await new Promise<void>((r) => slow.close(() => r()));
  });

  test('the first node leads; both know it; is_leader shows in config, metrics and the exposition', async () => {
    const nodes = (await (await b.acp('/acp/cluster/nodes', tokenB, {})).json()) as {
      items: { server_id: string; is_leader: boolean }[];
      leader_id: string;
      leader_election: string;
    };
    assert.equal(nodes.leader_election, 'postgres');
    assert.equal(nodes.leader_id, 'node-a');
    assert.deepEqual(
      nodes.items.map((n) => [n.server_id, n.is_leader]),
      [
        ['node-a', true],
        ['node-b', false],
      ],
    );
    const cfgB = (await (await b.acp('/acp/system/config', tokenB, {})).json()) as {
      runtime: Record<string, unknown>;
    };
    assert.deepEqual(cfgB.runtime, {
      'app.server.id': 'node-b',
      'app.server.is_leader': false,
      'cluster.leader_id': 'node-a',
    });
    const hostA = (
      (await (await a.acp('/acp/system/metrics', tokenA, {})).json()) as { host: { is_leader: boolean } }
    ).host;
    assert.equal(hostA.is_leader, true);
    assert.ok((await (await fetch(`${b.url}/metrics`)).text()).includes('\nsluice_is_leader 0\n'));
    assert.ok((await (await fetch(`${a.url}/metrics`)).text()).includes('\nsluice_is_leader 1\n'));
  });

  test('run-now of a leader task on the follower is 409 task.not_leader; on the leader it starts', async () => {
    const onB = await b.acp('/acp/cron-tasks/run', tokenB, { name: 'targets_check' });
    assert.equal(onB.status, 409);
    assert.equal(((await onB.json()) as { error: { code: string } }).error.code, 'task.not_leader');
    const onA = await a.acp('/acp/cron-tasks/run', tokenA, { name: 'targets_check' });
    assert.equal(onA.status, 202);
    await onA.arrayBuffer();
  });

  test('run-now of a task already running is 409 task.already_running', async () => {
    const first = await b.acp('/acp/cron-tasks/run', tokenB, { name: 'slow_probe' });
    assert.equal(first.status, 202);
    await first.arrayBuffer();
    const second = await b.acp('/acp/cron-tasks/run', tokenB, { name: 'slow_probe' });
    assert.equal(second.status, 409);
    const body = (await second.json()) as { error: { code: string } };
    assert.equal(body.error.code, 'task.already_running');
    assert.equal(b.logs.apiErrors(second.headers.get('x-request-id')!).length, 1);
  });

  test('a graceful stop of the leader hands leadership over at once, well before the 5 s lease runs out', async () => {
    const t0 = performance.now();
    await a.node.stop();
    while (!b.node.election.isLeader()) {
      assert.ok(performance.now() - t0 < 2000, 'the follower must take over within a few renewals');
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(b.node.election.epoch() > 1);
  });
});
