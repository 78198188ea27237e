import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type DoctorReport, formatReport } from '../../src/doctor/index.ts';
import { auditVersions, evaluate } from '../../src/procedures/index.ts';

const node = evaluate(
  {
    url: 'http://a:8080',
    metrics: {
      host: { server_id: 'a', is_leader: true, uptime_seconds: 5 },
      controllers: { '/go/:slug': { count: 4, errors: 1, avg_ms: 1, p95_ms: 2 } },
    },
    tasks: [],
    commits: { flows: 'abc', streams: 'abc' },
    leaderId: 'a',
    failures: [],
    problems: [],
    now: Date.parse('2026-11-23T00:00:00Z'),
  },
  { taskP95Ms: 100, clientErrorRate: 0.5 },
);
const report: DoctorReport = {
  generated_at: '2026-11-23T00:00:00.000Z',
  task_p95_ms: 100,
  client_error_rate: 0.5,
  healthy: false,
  exit_code: 1,
  nodes: [
    { ...node, reachable: true },
    { url: 'http://b:8080', reachable: false, error: 'http://b:8080: unreachable (ECONNREFUSED)' },
  ],
  version_audit: auditVersions([node]),
};

describe('the doctor text report', () => {
  test('colour only when asked (a terminal), the same words either way', () => {
    const plain = formatReport(report, { colour: false });
    const coloured = formatReport(report, { colour: true });
    assert.ok(!plain.includes('\x1b['));
    assert.ok(coloured.includes('\x1b[31m'), 'findings in red');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping ANSI colour codes.
    assert.equal(coloured.replace(/\x1b\[\d+m/g, ''), plain);
  });

  test("text from a node cannot drive the operator's terminal", () => {
    const hostile: DoctorReport = {
      ...report,
      nodes: [{ url: 'http://c:8080', reachable: false, error: 'boom \x1b[2J\x1b]0;owned\x07 done' }],
    };
    const text = formatReport(hostile, { colour: false });
    assert.ok(!text.includes('\x1b'), 'no escape character from the node');
    assert.ok(!text.includes('\x07'));
    assert.match(text, /boom .\[2J.\]0;owned. done/);
  });

  test('names the node, its findings with their data, the unreachable node and the verdict', () => {
    const text = formatReport(report, { colour: false });
    assert.match(text, /http:\/\/a:8080 node a, leader/);
    assert.match(text, /✗ 5\. Routes with errors/);
    assert.match(text, /• \/go\/:slug: 1 of 4 calls failed/);
    assert.match(text, /✗ http:\/\/b:8080: unreachable \(ECONNREFUSED\)/);
    assert.match(
      text,
      /Verdict: findings need attention \(exit 1; task p95 level 100 ms, client-error rate 0.5\)/,
    );
  });
});
