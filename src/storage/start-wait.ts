import type { Logger } from 'pino';
import { ApiError, describeCause, hasCode } from '../errors/index.ts';
import { type Clock, retryUntil } from '../time/index.ts';
import { isRefusedLogin } from './postgres-executor.ts';
import type { Storage } from './types.ts';

/** Between two attempts to reach the database at start. */
const START_RETRY_MS = 2000;

/** A start given up because a stop was asked for while it waited for the database. */
export class StartAbandoned extends Error {
  override name = 'StartAbandoned';
}

/**
 * Applies the migrations (the start's first use of the database), waiting for a PostgreSQL that
 * cannot be reached yet: nodes and their database are often started together, and it may take
 * seconds to accept connections. Each failure to connect is logged with its cause (the address that
 * refused); past `waitMs` the last one is thrown with its cause in the message, and a stop asked
 * for meanwhile (`signal`) throws {@link StartAbandoned}. A refusal of the role, password or
 * database name, and any other failure, is thrown at once; an SQLite file that cannot be opened
 * is not waited for either.
 */
export async function migrateWhenReachable(
  storage: Storage,
  o: {
    clock: Clock;
    /** Where each failure is logged while waiting (a one-off command, which does not wait, has none). */
    logger?: Logger | undefined;
    /** `storage.postgres.start_wait_ms`: how long to keep trying PostgreSQL; 0 tries once. */
    waitMs: number;
    signal?: AbortSignal | undefined;
  },
): Promise<void> {
  const waitMs = storage.driver === 'postgres' ? o.waitMs : 0;
  let waited = false;
  const failed = await retryUntil(() => storage.migrate(), o.clock, waitMs, {
    pauseMs: START_RETRY_MS,
    signal: o.signal,
    retryable: (err) => hasCode(err, 'db.unavailable') && !isRefusedLogin(err.cause),
    onRetry: (err, attempt, pauseMs, leftMs) => {
      waited = true;
      o.logger?.warn(
        {
          err: describeCause((err as ApiError).cause ?? err),
          attempt,
          retry_in_ms: pauseMs,
          gives_up_in_ms: Math.round(leftMs),
        },
        'database unreachable at start; trying again',
      );
    },
  });
  if (failed === undefined) {
    if (waited) o.logger?.info('database reachable; starting');
    return;
  }
  const err = failed.error;
  if (!hasCode(err, 'db.unavailable')) throw err;
  // The driver's own error (the address that refused), not the generic "retry shortly" above it.
  const cause = err.cause ?? err;
  const why = describeCause(cause);
  if (failed.aborted) throw new StartAbandoned(`stopped while waiting for the database (${why})`, { cause });
  if (isRefusedLogin(cause))
    throw new ApiError('db.unavailable', `the database refused the connection: ${why}`, { cause });
  throw new ApiError(
    'db.unavailable',
    `the database could not be reached${waitMs > 0 ? ` within storage.postgres.start_wait_ms (${waitMs} ms)` : ''}: ${why}`,
    { cause },
  );
}
