import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';

interface Procedures {
  task_p95_ms: number;
  procedures: {
    key: string;
    status: string;
    items: { subject: string; data: { http_failures: unknown[] | null } }[];
  }[];
}

describe('ACP endpoints of the console: whoami and procedures', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({
      yaml: `app:\n  commit: feedbee\nacp:\n  task_p95_ms: 750\ncron:\n  tasks:\n    flaky:\n      kind: http.probe\n      schedule: '* * * * * *'\n      execution_scope: all\n      url: http://127.0.0.1:1/\n`,
    });
    await until(
      'the probe of a closed port to fail three times',
      () => t.node.scheduler.list().find((x) => x.name === 'flaky')!.runtime.failures >= 3,
      30_000,
      100,
    );
  });
  after(() => t.close());

  test('whoami names the operator, its role and the build', async () => {
    const token = await t.token('operator', 'olga');
    const me = await (await t.acp('/acp/auth/whoami', token)).json();
    assert.deepEqual(me, {
      name: 'olga',
      role: 'operator',
      server_id: t.node.serverId,
      commit: 'feedbee',
      version: null,
      task_p95_ms: 750,
      client_error_rate: 0.5,
    });
    assert.equal((await t.acp('/acp/auth/whoami', undefined)).status, 401);
  });

  test("procedures: the node's verdicts at the configured level or the caller's; HTTP calls only for operators", async () => {
    const operator = await t.token('operator');
    const viewer = await t.token('viewer');
    const asOperator = (await (await t.acp('/acp/system/procedures', operator)).json()) as Procedures;
    assert.equal(asOperator.task_p95_ms, 750);
    assert.equal(asOperator.procedures.length, 7);
    const rise = asOperator.procedures.find((p) => p.key === 'failure_rise')!;
    assert.equal(rise.status, 'finding');
    assert.equal(rise.items[0]!.subject, 'flaky');
    assert.ok((rise.items[0]!.data.http_failures?.length ?? 0) > 0);

    const asViewer = (await (
      await t.acp('/acp/system/procedures', viewer, { task_p95_ms: 1 })
    ).json()) as Procedures;
    assert.equal(asViewer.task_p95_ms, 1);
    assert.equal(
      asViewer.procedures.find((p) => p.key === 'failure_rise')!.items[0]!.data.http_failures,
      null,
    );
    // At a 1 ms level the probe of a closed port may or may not count as slow; the level is what was asked.
    const bad = await t.acp('/acp/system/procedures', viewer, { task_p95_ms: 0 });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'validation.invalid_input');
  });
});
