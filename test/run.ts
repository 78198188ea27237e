/**
 * `npm test`: lint, type check, then every test file with the coverage figure, CONCURRENCY files at
 * a time, each in its own process; then how long each step took and the ten slowest files.
 *
 *   npm test                                    # everything, about 4 minutes on a quiet 2-core machine
 *   npm run test:unit                           # the tests only (no lint, no type check)
 *   npm run test:unit -- test/cli.test.ts 'test/console/*.test.ts'
 *   npm test -- --concurrency 1                 # one file at a time
 *
 * The runner's own output (the spec reporter, its closing `ℹ tests … ℹ duration_ms` lines and the
 * coverage report) is passed through unchanged; the durations of each file are also written to
 * test-results/file-durations.tsv.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, globSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

/**
 * Files at a time. One at a time, the suite spent ~270 s of CPU in 7.7 min on an idle 2-core
 * machine: most of its wall time is waiting (for node processes to start and stop, leases to run
 * out, a browser to draw, real seconds of timers), and three files keep both cores busy through
 * those waits: 3 min 51 s with little else running (load 3), 7-8.5 min beside other suites (load
 * 6-13); one at a time, 10.5 min (load 1.5-11). Four, beside other suites, put seven times as many
 * processes as cores under the tests that judge a stop's or a task's timing, and some failed.
 */
const CONCURRENCY = 3;

/**
 * The files that take a minute or so each, longest first (as measured in test-results/
 * file-durations.tsv): a long file started last would run on alone once the others are done.
 */
const SLOW_FIRST = [
  'test/routing/unknown-slug-flood.test.ts',
  'test/lifecycle.test.ts',
  'test/console/business.test.ts',
  'test/doctor/doctor.test.ts',
  'test/reliability/soak.test.ts',
  'test/cron/background-stall.test.ts',
  'test/console/browser.test.ts',
  'test/cli.test.ts',
  'test/cluster/failover.test.ts',
];

const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'node_modules', '.bin');
const RESULTS = join(ROOT, 'test-results');
const DURATIONS = join(RESULTS, 'file-durations.tsv');

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'tests-only': { type: 'boolean', default: false },
    concurrency: { type: 'string', default: String(CONCURRENCY) },
  },
});
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`--concurrency: expected a whole number of files, 1 or more (got ${values.concurrency})`);
  process.exit(2);
}

const took: string[] = [];
const started = performance.now();

/** Runs one step to its end with this process's output, noting how long it took; exits on failure. */
function step(name: string, command: string, args: string[]): void {
  const t0 = performance.now();
  const r = spawnSync(command, args, { cwd: ROOT, stdio: 'inherit' });
  took.push(`${name} ${seconds(performance.now() - t0)}`);
  if (r.status !== 0) {
    console.error(
      `npm test: ${name} failed (${r.status ?? r.signal}) after ${seconds(performance.now() - started)}`,
    );
    process.exit(r.status ?? 1);
  }
}

function seconds(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

if (!values['tests-only']) {
  step('lint', join(BIN, 'biome'), ['check', '.']);
  step('type check', join(BIN, 'tsc'), ['--noEmit']);
}

const files = [
  ...new Set(globSync(positionals.length > 0 ? positionals : ['test/**/*.test.ts'], { cwd: ROOT })),
]
  .sort()
  .sort((a, b) => slowRank(a) - slowRank(b));
function slowRank(file: string): number {
  const i = SLOW_FIRST.indexOf(file);
  return i === -1 ? SLOW_FIRST.length : i;
}
if (files.length === 0) {
  console.error(`npm test: no test file matches ${positionals.join(' ')}`);
  process.exit(2);
}

mkdirSync(RESULTS, { recursive: true });
rmSync(DURATIONS, { force: true });
const t0 = performance.now();
const run = spawnSync(
  process.execPath,
  [
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-timeout=180000',
    '--experimental-test-coverage',
    '--test-coverage-include=src/**',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${join(import.meta.dirname, 'helpers', 'file-durations.ts')}`,
    `--test-reporter-destination=${DURATIONS}`,
    ...files,
  ],
  { cwd: ROOT, stdio: 'inherit' },
);
took.push(
  `tests ${seconds(performance.now() - t0)}, ${concurrency} file${concurrency === 1 ? '' : 's'} at a time`,
);

const slowest = (existsSync(DURATIONS) ? readFileSync(DURATIONS, 'utf8') : '')
  .split('\n')
  .filter((l) => l !== '')
  .map((l) => l.split('\t') as [string, string])
  .sort((a, b) => Number(b[0]) - Number(a[0]))
  .slice(0, 10);
console.log('\nslowest files:');
for (const [s, file] of slowest) console.log(`${s.padStart(7)} s  ${file}`);
console.log(`npm test took ${seconds(performance.now() - started)} (${took.join('; ')})`);
process.exit(run.status ?? 1);
