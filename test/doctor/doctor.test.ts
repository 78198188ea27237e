import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { sha256Hex } from '../../src/auth/index.ts';
import { DoctorReportSchema, runDoctor } from '../../src/doctor/index.ts';
import { runCli } from '../helpers/cli.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { until } from '../helpers/until.ts';

const doctor = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(['doctor', ...args], { env });

type Report = ReturnType<typeof JSON.parse>;
/** Fails with every schema violation listed. */
function assertSchema(report: Report): void {
  const errors = [...Value.Errors(DoctorReportSchema, report)].map((e) => `${e.path} ${e.message}`);
  assert.deepEqual(errors, []);
}
const procedure = (report: Report, node: number, key: string) =>
  report.nodes[node].procedures.find((p: { key: string }) => p.key === key);
const flagged = (p: { items: { subject: string; finding: boolean }[] }) =>
  p.items.filter((i) => i.finding).map((i) => i.subject);

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('sluice doctor against a live node', () => {
  let t: TestNode;
  let slow: { server: Server; url: string };
  let admin: string;
  let viewer: string;

  before(async () => {
    // Slow is 2 s against a 1 s level (`--task-p95-ms`): the slow task is over it by its upstream's
    // own timer, and the quick ones (a refused connection, a counter flush) stay under it with room
    // for a busy machine — at a 250 ms level a refused connection was "slow" once, with the suite
    // four files at a time on two cores.
    slow = await listen((_req, res) => setTimeout(() => res.writeHead(200).end('ok'), 2000));
    t = await startTestNode({
      yaml: [
        'app:',
        '  commit: 0123abc',
        '  version: 2.4.0',
        'cron:',
        '  tasks:',
        '    flaky:',
        '      kind: http.probe',
        "      schedule: '* * * * * *'",
        '      execution_scope: all',
        '      url: http://127.0.0.1:1/health?api_key=hunter2',
        '    slow:',
        '      kind: http.probe',
        "      schedule: '* * * * * *'",
        '      execution_scope: all',
        `      url: ${slow.url}/`,
        '',
      ].join('\n'),
      env: {},
    });
    admin = await t.token('admin');
    viewer = await t.token('viewer');
    // An erroring route: an unknown slug and a malformed list body.
    await fetch(`${t.url}/go/no-such-flow`, { redirect: 'manual' });
    await t.acp('/acp/streams/list', admin, { limit: 'many' });
    // Let the failing task fail a few times, the slow one run a few times.
    await until(
      'both probes to have run four times',
      () => t.node.scheduler.list().every((x) => x.runtime.runs >= 4 || x.kind !== 'http.probe'),
      30_000,
      100,
    );
  });
  after(async () => {
    await t.close();
    slow.server.close();
  });

  test('--json: exit 1, the schema of the report, and each finding where the procedures put it', async () => {
    const { code, stdout } = await doctor([
      '--url',
      t.url,
      '--token',
      admin,
      '--task-p95-ms',
      '1000',
      '--json',
    ]);
    assert.equal(code, 1);
    const report = JSON.parse(stdout);
    assertSchema(report);
    assert.equal(report.exit_code, 1);
    assert.equal(report.healthy, false);
    assert.equal(report.nodes[0].server_id, t.node.serverId);
    assert.equal(report.nodes[0].is_leader, true);

    const rise = procedure(report, 0, 'failure_rise');
    assert.deepEqual(flagged(rise), ['flaky']);
    const calls = rise.items[0].data.http_failures;
    assert.ok(calls.length > 0);
    // The failing call is there for procedure 2, with its secret query parameter masked.
    assert.match(calls[0].url, /^http:\/\/127\.0\.0\.1:1\/health\?api_key=(%5B|\[)redacted/);
    assert.ok(!stdout.includes('hunter2'));

    assert.deepEqual(flagged(procedure(report, 0, 'task_p95')), ['slow']);
    // One unknown slug and one malformed body are the callers' mistakes: listed, not flagged.
    const routeErrors = procedure(report, 0, 'route_errors');
    assert.deepEqual(flagged(routeErrors), []);
    assert.deepEqual(
      routeErrors.items.map((i: { subject: string }) => i.subject),
      ['/acp/streams/list', '/go/:slug'],
    );
    const go = routeErrors.items.find((i: { subject: string }) => i.subject === '/go/:slug');
    assert.deepEqual(Object.keys(go.data).sort(), [
      'avg_ms',
      'client_errors',
      'count',
      'errors',
      'p95_ms',
      'recent',
      'recent_client_error_rate',
      'server_errors',
    ]);
    assert.equal(go.data.client_errors, 1);
    assert.equal(procedure(report, 0, 'acp_health').status, 'ok');
    assert.equal(procedure(report, 0, 'running_tasks').status, 'ok');
    assert.equal(procedure(report, 0, 'leader_tasks').status, 'ok');
    assert.equal(report.nodes[0].commit, '0123abc');
    assert.equal(report.nodes[0].version, '2.4.0');
    assert.equal(report.version_audit.status, 'ok');
  });

  test('the text report names each procedure and finding, without colour when not on a terminal', async () => {
    const { code, stdout } = await doctor(['--url', t.url, '--task-p95-ms', '1000'], { SLUICE_TOKEN: admin });
    assert.equal(code, 1);
    for (const title of [
      '1. Running tasks',
      '2. Failures rising',
      '5. Routes with errors',
      '7. Version audit',
    ]) {
      assert.ok(stdout.includes(title), title);
    }
    assert.match(stdout, /flaky: \d+ failures in the last hour/);
    assert.match(stdout, /Verdict: findings need attention \(exit 1/);
    assert.ok(!stdout.includes('\x1b['), 'no ANSI colour in a pipe');
  });

  test('a viewer gets the verdicts, and is told the HTTP calls need the operator role', async () => {
    const report = await runDoctor({ urls: [t.url], token: viewer, taskP95Ms: 5000, clientErrorRate: 0.5 });
    assert.equal(report.exit_code, 1);
    const node = report.nodes[0]!;
    assert.ok(node.reachable);
    const rise = node.procedures.find((p) => p.key === 'failure_rise')!;
    assert.match(rise.items[0]!.message, /operator role/);
    assert.equal(node.procedures.find((p) => p.key === 'task_p95')!.status, 'ok');
  });

  test('exit 2 when the token is refused or the node is down; 64 for a bad command line', async () => {
    const refused = await doctor(['--url', t.url, '--token', 'wrong', '--json']);
    assert.equal(refused.code, 2);
    const r = JSON.parse(refused.stdout);
    assertSchema(r);
    assert.match(r.nodes[0].error, /token was refused \(401 auth\.unauthorized\)/);

    const { server, url } = await listen(() => {});
    server.close();
    const down = await doctor(['--url', url, '--token', admin]);
    assert.equal(down.code, 2);
    assert.match(down.stdout, /unreachable \(ECONNREFUSED\)/);

    const notSluice = await listen((_q, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>'),
    );
    const odd = await doctor(['--url', notSluice.url, '--token', admin]);
    notSluice.server.close();
    assert.equal(odd.code, 2);
    assert.match(odd.stdout, /no JSON; is this a Sluice node/);

    assert.equal((await doctor(['--token', admin])).code, 64);
    assert.equal((await doctor(['--url', t.url])).code, 64);
    assert.equal((await doctor(['--url', t.url, '--token', admin, '--task-p95-ms', '0'])).code, 64);
    for (const rate of ['1.5', '-0.1', 'half', ''])
      assert.equal(
        (await doctor(['--url', t.url, '--token', admin, '--client-error-rate', rate])).code,
        64,
        rate,
      );
    assert.equal((await doctor(['--url', 'ftp://x', '--token', admin])).code, 64);
  });
});

describe('sluice doctor when it can ask no node', () => {
  test('a version audit of no node is not a pass: ✗ with the unasked node, a finding, exit 2', async () => {
    const { server, url } = await listen(() => {});
    server.close();
    const text = await doctor(['--url', url, '--token', 'any']);
    assert.equal(text.code, 2);
    assert.doesNotMatch(text.stdout, /✓ Version audit/);
    assert.match(text.stdout, /✗ Version audit: nothing audited: no node answered/);
    assert.match(text.stdout, new RegExp(`• ${url}: not audited: the node could not be asked`));
    const json = await doctor(['--url', url, '--token', 'any', '--json']);
    const r = JSON.parse(json.stdout);
    assertSchema(r);
    assert.equal(r.version_audit.status, 'finding');
    assert.equal(r.healthy, false);
    assert.equal(r.exit_code, 2);
  });
});

describe('sluice doctor on a healthy node', () => {
  test('exit 0 and every procedure ok; its own calls do not make findings', async () => {
    const t = await startTestNode();
    try {
      const token = await t.token('operator');
      const { code, stdout } = await doctor(['--url', t.url, '--token', token, '--json']);
      const report = JSON.parse(stdout);
      assert.deepEqual(
        report.nodes[0].procedures.filter((p: { status: string }) => p.status !== 'ok'),
        [],
      );
      assert.equal(code, 0);
      assert.equal(report.healthy, true);
    } finally {
      await t.close();
    }
  });

  test("a viewer's doctor run again and again makes no 403 of its own and no finding; it says what a viewer cannot see", async () => {
    const t = await startTestNode();
    try {
      const viewer = await t.token('viewer');
      // More runs than procedure 5 needs to judge a rate (20 calls): each run used to ask
      // /acp/http-client/recent-failures and be refused, a 100 % client-error rate of the doctor's making.
      const runs = 25;
      let report: Awaited<ReturnType<typeof runDoctor>> | undefined;
      for (let i = 0; i < runs; i++)
        report = await runDoctor({ urls: [t.url], token: viewer, taskP95Ms: 5000, clientErrorRate: 0.5 });
      const route = t.node.telemetry.systemMetrics().controllers['/acp/http-client/recent-failures'];
      assert.equal(route?.errors ?? 0, 0, JSON.stringify(route));
      assert.deepEqual(
        t.logs.apiErrors().filter((r) => r.code === 'auth.forbidden'),
        [],
        'no api error record of a refusal',
      );
      const node = report!.nodes[0]!;
      assert.ok(node.reachable);
      assert.deepEqual(
        node.procedures.filter((p) => p.status !== 'ok').map((p) => `${p.key}: ${p.summary}`),
        [],
      );
      assert.equal(report!.exit_code, 0);
      const rise = node.procedures.find((p) => p.key === 'failure_rise')!;
      assert.match(rise.summary, /failed HTTP calls are not shown: reading them needs an operator token/);
      const text = await doctor(['--url', t.url, '--token', viewer]);
      assert.equal(text.code, 0, text.stdout);
      assert.match(text.stdout, /2\. Failures rising .*needs an operator token/);
      // An operator's doctor reads them, and is not told otherwise.
      const operator = await runDoctor({
        urls: [t.url],
        token: await t.token('operator'),
        taskP95Ms: 5000,
        clientErrorRate: 0.5,
      });
      const readable = operator.nodes[0]!;
      assert.ok(readable.reachable);
      assert.doesNotMatch(
        readable.procedures.find((p) => p.key === 'failure_rise')!.summary,
        /operator token/,
      );
      assert.equal(
        t.node.telemetry.systemMetrics().controllers['/acp/http-client/recent-failures']?.count,
        1,
      );
    } finally {
      await t.close();
    }
  });

  test("against an older node that cannot say the token's role, a viewer's doctor is refused as before, and never flags its own 403s", async () => {
    const t = await startTestNode();
    // The node as an older build answers it: no /acp/auth/whoami.
    const older = await listen((req, res) => {
      let body = '';
      req.on('data', (d) => {
        body += d;
      });
      req.on('end', async () => {
        if (req.url === '/acp/auth/whoami') {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'resource.not_found', message: 'no route' } }));
          return;
        }
        // The doctor's GETs too (its country probe): they carry no body.
        const answer = await fetch(`${t.url}${req.url}`, {
          method: req.method!,
          headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
          ...(req.method === 'GET' ? {} : { body }),
        });
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(await answer.text());
      });
    });
    try {
      const viewer = await t.token('viewer');
      let report: Awaited<ReturnType<typeof runDoctor>> | undefined;
      for (let i = 0; i < 25; i++)
        report = await runDoctor({
          urls: [older.url],
          token: viewer,
          taskP95Ms: 5000,
          clientErrorRate: 0.5,
          discover: false,
        });
      const route = '/acp/http-client/recent-failures';
      assert.equal(t.node.telemetry.systemMetrics().controllers[route]?.client_errors, 25);
      const node = report!.nodes[0]!;
      assert.ok(node.reachable);
      assert.equal(report!.exit_code, 0, JSON.stringify(node.procedures));
      const item = node.procedures
        .find((p) => p.key === 'route_errors')!
        .items.find((i) => i.subject === route)!;
      assert.equal(item.finding, false);
      assert.match(item.message, /its own refused calls count here/);
      assert.match(node.procedures.find((p) => p.key === 'failure_rise')!.summary, /needs an operator token/);
    } finally {
      older.server.close();
      await t.close();
    }
  });

  test('a few 401s and 404s (a mistyped token, /go/typo, a stray path) are information, not findings; a recent 5xx is', async () => {
    // A configured operator: its token still works once storage is gone (the 5xx below).
    const token = 'doctor-token-of-an-operator';
    const t = await startTestNode({
      yaml: `acp:\n  operators:\n    - name: oncall\n      role: operator\n      token_sha256: ${sha256Hex(token)}\n`,
    });
    try {
      for (const path of ['/go/typo', '/nowhere', '/go/typo'])
        await (await fetch(`${t.url}${path}`)).arrayBuffer();
      for (let i = 0; i < 2; i++) await (await t.acp('/acp/system/metrics', 'not-a-token')).arrayBuffer();
      const quiet = await doctor(['--url', t.url, '--token', token, '--json']);
      const routes = JSON.parse(quiet.stdout).nodes[0].procedures.find(
        (p: { key: string }) => p.key === 'route_errors',
      );
      assert.equal(quiet.code, 0, quiet.stdout);
      assert.deepEqual(routes.items.map((i: { subject: string }) => i.subject).sort(), [
        '/acp/system/metrics',
        '/go/:slug',
        '__unmatched__',
      ]);
      assert.ok(routes.items.every((i: { finding: boolean }) => !i.finding));

      await t.node.storage.close();
      await (await fetch(`${t.url}/readyz`)).arrayBuffer();
      const failing = await doctor(['--url', t.url, '--token', token, '--json']);
      const report = JSON.parse(failing.stdout);
      const found = report.nodes[0].procedures
        .find((p: { key: string }) => p.key === 'route_errors')
        .items.filter((i: { finding: boolean }) => i.finding)
        .map((i: { subject: string }) => i.subject);
      assert.ok(found.includes('/readyz'), failing.stdout);
      assert.match(
        report.nodes[0].procedures
          .find((p: { key: string }) => p.key === 'route_errors')
          .items.find((i: { subject: string }) => i.subject === '/readyz').message,
        /^last 5 minutes: 1 server error \(5xx\) of 1 call; 1 server and 0 client errors of 1 call since start$/,
      );
      assert.notEqual(failing.code, 0);
    } finally {
      await t.close();
    }
  });
});

