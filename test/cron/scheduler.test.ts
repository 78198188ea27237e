import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { Schedule, Scheduler, type TaskContext } from '../../src/cron/index.ts';
import { ApiError } from '../../src/errors/index.ts';
import { createLogger, Telemetry } from '../../src/telemetry/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';

const stops: (() => void)[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
});

function setup(opts: { leader?: boolean } = {}) {
  const clock = new ManualClock(Date.parse('2026-03-01T00:00:00Z'));
  const telemetry = new Telemetry({
    clock,
    serverId: 'n1',
    version: undefined,
    commit: 'c',
    prefix: 'sluice',
    controllerBucketsMs: [1],
    httpBucketsMs: [1],
    taskBucketsMs: [10, 100],
    isLeader: () => opts.leader ?? true,
    processMetrics: false,
  });
  stops.push(() => telemetry.stop());
  const logs = new LogCapture();
  const logger = createLogger({ level: 'debug', name: 'sluice', serverId: 'n1', destination: logs });
  let leader = opts.leader ?? true;
  const scheduler = new Scheduler({ clock, logger, telemetry, isLeader: () => leader, epoch: () => 7 });
  return { clock, telemetry, logs, scheduler, setLeader: (v: boolean) => (leader = v) };
}

const task = (
  name: string,
  run: (ctx: TaskContext) => Promise<void>,
  over: Partial<Parameters<Scheduler['add']>[0]> = {},
) => ({
  name,
  kind: 'http.probe',
  schedule: new Schedule('*/10 * * * * *'),
  scope: 'all' as const,
  enabled: true,
  timeoutMs: 60_000,
  run,
  ...over,
});

