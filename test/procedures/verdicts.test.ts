import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  auditVersions,
  evaluate,
  type NodeSnapshot,
  type ProcedureResult,
  RISE_FACTOR,
  RISE_MIN_FAILURES,
  type TaskView,
} from '../../src/procedures/index.ts';

const NOW = Date.parse('2026-11-23T12:00:00Z');

function task(name: string, over: Partial<TaskView> = {}, rt: Partial<TaskView['runtime']> = {}): TaskView {
  return {
    name,
    kind: 'http.probe',
    execution_scope: 'all',
    enabled: true,
    timeout_ms: 60_000,
    next_run_at: new Date(NOW + 10_000).toISOString(),
    ...over,
    runtime: {
      running: false,
      running_since: null,
      runs: 10,
      failures: 0,
      p95: 12,
      last_error: null,
      failures_last_hour: 0,
      failures_prev_hour: 0,
      ...rt,
    },
  };
}

function snapshot(over: Partial<NodeSnapshot> = {}): NodeSnapshot {
  return {
    url: 'http://node-a',
    metrics: {
      host: { server_id: 'node-a', is_leader: true, uptime_seconds: 120 },
      db: { driver: 'sqlite', status: 'up', last_error: null },
      controllers: { '/acp/system/metrics': { count: 3, errors: 0, avg_ms: 1, p95_ms: 2 } },
      version: '1.2.3',
    },
    tasks: [],
    commits: { flows: 'abc123', streams: 'abc123' },
    leaderId: 'node-a',
    failures: [],
    problems: [],
    now: NOW,
    ...over,
  };
}

const run = (s: NodeSnapshot, level = 1000) => evaluate(s, { taskP95Ms: level, clientErrorRate: 0.5 });
const proc = (s: NodeSnapshot, key: ProcedureResult['key'], level = 1000) =>
  run(s, level).procedures.find((p) => p.key === key)!;
const findings = (p: ProcedureResult) => p.items.filter((i) => i.finding).map((i) => i.subject);