const skipPg = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('sluice doctor across a leader and a follower on one PostgreSQL', { skip: skipPg }, () => {
  const schema = testSchema();
  let a: TestNode;
  let b: TestNode;
  let token: string;
  const yaml = (id: string, commit: string) =>
    `app:\n  commit: ${commit}\n  server:\n    id: ${id}\ncluster:\n  leader_election: postgres\n  lease_ttl_ms: 5000\n  renew_interval_ms: 200\n`;

  before(async () => {
    a = await startTestNode({ postgres: { schema }, yaml: yaml('doc-a', 'c0ffee') });
    b = await startTestNode({ postgres: { schema }, yaml: yaml('doc-b', 'c0ffee') });
    token = await a.token('operator');
  });
  after(async () => {
    await b.close();
    await a.close();
    await dropSchema(schema);
  });

  test('the follower explains where leader tasks run; the same build on both is healthy', async () => {
    const { code, stdout } = await doctor(['--urls', `${a.url},${b.url}`, '--token', token, '--json']);
    const report = JSON.parse(stdout);
    assertSchema(report);
    assert.equal(code, 0, stdout);
    assert.deepEqual(
      report.nodes.map((n: { server_id: string; is_leader: boolean }) => [n.server_id, n.is_leader]),
      [
        ['doc-a', true],
        ['doc-b', false],
      ],
    );
    const follower = procedure(report, 1, 'leader_tasks');
    assert.equal(follower.status, 'ok');
    assert.match(
      follower.items.find((i: { subject: string }) => i.subject === 'targets_check').message,
      /runs on the leader \(doc-a\)/,
    );
    assert.match(report.version_audit.summary, /2 nodes on c0ffee/);
  });

  test('given one URL, the doctor checks the whole cluster the node lists; --single only that node', async () => {
    const { code, stdout } = await doctor(['--url', b.url, '--token', token, '--json']);
    assert.equal(code, 0, stdout);
    const report = JSON.parse(stdout);
    assert.deepEqual(report.nodes.map((n: { server_id: string }) => n.server_id).sort(), ['doc-a', 'doc-b']);
    assert.match(report.version_audit.summary, /2 nodes on c0ffee/);
    const single = await doctor(['--url', b.url, '--token', token, '--json', '--single']);
    assert.deepEqual(
      JSON.parse(single.stdout).nodes.map((n: { server_id: string }) => n.server_id),
      ['doc-b'],
    );
    // Every node's figures from any one node, fetched with the caller's token.
    const res = await b.acp('/acp/cluster/metrics', token, {});
    const all = (await res.json()) as {
      items: { server_id: string; metrics: { host: { server_id: string } } | null; error: string | null }[];
    };
    assert.deepEqual(all.items.map((i) => [i.server_id, i.metrics?.host.server_id, i.error]).sort(), [
      ['doc-a', 'doc-a', null],
      ['doc-b', 'doc-b', null],
    ]);
  });

  test('a node on another build is the version audit finding (exit 1)', async () => {
    const c = await startTestNode({ postgres: { schema }, yaml: yaml('doc-c', 'deadbee') });
    try {
      const { code, stdout } = await doctor([
        '--url',
        a.url,
        '--url',
        b.url,
        '--url',
        c.url,
        '--token',
        token,
        '--json',
      ]);
      assert.equal(code, 1);
      const report = JSON.parse(stdout);
      assert.equal(report.version_audit.status, 'finding');
      assert.deepEqual(
        report.version_audit.items
          .filter((i: { finding: boolean }) => i.finding)
          .map((i: { subject: string }) => i.subject),
        ['doc-c'],
      );
    } finally {
      await c.close();
    }
  });
});

