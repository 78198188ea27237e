import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { until } from '../helpers/until.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

interface NodesAnswer {
  items: {
    server_id: string;
    is_leader: boolean;
    alive: boolean;
    last_seen: string;
    started_at: string;
    version: string | null;
    commit: string;
  }[];
  total: number;
  leader_id: string | null;
  this_node: { server_id: string; is_leader: boolean; epoch: number };
}

describe('a leader and a follower on one PostgreSQL, seen through the ACP', { skip }, () => {
  const schema = testSchema();
  let slow: Server;
  // The probe's upstream answers only when the test says so: a run is in flight for as long as the
  // test needs it to be, however slow the machine.
  const held: ServerResponse[] = [];
  let a: TestNode;
  let b: TestNode;
  let tokenA: string;
  let tokenB: string;
  before(async () => {
    slow = createServer((_q, res) => {
      held.push(res);
    });
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
    for (const res of held.splice(0)) res.writeHead(200).end();
    await b.close();
    await a.close();
    await dropSchema(schema);
    await new Promise<void>((r) => slow.close(() => r()));
  });

  test('the first node leads; both know it; is_leader shows in config, metrics and the exposition', async () => {
    const nodes = (await (await b.acp('/acp/cluster/nodes', tokenB, {})).json()) as NodesAnswer & {
      leader_election: string;
    };
    assert.equal(nodes.leader_election, 'postgres');
    assert.equal(nodes.leader_id, 'node-a');
    assert.deepEqual(
      nodes.items.map((n) => [n.server_id, n.is_leader, n.alive]),
      [
        ['node-a', true, true],
        ['node-b', false, true],
      ],
    );
    assert.deepEqual(Object.keys(nodes.items[0]!).sort(), [
      'alive',
      'commit',
      'is_leader',
      'last_seen',
      'server_id',
      'started_at',
      'url',
      'version',
    ]);
    // Each node lists the address it listens on (no cluster.advertise_url here).
    assert.deepEqual(
      nodes.items.map((n) => (n as unknown as { url: string }).url),
      [a.url, b.url],
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
    await until('the probe to reach its upstream', () => held.length === 1, 10_000);
    held.pop()!.writeHead(200).end();
    await until(
      'the run to finish',
      () => b.node.scheduler.list().find((x) => x.name === 'slow_probe')!.runtime.running === false,
      10_000,
    );
  });

  test('a graceful stop of the leader hands leadership over at once, well before the 5 s lease runs out', async () => {
    await a.node.stop();
    // Read at once: a lease left to lapse would still be node-a's for up to 5 s after its last
    // renewal; a released one is free now (or already node-b's).
    const lease = await b.node.storage.cluster.currentLease();
    assert.notEqual(lease?.holder, 'node-a', 'node-a released the lease on stop');
    // Free, the lease goes to node-b at its next renewal (every 200 ms); the limit only ends the wait.
    await until('node-b to lead', () => b.node.election.isLeader(), 10_000, 20);
    assert.ok(b.node.election.epoch() > 1);
  });

  test('after a graceful hand-over only the new leader is is_leader, and the old node has left the list', async () => {
    // Runs after the hand-over above: node-a stopped gracefully, node-b took the lease.
    const nodes = (await (await b.acp('/acp/cluster/nodes', tokenB, {})).json()) as NodesAnswer;
    assert.equal(nodes.leader_id, 'node-b');
    assert.deepEqual(
      nodes.items.map((n) => [n.server_id, n.is_leader, n.alive]),
      [['node-b', true, true]],
    );
    assert.equal(nodes.total, 1);
  });

  test('a crashed node is never the leader by its stale flag, is not alive after three renewals, and is forgotten', async () => {
    // What a leader that crashed leaves behind: its last beat said it led.
    await b.node.storage.cluster.heartbeat({
      server_id: 'node-crashed',
      started_at: new Date().toISOString(),
      version: undefined,
      commit: 'old',
      is_leader: true,
    });
    const db = new pg.Client({ connectionString: PG_URL });
    await db.connect();
    const backdate = (ms: number) =>
      db.query(
        `UPDATE ${schema}.nodes SET last_seen = clock_timestamp() - $1 * INTERVAL '1 millisecond' WHERE server_id = 'node-crashed'`,
        [ms],
      );
    const list = async () => (await (await b.acp('/acp/cluster/nodes', tokenB, {})).json()) as NodesAnswer;
    try {
      const fresh = (await list()).items.find((n) => n.server_id === 'node-crashed');
      assert.equal(fresh?.is_leader, false, 'the lease, not the flag, says who leads');
      // Three renew intervals (3 × 200 ms) and a little: not alive.
      await backdate(3 * 200 + 50);
      const stale = await list();
      assert.deepEqual(
        stale.items.map((n) => [n.server_id, n.is_leader, n.alive]),
        [
          ['node-b', true, true],
          ['node-crashed', false, false],
        ],
      );
      // Unseen for longer than cluster.forget_after_ms (a day): not listed, and the leader deletes it.
      await backdate(86_400_000 + 60_000);
      assert.deepEqual(
        (await list()).items.map((n) => n.server_id),
        ['node-b'],
      );
      await until(
        'the leader to delete the forgotten node',
        async () =>
          (await db.query(`SELECT 1 FROM ${schema}.nodes WHERE server_id = 'node-crashed'`)).rowCount === 0,
        5000,
      );
    } finally {
      await db.end();
    }
  });
});