describe('scheduler driven by an injected clock', () => {
  test('runs a task when due, once per due tick, and computes the next run', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    scheduler.add(task('t', async () => void runs++));
    scheduler.start({ timers: false });
    assert.equal(scheduler.list()[0]?.next_run_at, '2026-03-01T00:00:10.000Z');
    await Promise.all(scheduler.runDue());
    assert.equal(runs, 0, 'not due yet');
    clock.advance(10_000);
    await Promise.all(scheduler.runDue());
    await Promise.all(scheduler.runDue());
    assert.equal(runs, 1);
    assert.equal(scheduler.list()[0]?.next_run_at, '2026-03-01T00:00:20.000Z');
  });

  test('a tick while the task runs is skipped and counted; runs never overlap', async () => {
    const { clock, scheduler } = setup();
    let release!: () => void;
    let active = 0;
    let maxActive = 0;
    scheduler.add(
      task('slow', async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise<void>((r) => {
          release = r;
        });
        active--;
      }),
    );
    scheduler.start({ timers: false });
    clock.advance(10_000);
    const [first] = scheduler.runDue();
    clock.advance(10_000);
    assert.deepEqual(scheduler.runDue(), [], 'second tick skipped');
    assert.equal(scheduler.list()[0]?.runtime.running, true);
    assert.equal(scheduler.list()[0]?.runtime.running_since, '2026-03-01T00:00:10.000Z');
    await new Promise((r) => setImmediate(r));
    release();
    await first;
    const rt = scheduler.list()[0]!.runtime;
    assert.equal(rt.skipped, 1);
    assert.equal(rt.runs, 1);
    assert.equal(maxActive, 1);
    assert.equal(rt.running, false);
  });

  test('a run past timeout_ms is aborted through its signal and fails with last_error "timeout"', async () => {
    const { clock, scheduler, logs } = setup();
    let sawAbort = false;
    scheduler.add(
      task(
        'hang',
        (ctx) =>
          new Promise<void>((_, reject) => {
            ctx.signal.addEventListener('abort', () => {
              sawAbort = true;
              reject(ctx.signal.reason);
            });
          }),
        { timeoutMs: 20 },
      ),
    );
    scheduler.start({ timers: false });
    clock.advance(10_000);
    await Promise.all(scheduler.runDue());
    const rt = scheduler.list()[0]!.runtime;
    assert.equal(sawAbort, true);
    assert.equal(rt.failures, 1);
    assert.equal(rt.last_error, 'timeout');
    const line = logs.lines.find((l) => l.message === 'task run failed');
    assert.equal(line?.task, 'hang');
    assert.equal(typeof line?.run_id, 'string');
  });

  test('errors never escape; failures, last error, p95 and the tasks section follow', async () => {
    const { clock, scheduler, telemetry } = setup();
    let n = 0;
    scheduler.add(
      task('flaky', async () => {
        clock.advance(n % 2 === 0 ? 5 : 50);
        if (n++ % 2 === 0) throw new Error('upstream said no');
      }),
    );
    scheduler.start({ timers: false });
    for (let i = 0; i < 4; i++) {
      clock.advance(10_000);
      await Promise.all(scheduler.runDue());
    }
    const rt = scheduler.list()[0]!.runtime;
    assert.equal(rt.runs, 4);
    assert.equal(rt.failures, 2);
    assert.equal(rt.last_error, null, 'the last run succeeded');
    assert.equal(rt.failures_last_hour, 2);
    assert.ok(Math.abs(rt.p95 - 50) / 50 <= 0.01, `p95 ${rt.p95}`);
    assert.equal(rt.last_duration_ms, 50);
    assert.deepEqual(telemetry.systemMetrics().tasks, {
      flaky: {
        runs: 4,
        failures: 2,
        running: false,
        p95_duration_ms: rt.p95,
        p95_last_hour: rt.p95,
        last_duration_ms: 50,
        last_error: null,
      },
    });
    const { body } = await telemetry.exposition('text');
    assert.ok(body.includes('sluice_task_runs_total{task="flaky"} 4\n'));
    assert.ok(body.includes('sluice_task_failures_total{task="flaky"} 2\n'));
    assert.ok(body.includes('sluice_task_running{task="flaky"} 0\n'));
    assert.ok(body.includes('sluice_task_last_duration_milliseconds{task="flaky"} 50\n'));
    assert.ok(body.includes('sluice_task_duration_milliseconds_bucket{task="flaky",le="10"} 2\n'));
    // An hour later the runs have left the last hour; the p95 since start stays.
    clock.advance(3_600_000);
    const later = scheduler.list()[0]!.runtime;
    assert.deepEqual([later.p95, later.p95_last_hour], [rt.p95, 0]);
  });

  test('leader tasks run only on the leader; run-now answers 409 task.not_leader on a follower', async () => {
    const { clock, scheduler, setLeader } = setup({ leader: false });
    let runs = 0;
    scheduler.add(task('lead', async () => void runs++, { scope: 'leader' }));
    scheduler.add(task('every', async () => void runs++, { scope: 'all' }));
    scheduler.start({ timers: false });
    clock.advance(10_000);
    await Promise.all(scheduler.runDue());
    assert.equal(runs, 1, 'only the all-scoped task ran');
    assert.throws(
      () => scheduler.runNow('lead'),
      (e: unknown) => e instanceof ApiError && e.code === 'task.not_leader',
    );
    setLeader(true);
    await scheduler.runNow('lead').done;
    assert.equal(runs, 2);
  });

  test('run-now: unknown task is 404, a running one 409 task.already_running; the run carries its epoch', async () => {
    const { scheduler } = setup();
    let release!: () => void;
    let epoch = -1;
    scheduler.add(
      task('manual', async (ctx) => {
        epoch = ctx.epoch;
        await new Promise<void>((r) => {
          release = r;
        });
      }),
    );
    scheduler.start({ timers: false });
    assert.throws(
      () => scheduler.runNow('nope'),
      (e: unknown) => e instanceof ApiError && e.code === 'resource.not_found',
    );
    const { run_id, done } = scheduler.runNow('manual');
    assert.match(run_id, /^[0-9a-f-]{36}$/);
    assert.throws(
      () => scheduler.runNow('manual'),
      (e: unknown) => e instanceof ApiError && e.code === 'task.already_running',
    );
    await new Promise((r) => setImmediate(r));
    release();
    await done;
    assert.equal(epoch, 7);
  });

  test('stop waits for a running task within the grace period, then aborts it', async () => {
    const { scheduler } = setup();
    let finished = false;
    scheduler.add(
      task('quick', async () => {
        await new Promise((r) => setTimeout(r, 30));
        finished = true;
      }),
    );
    scheduler.add(
      task(
        'stuck',
        (ctx) =>
          new Promise<void>((_, reject) =>
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
          ),
      ),
    );
    scheduler.start({ timers: false });
    const a = scheduler.runNow('quick').done;
    scheduler.runNow('stuck');
    await scheduler.stop(200);
    await a;
    assert.equal(finished, true, 'the quick task finished inside the grace period');
    const stuck = scheduler.list().find((t) => t.name === 'stuck')!.runtime;
    assert.equal(stuck.running, false);
    assert.match(stuck.last_error ?? '', /node stopping/);
  });

  test('abortLeaderRuns stops leader-scoped runs only (step-down)', async () => {
    const { scheduler } = setup();
    const hang = (ctx: TaskContext) =>
      new Promise<void>((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    scheduler.add(task('lead', hang, { scope: 'leader' }));
    scheduler.add(task('all', hang, { scope: 'all' }));
    scheduler.start({ timers: false });
    const lead = scheduler.runNow('lead').done;
    scheduler.runNow('all');
    scheduler.abortLeaderRuns();
    await lead;
    const byName = Object.fromEntries(scheduler.list().map((t) => [t.name, t.runtime]));
    assert.match(byName.lead!.last_error ?? '', /leadership lost/);
    assert.equal(byName.all!.running, true);
    await scheduler.stop(0);
  });
});