/**
 * A stand-in node whose clock is two hours behind ours, answering like Sluice. `tasksBody` lets a
 * test break the shape of one answer.
 */
async function fakeNode(tasksBody?: unknown): Promise<{ server: Server; url: string }> {
  const skewMs = -2 * 3600_000;
  return listen((req, res) => {
    const nodeNow = Date.now() + skewMs;
    const send = (body: unknown) =>
      res
        .writeHead(200, { 'content-type': 'application/json', date: new Date(nodeNow).toUTCString() })
        .end(JSON.stringify(body));
    switch (req.url) {
      case '/acp/cron-tasks/list':
        return send(
          tasksBody ?? {
            items: [
              {
                name: 'check',
                kind: 'targets.check',
                execution_scope: 'leader',
                enabled: true,
                timeout_ms: 60_000,
                // Ten seconds ahead on the node's clock — two hours "ago" on ours.
                next_run_at: new Date(nodeNow + 10_000).toISOString(),
                runtime: {
                  running: false,
                  running_since: null,
                  runs: 1,
                  failures: 0,
                  p95: 5,
                  last_error: null,
                  failures_last_hour: 0,
                  failures_prev_hour: 0,
                },
              },
            ],
            total: 1,
          },
        );
      case '/acp/traffic-flows/list':
      case '/acp/streams/list':
        return send({ items: [], total: 0, next_cursor: null, runtime: {}, commit: 'fake' });
      case '/acp/cluster/nodes':
        return send({ items: [], leader_id: 'fake', this_node: {} });
      case '/acp/http-client/recent-failures':
        return send({ items: [], total: 0 });
      default:
        return send({
          host: { server_id: 'fake', is_leader: true, uptime_seconds: 9 },
          db: { driver: 'postgres', status: 'up' },
          controllers: { '/acp/system/metrics': { count: 1, errors: 0, avg_ms: 1, p95_ms: 1 } },
        });
    }
  });
}

