import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, RETRY_PAUSE_MS, retryUntil, systemClock } from '../../src/time/index.ts';

/** An attempt the database refuses `refusals` times, then lets through; counts its calls. */
function refusing(refusals: number) {
  const a = {
    calls: 0,
    run: async () => {
      a.calls++;
      if (a.calls <= refusals) throw new Error(`refused ${a.calls}`);
    },
  };
  return a;
}

test('an attempt that goes through at once is not repeated', async () => {
  const a = refusing(0);
  assert.equal(await retryUntil(a.run, systemClock, 1000), undefined);
  assert.equal(a.calls, 1);
});

test('refused attempts are repeated until one goes through', async () => {
  const a = refusing(2);
  assert.equal(await retryUntil(a.run, systemClock, 5000), undefined);
  assert.equal(a.calls, 3);
});

test('past the timeout, what the last attempt threw is returned', async () => {
  const a = refusing(Number.POSITIVE_INFINITY);
  const timeout = RETRY_PAUSE_MS + 100;
  const started = performance.now();
  const failed = await retryUntil(a.run, systemClock, timeout);
  const took = performance.now() - started;
  assert.ok(failed !== undefined);
  assert.equal((failed.error as Error).message, `refused ${a.calls}`);
  // At 0, after a pause, and after what was left, unless a busy machine held a timer past the timeout.
  assert.ok(a.calls === 2 || a.calls === 3, `${a.calls} attempts`);
  assert.ok(took >= timeout - 5, `gave up after ${took} ms`);
});

test('no time to retry: one attempt', async () => {
  const a = refusing(Number.POSITIVE_INFINITY);
  assert.ok((await retryUntil(a.run, systemClock, 0)) !== undefined);
  assert.equal(a.calls, 1);
});

test('a clock held still does not make it try for ever: one attempt per pause in the timeout, plus one', async () => {
  const a = refusing(Number.POSITIVE_INFINITY);
  assert.ok((await retryUntil(a.run, new ManualClock(), 2 * RETRY_PAUSE_MS)) !== undefined);
  assert.equal(a.calls, 3);
});
