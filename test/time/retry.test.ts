import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, retryUntil, systemClock } from '../../src/time/index.ts';
import { RETRY_PAUSE_MS } from '../../src/time/retry.ts';

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

test('a failure that may not be retried ends it at once; each retried one is told of first', async () => {
  const a = refusing(Number.POSITIVE_INFINITY);
  const told: number[] = [];
  const failed = await retryUntil(a.run, systemClock, 60_000, {
    pauseMs: 10,
    retryable: (err) => (err as Error).message !== 'refused 3',
    onRetry: (_err, attempt) => told.push(attempt),
  });
  assert.deepEqual(failed, { error: new Error('refused 3'), aborted: false });
  assert.deepEqual(told, [1, 2]);
});

test('a stop asked for during a pause gives up at once, saying so', async () => {
  const a = refusing(Number.POSITIVE_INFINITY);
  const stop = new AbortController();
  const started = performance.now();
  const failed = await retryUntil(a.run, systemClock, 60_000, {
    pauseMs: 30_000,
    signal: stop.signal,
    onRetry: () => setTimeout(() => stop.abort(), 10),
  });
  assert.equal(failed?.aborted, true);
  assert.equal(a.calls, 1);
  assert.ok(performance.now() - started < 20_000, 'the 30 s pause was cut short');
});
