import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/auth/index.ts';
import type { SystemMetrics } from '../../src/telemetry/index.ts';
import { probeNodeYaml, startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';
import { BACKENDS } from '../storage/backends.ts';

const SECTIONS = [
  'host',
  'cache',
  'db',
  'http',
  'controllers',
  'tasks',
  'streams',
  'traffic_flows',
  'clicks',
  'postbacks',
];

describe('POST /acp/system/metrics', () => {
  let t: TestNode;
  let viewer: string;
  before(async () => {
    t = await startTestNode({ env: { APP_VERSION: '1.2.3', APP_COMMIT: 'c0ffee' } });
    viewer = await t.token('viewer');
  });
  after(() => t.close());

  const metrics = async () => {
    const res = await t.acp('/acp/system/metrics', viewer);
    assert.equal(res.status, 200);
    return (await res.json()) as SystemMetrics & Record<string, unknown>;
  };

  test('has every section of the system metrics and version when set', async () => {
    const m = await metrics();
    assert.deepEqual(Object.keys(m).sort(), [...SECTIONS, 'version'].sort());
    assert.equal(m.version, '1.2.3');
  });

  test('host: uptime, identity, leader, process figures', async () => {
    const { host } = await metrics();
    assert.equal(typeof host.uptime_seconds, 'number');
    assert.ok(host.uptime_seconds >= 0);
    assert.equal(host.server_id, t.node.serverId);
    assert.equal(host.is_leader, true);
    assert.equal(host.pid, process.pid);
    assert.equal(host.node_version, process.version);
    assert.ok(host.memory.rss_bytes > 0);
    assert.ok(host.cpu.user_seconds > 0);
    for (const k of ['delay_p50_ms', 'delay_p99_ms', 'delay_max_ms', 'utilization'] as const) {
      assert.equal(typeof host.event_loop[k], 'number');
    }
  });

  test('db reports the SQLite backend with its timed queries', async () => {
    const { db } = await metrics();
    assert.equal(db.driver, 'sqlite');
    assert.equal(db.status, 'up');
    assert.ok(db.queries > 0);
    assert.deepEqual(Object.keys(db.pool).sort(), ['idle', 'size', 'waiting']);
  });

  test('http has cumulative buckets keyed by the configured bounds, ending with +Inf', async () => {
    const { http } = await metrics();
    assert.deepEqual(Object.keys(http.buckets), [
      ...t.node.config.observability.metrics.http_buckets_ms.map(String),
      '+Inf',
    ]);
    assert.equal(http.buckets['+Inf'], http.total_requests);
  });

  test('N parallel requests are counted exactly N times', async () => {
    const before = (await metrics()).controllers['/healthz']?.count ?? 0;
    const n = 64;
    await Promise.all(
      Array.from({ length: n }, () => fetch(`${t.url}/healthz`).then((r) => r.arrayBuffer())),
    );
    const entry = (await metrics()).controllers['/healthz']!;
    assert.equal(entry.count - before, n);
    assert.equal(entry.errors, 0);
    assert.ok(entry.avg_ms > 0);
    assert.ok(entry.p95_ms > 0);
  });

  test('controllers are keyed by route template and include routes not yet called', async () => {
    const { controllers } = await metrics();
    for (const key of ['/acp/system/metrics', '/acp/system/config', '/healthz', '/readyz', '__unmatched__']) {
      assert.ok(key in controllers, key);
    }
    // The call being answered is recorded after it is answered.
    const a = (await metrics()).controllers['/acp/system/metrics']!.count;
    const b = (await metrics()).controllers['/acp/system/metrics']!.count;
    assert.equal(b, a + 1);
  });
});

describe('version is absent when unset', () => {
  test('no app.version, no APP_VERSION: no version key', async () => {
    const t = await startTestNode();
    try {
      const res = await t.acp('/acp/system/metrics', await t.token('viewer'));
      const m = (await res.json()) as Record<string, unknown>;
      assert.equal('version' in m, false);
    } finally {
      await t.close();
    }
  });
});

describe('POST /acp/system/config', () => {
  test('shows the effective config with secrets redacted, plus the runtime keys', async () => {
    const metricsToken = 'scrape-secret';
    const t = await startTestNode({
      yaml: [
        'app:',
        '  server:',
        '    id: cfg-node',
        'storage:',
        '  postgres:',
        '    url: postgres://u:hunter2@db:5432/x',
        'observability:',
        '  metrics:',
        `    auth_token_sha256: ${sha256Hex(metricsToken)}`,
        'acp:',
        '  operators:',
        `    - { name: ci, role: admin, token_sha256: ${'b'.repeat(64)} }`,
        'cron:',
        '  tasks:',
        '    probe:',
        '      kind: http.probe',
        "      schedule: '*/5 * * * * *'",
        '      execution_scope: leader',
        '      url: http://127.0.0.1:9/health',
        '      headers: { x-api-key: very-secret-key }',
        '',
      ].join('\n'),
    });
    try {
      const res = await t.acp('/acp/system/config', await t.token('viewer'));
      assert.equal(res.status, 200);
      const text = await res.text();
      for (const secret of ['hunter2', 'very-secret-key', sha256Hex(metricsToken), 'b'.repeat(64)]) {
        assert.ok(!text.includes(secret), `${secret} redacted`);
      }
      const c = JSON.parse(text);
      assert.equal(c.storage.postgres.url, '[redacted]');
      assert.equal(c.acp.operators[0].name, 'ci');
      assert.equal(c.acp.operators[0].token_sha256, '[redacted]');
      assert.deepEqual(c.cron.tasks.probe.headers, { 'x-api-key': '[redacted]' });
      assert.equal(c.cron.tasks.probe.url, 'http://127.0.0.1:9/health');
      assert.equal(c.app.server.port, 0);
      assert.equal(c.mode, 'test');
      assert.deepEqual(c.runtime, {
        'app.server.id': 'cfg-node',
        'app.server.is_leader': true,
        'cluster.leader_id': 'cfg-node',
      });
      assert.equal(c.app.server.id, 'cfg-node');
      assert.equal(c.app.server.is_leader, true);
      // The configuration the node runs with is untouched by redaction.
      assert.equal(t.node.config.storage.postgres.url, 'postgres://u:hunter2@db:5432/x');
    } finally {
      await t.close();
    }
  });
});

describe('one redaction rule for every view of an http.probe task', () => {
  test("a viewer sees the probe URL's api_key, token and password masked in /acp/system/config, as in recent failures; no log line holds them", async () => {
    const secrets = ['probe-pass', 'KEY-s3cret', 'TOK-s3cret', 'HDR-s3cret'];
    // Port 1 on the loopback refuses at once: the run fails without waiting on a timeout.
    const url =
      'http://probe-user:probe-pass@127.0.0.1:1/health?api_key=KEY-s3cret&Token=TOK-s3cret&region=eu';
    const masked = 'http://[redacted]@127.0.0.1:1/health?api_key=[redacted]&Token=[redacted]&region=eu';
    const t = await startTestNode({
      yaml: [
        'cron:',
        '  tasks:',
        '    probe:',
        '      kind: http.probe',
        "      schedule: '0 0 1 1 *'",
        '      execution_scope: all',
        `      url: '${url}'`,
        '      headers: { x-api-key: HDR-s3cret }',
        '',
      ].join('\n'),
    });
    try {
      const [viewer, operator] = await Promise.all([t.token('viewer'), t.token('operator')]);
      const shown = await (await t.acp('/acp/system/config', viewer)).text();
      const probe = JSON.parse(shown).cron.tasks.probe;
      assert.equal(probe.url, masked);
      assert.deepEqual(probe.headers, { 'x-api-key': '[redacted]' });
      for (const secret of secrets) assert.ok(!shown.includes(secret), `${secret} shown in the config`);

      assert.equal((await t.acp('/acp/cron-tasks/run', operator, { name: 'probe' })).status, 202);
      type Listed = { items: { runtime: { last_finished_at: string | null; last_error: string | null } }[] };
      const listed = async () =>
        (await (await t.acp('/acp/cron-tasks/list', viewer, { filter: { name: 'probe' } })).json()) as Listed;
      await until(
        'the probe run to finish',
        async () => (await listed()).items[0]?.runtime.last_finished_at != null,
        10_000,
      );

      const failures = (await (
        await t.acp('/acp/http-client/recent-failures', operator, { task: 'probe' })
      ).json()) as {
        items: { url: string; request_headers: Record<string, string> }[];
      };
      assert.equal(failures.items[0]?.url, masked, 'the same URL, masked the same way, as the config view');
      assert.equal(failures.items[0]?.request_headers['x-api-key'], '[redacted]');
      const lastError = (await listed()).items[0]?.runtime.last_error ?? '';
      assert.ok(lastError.includes(masked), lastError);
      const metrics = await (await t.acp('/acp/system/metrics', viewer)).text();
      for (const secret of secrets) {
        assert.ok(!lastError.includes(secret), `${secret} in the task's last_error`);
        assert.ok(!metrics.includes(secret), `${secret} in system metrics`);
        assert.ok(!JSON.stringify(failures).includes(secret), `${secret} in recent failures`);
        assert.ok(!t.logs.raw.includes(secret), `${secret} in the log`);
      }
      assert.ok(
        t.logs.lines.some((l) => l.message === 'task run failed' && String(l.error).includes(masked)),
      );
    } finally {
      await t.close();
    }
  });
});

describe('GET /metrics', () => {
  test('is 404 resource.not_found when prometheus_enabled is false', async () => {
    const t = await startTestNode({ yaml: 'observability:\n  metrics:\n    prometheus_enabled: false\n' });
    try {
      const res = await fetch(`${t.url}/metrics`);
      assert.equal(res.status, 404);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'resource.not_found');
      assert.ok(res.headers.get('x-request-id'));
    } finally {
      await t.close();
    }
  });

  describe('when enabled', () => {
    let t: TestNode;
    before(async () => {
      t = await startTestNode({
        yaml: 'observability:\n  metrics:\n    prometheus_enabled: true\n    prefix: svc\n',
        env: { APP_COMMIT: 'deadbeef' },
      });
    });
    after(() => t.close());

    test('serves text 0.0.4 by default, with tracing headers', async () => {
      const res = await fetch(`${t.url}/metrics`);
      const text = await res.text();
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
      assert.ok(res.headers.get('x-request-id'));
      assert.equal(res.headers.get('x-server-id'), t.node.serverId);
      for (const family of [
        '# TYPE svc_controller_requests_total counter',
        '# TYPE svc_controller_errors_total counter',
        '# TYPE svc_controller_duration_milliseconds histogram',
        '# TYPE svc_http_client_duration_milliseconds histogram',
        '# TYPE svc_build_info gauge',
        '# TYPE svc_is_leader gauge',
        'svc_build_info{version="",commit="deadbeef"} 1',
        'svc_is_leader 1',
        'process_cpu_user_seconds_total',
      ]) {
        assert.ok(text.includes(family), family);
      }
      assert.ok(!text.includes('# EOF'));
    });

    test('serves OpenMetrics when Accept asks for it', async () => {
      const res = await fetch(`${t.url}/metrics`, {
        headers: { accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' },
      });
      const text = await res.text();
      assert.equal(
        res.headers.get('content-type'),
        'application/openmetrics-text; version=1.0.0; charset=utf-8',
      );
      assert.ok(text.includes('# TYPE svc_controller_requests counter'));
      assert.ok(text.endsWith('# EOF\n'));
      assert.equal(text.match(/# EOF/g)?.length, 1);
    });

    test('the exposition and the JSON never disagree', async () => {
      const viewer = await t.token('viewer');
      await Promise.all(
        Array.from({ length: 10 }, () => fetch(`${t.url}/healthz`).then((r) => r.arrayBuffer())),
      );
      await (await fetch(`${t.url}/nowhere`)).arrayBuffer();
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const m = (await (await t.acp('/acp/system/metrics', viewer)).json()) as SystemMetrics;
      const sample = (name: string, route: string) => {
        const line = text.split('\n').find((l) => l.startsWith(`${name}{route="${route}"} `));
        return Number(line?.split(' ').at(-1));
      };
      for (const route of ['/healthz', '__unmatched__']) {
        assert.equal(sample('svc_controller_requests_total', route), m.controllers[route]!.count, route);
        assert.equal(sample('svc_controller_errors_total', route), m.controllers[route]!.errors, route);
        assert.equal(
          sample('svc_controller_duration_milliseconds_count', route),
          m.controllers[route]!.count,
          route,
        );
      }
    });
  });

  test('every float the two views share is the same number: http duration sum, a task last duration (real calls)', async () => {
    // An upstream that answers after a few real milliseconds: fractional durations that, added in
    // binary, leave a float tail unless the sum is kept exactly.
    const upstream = createServer((_req, res) => setTimeout(() => res.writeHead(200).end('ok'), 3));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    const t = await startTestNode({ yaml: probeNodeYaml(`http://127.0.0.1:${port}/`, { prometheus: true }) });
    try {
      const operator = await t.token('operator');
      for (let run = 1; run <= 6; run++) {
        const res = await t.acp('/acp/cron-tasks/run', operator, { name: 'probe' });
        assert.ok(res.status < 300, await res.text());
        await until(`run ${run} of the probe`, () => t.node.scheduler.list()[0]!.runtime.runs >= run, 10_000);
      }
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const m = (await (await t.acp('/acp/system/metrics', operator)).json()) as SystemMetrics;
      const sample = (name: string) => {
        const line = text.split('\n').find((l) => l.startsWith(`${name} `));
        assert.ok(line, name);
        return line.split(' ').at(-1)!;
      };
      assert.equal(m.http.total_requests, 6);
      const sum = sample('sluice_http_client_duration_milliseconds_sum');
      assert.equal(Number(sum), m.http.duration_ms_sum);
      assert.equal(sum, String(m.http.duration_ms_sum));
      const last = sample('sluice_task_last_duration_milliseconds{task="probe"}');
      assert.equal(Number(last), m.tasks.probe!.last_duration_ms);
      // The sums only in the exposition (controllers, tasks) are to the microsecond too.
      for (const line of text.split('\n').filter((l) => /^sluice_\w+_milliseconds_sum/.test(l)))
        assert.match(line.split(' ').at(-1)!, /^\d+(\.\d{1,3})?$/, line);
    } finally {
      await t.close();
      upstream.close();
    }
  });

  test('requires the bearer token when auth_token_sha256 is set', async () => {
    const token = 'scrape-me-please';
    const t = await startTestNode({
      yaml: `observability:\n  metrics:\n    prometheus_enabled: true\n    auth_token_sha256: ${sha256Hex(token)}\n`,
    });
    try {
      const none = await fetch(`${t.url}/metrics`);
      assert.equal(none.status, 401);
      assert.equal(((await none.json()) as { error: { code: string } }).error.code, 'auth.unauthorized');
      const wrong = await fetch(`${t.url}/metrics`, { headers: { authorization: 'Bearer nope' } });
      assert.equal(wrong.status, 401);
      await wrong.arrayBuffer();
      const ok = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(ok.status, 200);
      assert.ok((await ok.text()).includes('sluice_controller_requests_total'));
      assert.ok(!t.logs.raw.includes(token));
    } finally {
      await t.close();
    }
  });
});

describe('health', () => {
  test('/healthz is live; /readyz is ready while storage answers and 503 db.unavailable when not', async () => {
    const t = await startTestNode();
    try {
      const live = await fetch(`${t.url}/healthz`);
      assert.deepEqual(await live.json(), { status: 'ok' });
      const ready = await fetch(`${t.url}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { status: 'ready' });
      await t.node.storage.close();
      const down = await fetch(`${t.url}/readyz`);
      assert.equal(down.status, 503);
      const body = (await down.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'db.unavailable');
      assert.equal(t.logs.apiErrors(down.headers.get('x-request-id')!).length, 1);
      const live2 = await fetch(`${t.url}/healthz`);
      assert.equal(live2.status, 200);
      await live2.arrayBuffer();
    } finally {
      await t.close();
    }
  });
});

describe('faults apart from noise', () => {
  test('4xx and 5xx are counted apart, in the totals, the recent window and the exposition', async () => {
    const t = await startTestNode();
    try {
      for (let i = 0; i < 2; i++) await (await fetch(`${t.url}/nowhere`)).arrayBuffer();
      await (await fetch(`${t.url}/readyz`)).arrayBuffer();
      await t.node.storage.close();
      const down = await fetch(`${t.url}/readyz`);
      await down.arrayBuffer();
      assert.equal(down.status, 503);
      const m = t.node.telemetry.systemMetrics();
      const ready = m.controllers['/readyz']!;
      const unmatched = m.controllers.__unmatched__!;
      assert.deepEqual([ready.count, ready.errors, ready.client_errors, ready.server_errors], [2, 1, 0, 1]);
      assert.deepEqual(
        [unmatched.count, unmatched.errors, unmatched.client_errors, unmatched.server_errors],
        [2, 2, 2, 0],
      );
      assert.deepEqual(
        { ...ready.recent, avg_ms: 0, p95_ms: 0 },
        { window_s: 300, count: 2, errors: 1, server_errors: 1, avg_ms: 0, p95_ms: 0 },
      );
      const { body } = await t.node.telemetry.exposition('text');
      assert.ok(body.includes('sluice_controller_server_errors_total{route="/readyz"} 1\n'));
      assert.ok(body.includes('sluice_controller_client_errors_total{route="/readyz"} 0\n'));
      assert.ok(body.includes('sluice_controller_client_errors_total{route="__unmatched__"} 2\n'));
      assert.ok(body.includes('sluice_controller_errors_total{route="__unmatched__"} 2\n'));
    } finally {
      await t.close();
    }
  });
});

describe('system metrics db section on both backends', async () => {
  const available = (await Promise.all(BACKENDS.map((b) => b.available()))).every(Boolean);
  test('has the same keys, checkpoints null on PostgreSQL (found by a backend differential test)', {
    skip: !available && 'PostgreSQL unavailable',
  }, async () => {
    const dbs: Record<string, SystemMetrics['db']> = {};
    for (const backend of BACKENDS) {
      const t = await backend.startNode();
      try {
        const res = await t.acp('/acp/system/metrics', await t.token('viewer'));
        assert.equal(res.status, 200);
        dbs[backend.name] = ((await res.json()) as SystemMetrics).db;
      } finally {
        await t.close();
      }
    }
    const { sqlite, postgres } = dbs as Record<'sqlite' | 'postgres', SystemMetrics['db']>;
    assert.deepEqual(Object.keys(postgres).sort(), Object.keys(sqlite).sort());
    assert.equal(postgres.checkpoints, null);
    assert.deepEqual(Object.keys(sqlite.checkpoints ?? {}).sort(), [
      'backlog_pages',
      'failures',
      'last_error',
      'runs',
    ]);
  });
});