describe('operator procedures', () => {
  test('a quiet healthy node has no finding, seven procedures in order', () => {
    const r = run(snapshot({ tasks: [task('probe')] }));
    assert.deepEqual(
      r.procedures.map((p) => [p.id, p.status]),
      [1, 2, 3, 4, 5, 6, 7].map((id) => [id, 'ok']),
    );
    assert.equal(r.findings, 0);
    assert.equal(r.server_id, 'node-a');
    assert.equal(r.commit, 'abc123');
    assert.equal(r.version, '1.2.3');
  });

  test('1: running tasks are listed with running_since; one past its time limit is a finding', () => {
    const since = new Date(NOW - 90_000).toISOString();
    const p = proc(
      snapshot({
        tasks: [
          task('busy', { timeout_ms: 120_000 }, { running: true, running_since: since }),
          task('stuck', { timeout_ms: 30_000 }, { running: true, running_since: since }),
          task('idle'),
        ],
      }),
      'running_tasks',
    );
    assert.deepEqual(
      p.items.map((i) => [i.subject, i.finding, i.data?.running_since, i.data?.elapsed_ms]),
      [
        ['busy', false, since, 90_000],
        ['stuck', true, since, 90_000],
      ],
    );
    assert.equal(p.status, 'finding');
  });

  test(`2: a rise is at least ${RISE_MIN_FAILURES} failures and ${RISE_FACTOR}× the hour before`, () => {
    const cases: [number, number, boolean][] = [
      [RISE_MIN_FAILURES - 1, 0, false],
      [RISE_MIN_FAILURES, 0, true],
      [6, 4, false],
      [8, 4, true],
      [0, 9, false],
    ];
    for (const [last, prev, flagged] of cases) {
      const p = proc(
        snapshot({ tasks: [task('t', {}, { failures_last_hour: last, failures_prev_hour: prev })] }),
        'failure_rise',
      );
      assert.equal(p.status === 'finding', flagged, `${last} after ${prev}`);
    }
  });

  test("2: a rising task carries its last error and its own recent HTTP calls, or says the role can't see them", () => {
    const rising = task('payments', {}, { failures_last_hour: 5, last_error: 'status 503' });
    const calls = [
      {
        at: 'x',
        task: 'payments',
        method: 'GET',
        url: 'http://pay/health',
        status: 503,
        error: 'status 503',
      },
      { at: 'y', task: 'other', method: 'GET', url: 'http://other/', status: 500, error: 'status 500' },
    ];
    const p = proc(snapshot({ tasks: [rising], failures: calls }), 'failure_rise');
    assert.deepEqual(p.items[0]!.data?.http_failures, [calls[0]]);
    assert.match(p.items[0]!.message, /last error: status 503; 1 recent failed HTTP call$/);
    const viewer = proc(snapshot({ tasks: [rising], failures: null }), 'failure_rise');
    assert.equal(viewer.items[0]!.data?.http_failures, null);
    assert.match(viewer.items[0]!.message, /operator role/);
  });

  test('3: tasks that ran with p95 over the level; never-run tasks are not judged', () => {
    const p = proc(
      snapshot({
        tasks: [
          task('slow', {}, { p95: 1500 }),
          task('fast', {}, { p95: 900 }),
          task('new', {}, { runs: 0, p95: 0 }),
        ],
      }),
      'task_p95',
    );
    assert.deepEqual(findings(p), ['slow']);
    assert.equal(proc(snapshot({ tasks: [task('slow', {}, { p95: 1500 })] }), 'task_p95', 2000).status, 'ok');
  });

  test('3: the last hour is judged when the node reports it: slow lately is a finding, recovered is not', () => {
    const p = proc(
      snapshot({
        tasks: [
          task('lately-slow', {}, { p95: 200, p95_last_hour: 1500 }),
          task('recovered', {}, { p95: 5000, p95_last_hour: 300 }),
          task('idle-this-hour', {}, { p95: 5000, p95_last_hour: 0 }),
        ],
      }),
      'task_p95',
    );
    assert.deepEqual(findings(p), ['lately-slow']);
    assert.match(p.items[0]!.message, /p95 1500 ms over the last hour/);
    assert.deepEqual(p.items[0]!.data, { p95_ms: 1500, p95_since_start_ms: 200, level_ms: 1000 });
  });

  test('4: leader tasks on a follower are explained, not flagged', () => {
    const s = snapshot({
      tasks: [task('check', { kind: 'targets.check', execution_scope: 'leader' })],
      leaderId: 'node-b',
    });
    (s.metrics!.host as Record<string, unknown>).is_leader = false;
    const p = proc(s, 'leader_tasks');
    assert.equal(p.status, 'ok');
    assert.match(p.items[0]!.message, /runs on the leader \(node-b\)/);
    assert.match(p.summary, /follows/);
  });

  test('4: a disabled leader-scoped task is noted; a disabled task of every node is none of its business', () => {
    const s = snapshot({
      tasks: [
        task('lead-off', { execution_scope: 'leader', enabled: false, next_run_at: null }),
        task('probe-off', { execution_scope: 'all', enabled: false, next_run_at: null }),
      ],
    });
    const p = proc(s, 'leader_tasks');
    assert.deepEqual(
      p.items.map((i) => [i.subject, i.message, i.finding]),
      [['lead-off', 'disabled in configuration', false]],
    );
  });

  test('4: no leader at all, a per-node kind on leader scope, and an overdue leader task are findings', () => {
    const noLeader = snapshot({ tasks: [task('check', { execution_scope: 'leader' })], leaderId: null });
    (noLeader.metrics!.host as Record<string, unknown>).is_leader = false;
    assert.deepEqual(findings(proc(noLeader, 'leader_tasks')), ['cluster']);

    const misfit = proc(
      snapshot({ tasks: [task('flush', { kind: 'stats.flush', execution_scope: 'leader' })] }),
      'leader_tasks',
    );
    assert.deepEqual(findings(misfit), ['flush']);
    assert.match(misfit.items[0]!.message, /execution_scope: all/);

    const overdue = proc(
      snapshot({
        tasks: [
          task('late', { execution_scope: 'leader', next_run_at: new Date(NOW - 120_000).toISOString() }),
          task('unscheduled', { execution_scope: 'leader', next_run_at: null }),
          task('off', { execution_scope: 'leader', enabled: false, next_run_at: null }),
        ],
      }),
      'leader_tasks',
    );
    assert.deepEqual(findings(overdue), ['late', 'unscheduled']);
    assert.equal(overdue.items.find((i) => i.subject === 'off')?.finding, false);
  });

  test("5: an older node's entries (no 4xx/5xx split): every route with errors is a finding; unmatched paths are shown", () => {
    const s = snapshot();
    s.metrics!.controllers = {
      '/go/:slug': { count: 10, errors: 2, avg_ms: 1, p95_ms: 3 },
      '/acp/streams/list': { count: 4, errors: 1, avg_ms: 2, p95_ms: 4 },
      __unmatched__: { count: 7, errors: 7, avg_ms: 0.1, p95_ms: 0.2 },
      '/acp/system/metrics': { count: 3, errors: 0, avg_ms: 1, p95_ms: 2 },
    };
    const p = proc(s, 'route_errors');
    assert.deepEqual(findings(p), ['/acp/streams/list', '/go/:slug']);
    assert.deepEqual(p.items.find((i) => i.subject === '/go/:slug')?.data, {
      count: 10,
      errors: 2,
      avg_ms: 1,
      p95_ms: 3,
    });
    assert.equal(p.items.find((i) => i.subject === '__unmatched__')?.finding, false);
  });

  test('5: recent server errors are findings; client errors only above the rate over 20 calls; old errors are shown', () => {
    const recent = (count: number, errors: number, server_errors: number) => ({
      window_s: 300,
      count,
      errors,
      server_errors,
      avg_ms: 1,
      p95_ms: 2,
    });
    const entry = (client: number, server: number, r: ReturnType<typeof recent>) => ({
      count: 100,
      errors: client + server,
      client_errors: client,
      server_errors: server,
      avg_ms: 1,
      p95_ms: 2,
      recent: r,
    });
    const s = snapshot();
    s.metrics!.controllers = {
      // One 5xx in the window: the node failed.
      '/readyz': entry(0, 1, recent(10, 1, 1)),
      // A mistyped token or two: information.
      '/acp/system/metrics': entry(3, 0, recent(40, 2, 0)),
      // Most calls refused, over enough calls: a finding (a broken client, a misconfigured proxy).
      '/acp/flows/list': entry(30, 0, recent(25, 20, 0)),
      // The same rate over too few calls: information.
      '/acp/streams/list': entry(5, 0, recent(5, 5, 0)),
      // Exactly the rate is not above it.
      '/acp/cron-tasks/list': entry(10, 0, recent(20, 10, 0)),
      // A 5xx an hour ago, none since: shown, not flagged.
      '/go/:slug': entry(0, 4, recent(50, 0, 0)),
      // Scanners: never a finding for 4xx, however many.
      __unmatched__: entry(90, 0, recent(90, 90, 0)),
    };
    const p = proc(s, 'route_errors');
    assert.deepEqual(findings(p), ['/acp/flows/list', '/readyz']);
    const msg = (route: string) => p.items.find((i) => i.subject === route)!.message;
    assert.match(msg('/readyz'), /^last 5 minutes: 1 server error \(5xx\) of 10 calls/);
    assert.match(msg('/acp/system/metrics'), /2 client errors \(4xx, 5 % of calls\) of 40 calls/);
    assert.match(
      msg('/go/:slug'),
      /^no errors in the last 5 minutes; 4 server and 0 client errors of 100 calls since start/,
    );
    assert.equal(p.items.find((i) => i.subject === '/acp/flows/list')!.data!.recent_client_error_rate, 0.8);
    assert.equal(proc(s, 'route_errors').status, 'finding');
    // A stricter rate flags the 5 % route too (at 40 calls); a looser one only keeps the 5xx.
    const strict = evaluate(s, { taskP95Ms: 1000, clientErrorRate: 0.01 });
    assert.deepEqual(
      strict.procedures
        .find((x) => x.key === 'route_errors')!
        .items.filter((i) => i.finding)
        .map((i) => i.subject),
      ['/acp/cron-tasks/list', '/acp/flows/list', '/acp/system/metrics', '/readyz'],
    );
    const loose = evaluate(s, { taskP95Ms: 1000, clientErrorRate: 1 });
    assert.deepEqual(
      loose.procedures
        .find((x) => x.key === 'route_errors')!
        .items.filter((i) => i.finding)
        .map((i) => i.subject),
      ['/readyz'],
    );
  });

  test('5: client errors of a route that refused the doctor itself (an older node) are not its finding; server errors still are', () => {
    const route = '/acp/http-client/recent-failures';
    const refused = {
      count: 25,
      errors: 25,
      client_errors: 25,
      server_errors: 0,
      avg_ms: 1,
      p95_ms: 2,
      recent: { window_s: 300, count: 25, errors: 25, server_errors: 0, avg_ms: 1, p95_ms: 2 },
    };
    const judged = (over: Partial<NodeSnapshot>) => {
      const s = snapshot({ failures: null, ...over });
      s.metrics!.controllers = { [route]: refused };
      return proc(s, 'route_errors');
    };
    assert.deepEqual(findings(judged({})), [route]);
    const own = judged({ ownRefusals: [route] });
    assert.deepEqual(findings(own), []);
    assert.match(own.items[0]!.message, /its own refused calls count here/);
    const s = snapshot({ failures: null, ownRefusals: [route] });
    s.metrics!.controllers = {
      [route]: {
        ...refused,
        errors: 26,
        server_errors: 1,
        recent: { ...refused.recent, errors: 26, server_errors: 1 },
      },
    };
    assert.deepEqual(findings(proc(s, 'route_errors')), [route]);
  });

  test('2: without the role to read failed HTTP calls, the summary says an operator token is needed', () => {
    assert.match(proc(snapshot({ failures: null }), 'failure_rise').summary, /needs an operator token/);
    assert.doesNotMatch(proc(snapshot({ failures: [] }), 'failure_rise').summary, /operator token/);
  });

  test('6: missing metrics, no controllers, no uptime, a database down or a failed ACP call are findings', () => {
    assert.deepEqual(findings(proc(snapshot({ metrics: undefined }), 'acp_health')), ['system metrics']);
    const bare = snapshot();
    bare.metrics = {
      host: {},
      controllers: {},
      db: { driver: 'postgres', status: 'down', last_error: 'ECONNREFUSED' },
    };
    assert.deepEqual(findings(proc(bare, 'acp_health')), ['controllers', 'host.uptime_seconds', 'db']);
    const failed = proc(
      snapshot({ problems: ['/acp/streams/list answered 503 db.unavailable'] }),
      'acp_health',
    );
    assert.deepEqual(findings(failed), ['acp']);
  });

  test('6: the click log — dropped clicks are a finding (never silent), so is a buffer about to drop; quiet otherwise', () => {
    const withClicks = (clicks: Record<string, unknown>) => {
      const s = snapshot();
      s.metrics = { ...s.metrics, clicks };
      return proc(s, 'acp_health');
    };
    const base = {
      buffered: 10,
      unacked: 0,
      buffer_max: 1000,
      persisted: 500,
      dropped: 0,
      failed_flushes: 0,
      last_error: null,
      failing_since: null,
    };
    const quiet = withClicks(base);
    assert.equal(quiet.status, 'ok');
    const item = quiet.items.find((i) => i.subject === 'click log')!;
    assert.equal(item.finding, false);
    assert.match(item.message, /500 persisted, 10 held of 1000, none dropped/);

    const dropped = withClicks({ ...base, dropped: 3, failed_flushes: 4, last_error: 'connection refused' });
    assert.deepEqual(findings(dropped), ['click log']);
    assert.match(dropped.summary, /click log: 3 clicks dropped since start.*last error: connection refused/);

    // Failing now, nothing dropped yet: a finding before the buffer fills. Recovered (an old error,
    // no failing_since): quiet.
    const failing = withClicks({
      ...base,
      unacked: 40,
      failed_flushes: 2,
      last_error: 'connection refused',
      failing_since: '2026-11-27T07:00:00.000Z',
    });
    assert.deepEqual(findings(failing), ['click log']);
    assert.match(
      failing.summary,
      /click log: writes failing since 2026-11-27T07:00:00.000Z \(50 held, kept and sent again\); last error: connection refused/,
    );
    assert.equal(withClicks({ ...base, failed_flushes: 2, last_error: 'connection refused' }).status, 'ok');

    const nearlyFull = withClicks({ ...base, buffered: 300, unacked: 500 });
    assert.deepEqual(findings(nearlyFull), ['click log']);
    assert.match(nearlyFull.summary, /buffer 80 % full \(800 of 1000\)/);
    assert.equal(withClicks({ ...base, buffered: 300, unacked: 499 }).status, 'ok');

    // An older node without the section: nothing said about it.
    assert.equal(
      proc(snapshot(), 'acp_health').items.some((i) => i.subject === 'click log'),
      false,
    );
  });

  test('6: a node that takes postbacks without a key is a finding; one that requires a key is noted', () => {
    const withPostbacks = (postbacks: NonNullable<NodeSnapshot['metrics']>['postbacks']) => {
      const s = snapshot();
      s.metrics = { ...s.metrics, postbacks };
      return proc(s, 'acp_health');
    };
    const open = withPostbacks({ key_required: false, key_source: 'none' });
    assert.deepEqual(findings(open), ['postbacks']);
    assert.match(
      open.summary,
      /postbacks need no key \(postback\.require_key: false\): anyone who sees a click id/,
    );
    const keyed = withPostbacks({ key_required: true, key_source: 'stored' });
    assert.equal(keyed.status, 'ok');
    assert.equal(
      keyed.items.find((i) => i.subject === 'postbacks')?.message,
      'a key is required (the key stored in the database)',
    );
    assert.match(
      withPostbacks({ key_required: true, key_source: 'configured' }).items.find(
        (i) => i.subject === 'postbacks',
      )!.message,
      /postback\.key_sha256/,
    );
    // An older node without the section: nothing said about it.
    assert.equal(
      proc(snapshot(), 'acp_health').items.some((i) => i.subject === 'postbacks'),
      false,
    );
  });

  test('6: flows with traffic and no default stream are a warning, not a finding', () => {
    const s = snapshot();
    s.metrics = {
      ...s.metrics,
      traffic_flows: { without_default_stream: { count: 2, slugs: ['promo', 'spring'] } },
    };
    const p = proc(s, 'acp_health');
    assert.equal(p.status, 'ok');
    const item = p.items.find((i) => i.subject === 'flows without a default stream')!;
    assert.equal(item.finding, false);
    assert.match(
      item.message,
      /^warning: 2 flows with traffic and no active default stream \(promo, spring\)/,
    );
    const none = snapshot();
    none.metrics = { ...none.metrics, traffic_flows: { without_default_stream: { count: 0, slugs: [] } } };
    assert.equal(
      proc(none, 'acp_health').items.some((i) => i.subject === 'flows without a default stream'),
      false,
    );
  });

  test('6: requests for slugs that route nowhere are a warning naming the most recent', () => {
    const s = snapshot();
    s.metrics = {
      ...s.metrics,
      traffic_flows: {
        unknown_slugs: {
          unknown: 37,
          paused: 2,
          recent: [
            { slug: 'spring', count: 2, flow: 'paused', last_seen_at: '2026-11-27T08:00:00.000Z' },
            { slug: 'fb-keto-dee', count: 37, flow: 'unknown', last_seen_at: '2026-11-27T07:59:00.000Z' },
          ],
        },
      },
    };
    const p = proc(s, 'acp_health');
    assert.equal(p.status, 'ok');
    const item = p.items.find((i) => i.subject === 'slugs that route nowhere')!;
    assert.equal(item.finding, false);
    assert.match(
      item.message,
      /^warning: 37 requests for slugs no flow has and 2 requests for paused flows since start; most recent: spring ×2 \(paused\), fb-keto-dee ×37 \(no flow\)/,
    );
    const none = snapshot();
    none.metrics = {
      ...none.metrics,
      traffic_flows: { unknown_slugs: { unknown: 0, paused: 0, recent: [] } },
    };
    assert.equal(
      proc(none, 'acp_health').items.some((i) => i.subject === 'slugs that route nowhere'),
      false,
    );
  });

  test('7: the commit of both lists and the version; lists that disagree or cannot be read are findings', () => {
    const ok = proc(snapshot(), 'version_audit');
    assert.match(ok.summary, /commit abc123, version 1\.2\.3/);
    assert.equal(
      proc(snapshot({ commits: { flows: 'a', streams: 'b' } }), 'version_audit').status,
      'finding',
    );
    assert.equal(
      proc(snapshot({ commits: { flows: null, streams: null } }), 'version_audit').status,
      'finding',
    );
  });

  test('7 across nodes: the odd build out is the finding', () => {
    const n = (id: string, commit: string, version: string | null = '1.0') => ({
      url: `http://${id}`,
      server_id: id,
      commit,
      version,
    });
    assert.equal(auditVersions([n('a', 'c1'), n('b', 'c1')]).status, 'ok');
    const odd = auditVersions([n('a', 'c1'), n('b', 'c2'), n('c', 'c1')]);
    assert.equal(odd.status, 'finding');
    assert.deepEqual(
      odd.items.filter((i) => i.finding).map((i) => i.subject),
      ['b'],
    );
    assert.equal(
      auditVersions([n('a', 'c1', '1.0'), n('b', 'c1', '1.1'), n('c', 'c1', '1.1')]).items[0]!.finding,
      true,
    );
    // A tie has no odd one out: every node is a finding.
    const tie = auditVersions([n('a', 'c1'), n('b', 'c2')]);
    assert.deepEqual(
      tie.items.map((i) => i.finding),
      [true, true],
    );
    assert.match(tie.summary, /none on most of them/);
  });

  test('7 across nodes: nothing audited is a finding, not a pass; a node that could not be asked was not audited', () => {
    const none = auditVersions([], ['http://a']);
    assert.equal(none.status, 'finding');
    assert.equal(none.summary, 'nothing audited: no node answered');
    assert.deepEqual(
      none.items.map((i) => [i.subject, i.finding]),
      [['http://a', true]],
    );
    assert.equal(auditVersions([]).status, 'finding', 'no node at all is no pass either');
    const some = auditVersions(
      [
        { url: 'http://a', server_id: 'a', commit: 'c1', version: '1.0' },
        { url: 'http://b', server_id: 'b', commit: 'c1', version: '1.0' },
      ],
      ['http://c'],
    );
    assert.equal(some.status, 'finding');
    assert.equal(some.summary, '2 nodes on c1 / 1.0; 1 of 3 nodes not audited (could not be asked)');
    assert.deepEqual(
      some.items.filter((i) => i.finding).map((i) => i.subject),
      ['http://c'],
    );
  });
});