describe('sluice doctor judges by the node, not by its own clock or hopes', () => {
  test("task times are compared with the node's clock (its Date header), not the operator's", async () => {
    const fake = await fakeNode();
    try {
      const report = await runDoctor({ urls: [fake.url], token: 't', taskP95Ms: 5000, clientErrorRate: 0.5 });
      const node = report.nodes[0]!;
      assert.ok(node.reachable);
      assert.deepEqual(
        node.procedures.find((p) => p.key === 'leader_tasks')!.items.filter((i) => i.finding),
        [],
      );
      assert.equal(report.exit_code, 0);
    } finally {
      fake.server.close();
    }
  });

  test('an answer of the wrong shape is a finding (200 without items) or unreachable (not an object)', async () => {
    const odd = await fakeNode({ items: 5 });
    try {
      const report = await runDoctor({ urls: [odd.url], token: 't', taskP95Ms: 5000, clientErrorRate: 0.5 });
      const node = report.nodes[0]!;
      assert.ok(node.reachable);
      const health = node.procedures.find((p) => p.key === 'acp_health')!;
      assert.match(health.summary, /cron-tasks\/list answered 200 without a list of items/);
      assert.equal(report.exit_code, 1);
    } finally {
      odd.server.close();
    }
    const array = await listen((_q, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('[]'),
    );
    try {
      const report = await runDoctor({
        urls: [array.url],
        token: 't',
        taskP95Ms: 5000,
        clientErrorRate: 0.5,
      });
      assert.equal(report.exit_code, 2);
      assert.match((report.nodes[0] as { error: string }).error, /not an object/);
    } finally {
      array.server.close();
    }
  });

  test('a body cut mid-way is unreachable (exit 2), not a crash', async () => {
    const cut = await listen((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"items":');
      setTimeout(() => res.destroy(), 20);
    });
    try {
      const report = await runDoctor({ urls: [cut.url], token: 't', taskP95Ms: 5000, clientErrorRate: 0.5 });
      assert.equal(report.exit_code, 2);
      assert.match((report.nodes[0] as { error: string }).error, /unreachable/);
    } finally {
      cut.server.close();
    }
  });

  test('--help prints the usage and exits 0', async () => {
    const { code, stdout } = await doctor(['--help']);
    assert.equal(code, 0);
    assert.match(stdout, /doctor --url URL/);
  });
});
