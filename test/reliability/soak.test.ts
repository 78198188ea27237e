import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Outcome, Phases } from '../../soak/harness.ts';
import { SCENARIOS } from '../../soak/scenarios/index.ts';
import { pgAvailable } from '../helpers/postgres.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

/** Short runs of every `npm run soak` scenario (docs/RELIABILITY.md has the long ones' figures). */
const SHORT: Record<string, { seconds: number; connections: number }> = {
  load: { seconds: 3, connections: 40 },
  'db-outage': { seconds: 3, connections: 0 },
  'leader-kill': { seconds: 0, connections: 0 },
  sigterm: { seconds: 3, connections: 0 },
  'hanging-upstream': { seconds: 4, connections: 0 },
  memory: { seconds: 4, connections: 0 },
  crash: { seconds: 2, connections: 20 },
};

/**
 * Every check must hold, except the speed checks (see soak/harness.ts `Check`): this machine is
 * shared and busy, so how fast it was is reported, and `npm run soak` judges it.
 */
function assertChecks(o: Outcome): void {
  const judged = o.checks.filter((c) => !c.speed);
  const failed = judged.filter((c) => !c.ok).map((c) => `${c.name}: ${c.seen}`);
  assert.deepEqual(failed, [], `${o.scenario} figures: ${JSON.stringify(o.figures)}`);
  assert.ok(judged.length >= 3, 'a scenario without checks proves nothing');
}

test('a request sent before a phase switch and answered after it is judged in neither phase', () => {
  const phases = new Phases<'outage' | 'after'>('outage');
  const sentDuringOutage = performance.now();
  phases.enter('after');
  assert.equal(phases.of(sentDuringOutage), 'straddling');
  assert.equal(phases.of(performance.now()), 'after');
  phases.enter('outage');
  assert.equal(phases.of(performance.now()), 'outage');
});

describe('reliability scenarios, short runs', { skip }, () => {
  test('every soak scenario has a short run here', () => {
    assert.deepEqual(Object.keys(SHORT).sort(), Object.keys(SCENARIOS).sort());
  });
  for (const [name, opts] of Object.entries(SHORT)) {
    test(name, { timeout: 120_000 }, async (t) => {
      const outcome = await SCENARIOS[name]!.run(opts);
      t.diagnostic(JSON.stringify(outcome.figures));
      for (const c of outcome.checks.filter((x) => x.speed))
        t.diagnostic(`speed, judged by npm run soak: ${c.ok ? 'within' : 'OVER'} "${c.name}": ${c.seen}`);
      assertChecks(outcome);
    });
  }
});
