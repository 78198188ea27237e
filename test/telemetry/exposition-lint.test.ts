import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { probeNodeYaml, startTestNode, type TestNode } from '../helpers/node.ts';

/** `promtool` (Prometheus' own linter, e.g. Debian's `prometheus` package) when it is installed. */
function promtoolMissing(): string | false {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    const why = `promtool not found (${r.error?.message ?? `exit ${r.status}`}); install it (apt-get install prometheus) to lint the exposition`;
    process.stderr.write(`# ${why}\n`);
    return why;
  }
  return false;
}

/** The families whose `# TYPE` is gauge. */
const gauges = (body: string) => [...body.matchAll(/^# TYPE (\S+) gauge$/gm)].map((m) => m[1]!);

describe("a real node's exposition passes the Prometheus naming rules", () => {
  let n: TestNode;
  before(async () => {
    n = await startTestNode({ yaml: probeNodeYaml('http://127.0.0.1:1/', { prometheus: true }) });
    // Some traffic, so every family has samples: a route, an error, a task run.
    await (await fetch(`${n.url}/go/nothing`)).arrayBuffer();
    await n.node.scheduler.runNow('probe').done;
  });
  after(async () => {
    await n.close();
  });

  const scrape = async (accept?: string) =>
    (await fetch(`${n.url}/metrics`, accept ? { headers: { accept } } : {})).text();

  test('no gauge is named like a counter (…_total), in text or OpenMetrics; Node’s process metrics stay', async () => {
    for (const body of [await scrape(), await scrape('application/openmetrics-text; version=1.0.0')]) {
      assert.deepEqual(
        gauges(body).filter((g) => g.endsWith('_total')),
        [],
      );
      assert.match(body, /^nodejs_active_handles\{type="[^"]+"\} \d+$/m, 'per-type handles are kept');
      assert.match(body, /^process_cpu_seconds_total \S+$/m);
    }
  });

  test('promtool check metrics reports nothing but the millisecond units the contract names', {
    skip: promtoolMissing(),
  }, async () => {
    const r = spawnSync('promtool', ['check', 'metrics'], { input: await scrape(), encoding: 'utf8' });
    const problems = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.trim() !== '');
    // docs/telemetry.md#exposition-get-metrics names the histograms `P_*_duration_milliseconds`;
    // promtool prefers seconds.
    const pinned = /^sluice_\w+_duration_milliseconds use base unit "seconds" instead of "milliseconds"$/;
    assert.deepEqual(
      problems.filter((p) => !pinned.test(p)),
      [],
    );
    assert.ok(r.status === 0 || problems.length > 0, `promtool exited ${r.status} without saying why`);
  });
});
