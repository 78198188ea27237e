/**
 * `npm run soak [-- scenario…] [--seconds N] [--connections N] [--real-pg]`: the reliability scenarios of
 * docs/RELIABILITY.md, on loopback against the local PostgreSQL, bounded in time. Prints each
 * scenario's figures and checks, writes them to test-results/soak.json, exits 1 if a check failed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Outcome } from './harness.ts';
import { SCENARIOS } from './scenarios/index.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: 'string' },
    connections: { type: 'string', default: '200' },
    minutes: { type: 'string' },
    // db-outage: stop and restart the machine's PostgreSQL itself instead of cutting a proxy.
    'real-pg': { type: 'boolean', default: false },
  },
});
const names = positionals.length > 0 ? positionals : Object.keys(SCENARIOS);
const unknown = names.filter((n) => !(n in SCENARIOS));
if (unknown.length > 0) {
  process.stderr.write(
    `unknown scenario(s): ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}\n`,
  );
  process.exit(64);
}

const outcomes: Outcome[] = [];
for (const name of names) {
  const s = SCENARIOS[name]!;
  const seconds = values.seconds
    ? Number(values.seconds)
    : values.minutes
      ? Number(values.minutes) * 60
      : s.seconds;
  process.stdout.write(`\n▶ ${name} (${seconds} s)\n`);
  const started = Date.now();
  const outcome = await s.run({
    seconds,
    connections: Number(values.connections),
    realPg: values['real-pg'],
  });
  outcomes.push(outcome);
  for (const [k, v] of Object.entries(outcome.figures)) process.stdout.write(`  ${k.padEnd(34)} ${v}\n`);
  for (const c of outcome.checks)
    process.stdout.write(
      `  ${c.ok ? '✓' : '✗'} ${c.name}${c.speed ? ' (speed)' : ''}  ${c.ok ? '' : c.seen}\n`,
    );
  process.stdout.write(`  (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
}

const dir = join(import.meta.dirname, '..', 'test-results');
mkdirSync(dir, { recursive: true });
writeFileSync(
  join(dir, 'soak.json'),
  `${JSON.stringify({ at: new Date().toISOString(), outcomes }, null, 2)}\n`,
);
const failed = outcomes.flatMap((o) => o.checks.filter((c) => !c.ok).map((c) => `${o.scenario}: ${c.name}`));
process.stdout.write(
  failed.length ? `\n${failed.length} check(s) failed:\n  ${failed.join('\n  ')}\n` : '\nall checks passed\n',
);
process.exit(failed.length ? 1 : 0);
