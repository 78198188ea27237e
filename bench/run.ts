/**
 * Runs every benchmark in sequence, each in its own process (a clean heap and JIT per benchmark),
 * and prints their reports. About eleven minutes on a 2-core machine, nine of them the HTTP load
 * benchmarks (telemetry on/off, hot path, cold start, the click log under a minute of full load
 * for two scenarios, postbacks against `/go`). Arguments after `--` go to the
 * hot-path benchmark, e.g. `npm run bench -- --rounds 9 --seconds 2` for a longer, steadier run.
 *
 *   npm run bench
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

/** [file, Node flags, the benchmark's own arguments] */
const BENCHES: [string, string[], string[]][] = [
  ['telemetry/recorder.bench.ts', [], []],
  ['telemetry/exposition.bench.ts', [], []],
  ['telemetry/request-context.bench.ts', [], []],
  ['telemetry/log-record.bench.ts', [], []],
  ['http/telemetry-overhead.bench.ts', [], []],
  ['routing/decide.bench.ts', [], []],
  ['routing/ip-rules.bench.ts', ['--expose-gc'], []],
  ['routing/flow-limits-node.bench.ts', [], []],
  ['routing/hot-path.bench.ts', [], process.argv.slice(2)],
  ['routing/cold-start.bench.ts', [], []],
  // As `npm start` runs a node: with the young generation capped at 16 MB (see docs/PERFORMANCE.md).
  ['routing/memory.ts', ['--expose-gc', '--max-semi-space-size=16'], []],
  ['clicks/classify.bench.ts', ['--expose-gc'], []],
  ['clicks/click-id.bench.ts', [], []],
  ['clicks/uniqueness-exchange.bench.ts', [], []],
  ['clicks/sustained-load.bench.ts', [], []],
  ['http-client/overhead.bench.ts', [], []],
  ['cron/scheduler-overhead.bench.ts', [], []],
  ['cron/background-stall.bench.ts', [], ['--streams', '10000']],
  ['storage/counter-flush.bench.ts', [], []],
  ['storage/click-log.bench.ts', ['--expose-gc'], []],
  ['storage/sqlite-insert.bench.ts', [], []],
  ['storage/writer-thread-cost.bench.ts', ['--max-semi-space-size=16'], []],
  ['conversions/postback-flood.bench.ts', [], []],
];

for (const [file, flags, args] of BENCHES) {
  console.log(`\n== ${file}`);
  const r = spawnSync(process.execPath, [...flags, resolve(import.meta.dirname, file), ...args], {
    stdio: 'inherit',
  });
  if (r.status !== 0) process.exitCode = 1;
}
