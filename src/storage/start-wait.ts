import type { Logger } from 'pino';
import { ApiError, describeCause } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import type { Storage } from './types.ts';

/** Between two attempts to reach the database at start. */
export const START_RETRY_MS = 2000;

export interface StartWaitOptions {
  clock: Clock;
  /** Where each refusal is logged while waiting (a one-off command, which does not wait, has none). */
  logger?: Logger | undefined;
  /** `storage.postgres.start_wait_ms`: how long to keep trying PostgreSQL; 0 tries once. */
  waitMs: number;
  /** A stop asked for meanwhile: gives up at once (the start is abandoned). */
  signal?: AbortSignal | undefined;
}

/**
 * Applies the migrations (the start's first use of the database), waiting for a database that is
 * not reachable yet: nodes and their PostgreSQL are often started together, and the database may
 * take seconds to accept connections. Each refusal is logged with its cause (the host and port that
 * refused); past `waitMs`, or when `signal` aborts, the last refusal is thrown with its cause in the
 * message. Any other failure is thrown at once: a wrong password or schema does not cure itself.
 */
export async function migrateWhenReachable(storage: Storage, o: StartWaitOptions): Promise<void> {
  // An SQLite file that cannot be opened will not open later either.
  const waitMs = storage.driver === 'postgres' ? o.waitMs : 0;
  const deadline = o.clock.monotonic() + waitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await storage.migrate();
      if (attempt > 1) o.logger?.info({ attempts: attempt }, 'database reachable; starting');
      return;
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 'db.unavailable')) throw err;
      const cause = describeCause(err.cause ?? err);
      const left = deadline - o.clock.monotonic();
      if (left <= 0 || o.signal?.aborted) {
        throw new ApiError(
          'db.unavailable',
          o.signal?.aborted
            ? `stopped while waiting for the database (${cause})`
            : `the database could not be reached${waitMs > 0 ? ` within storage.postgres.start_wait_ms (${waitMs} ms)` : ''}: ${cause}`,
          { cause: err },
        );
      }
      const pause = Math.min(START_RETRY_MS, left);
      o.logger?.warn(
        { err: cause, attempt, retry_in_ms: pause, gives_up_in_ms: Math.round(left) },
        'database unreachable at start; trying again',
      );
      await pauseUnlessAborted(pause, o.signal);
    }
  }
}

function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
