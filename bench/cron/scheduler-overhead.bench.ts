/**
 * Scheduler overhead: 1,000 registered tasks ticking every second (each run a trivial async job),
 * real timers, for a few seconds; the event loop's delay p99 and max while they tick.
 *
 *   node bench/cron/scheduler-overhead.bench.ts [--tasks 1000] [--seconds 10]
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Schedule, Scheduler } from '../../src/cron/index.ts';
import { Telemetry } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';

const { values } = parseArgs({
  options: { tasks: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '10' } },
});
const TASKS = Number(values.tasks);
const SECONDS = Number(values.seconds);

const telemetry = new Telemetry({
  clock: systemClock,
  serverId: 'bench',
  version: undefined,
  commit: 'bench',
  prefix: 'sluice',
  controllerBucketsMs: [1],
  httpBucketsMs: [1],
  taskBucketsMs: [1, 10, 100],
  isLeader: () => true,
  processMetrics: false,
});
const scheduler = new Scheduler({
  clock: systemClock,
  logger: pino({ level: 'info' }, pino.destination('/dev/null')),
  telemetry,
  isLeader: () => true,
  epoch: () => 1,
});
let runs = 0;
const every = new Schedule('* * * * * *');
for (let i = 0; i < TASKS; i++) {
  scheduler.add({
    name: `task-${i}`,
    kind: 'bench',
    schedule: every,
    scope: i % 2 ? 'all' : 'leader',
    enabled: true,
    timeoutMs: 5000,
    run: async () => {
      runs++;
    },
  });
}
const delay = monitorEventLoopDelay({ resolution: 1 });
await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 50)); // start between two ticks
delay.enable();
scheduler.start();
await new Promise((r) => setTimeout(r, SECONDS * 1000));
delay.disable();
await scheduler.stop(1000);
telemetry.stop();
const ms = (ns: number) => (ns / 1e6).toFixed(2);
console.log(`scheduler: ${TASKS} tasks every second for ${SECONDS}s, ${runs} runs`);
console.log(
  `  event-loop delay p50 ${ms(delay.percentile(50))} ms, p99 ${ms(delay.percentile(99))} ms, max ${ms(delay.max)} ms (target p99 < 5 ms)`,
);
