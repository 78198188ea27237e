import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  auditVersions,
  evaluate,
  type NodeSnapshot,
  type ProcedureResult,
  RISE_FACTOR,
  RISE_MIN_FAILURES,
} from '../../src/doctor/index.ts';
import type { TaskView } from '../../src/doctor/procedures.ts';

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

const run = (s: NodeSnapshot, level = 1000) => evaluate(s, { taskP95Ms: level });
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

  test('5: every route with errors is a finding with its entry; unmatched paths are shown, not flagged', () => {
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
