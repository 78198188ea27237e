import { setTimeout as pause } from 'node:timers/promises';
import type { Clock } from './clock.ts';

/** Between two attempts of {@link retryUntil}, unless told otherwise or less time is left. */
export const RETRY_PAUSE_MS = 250;

export interface RetryOptions {
  /** Between two attempts, unless less time is left [{@link RETRY_PAUSE_MS}]. */
  pauseMs?: number;
  /** Gives up when aborted, a pause under way included. */
  signal?: AbortSignal | undefined;
  /** Whether a failure may be tried again [any may]; one that may not ends the retries at once. */
  retryable?: (error: unknown) => boolean;
  /** Told of each failure that will be tried again, before the pause. */
  onRetry?: (error: unknown, attempt: number, pauseMs: number, leftMs: number) => void;
}

/** Why {@link retryUntil} gave up: what the last attempt threw, and whether a stop was asked for. */
export interface RetryFailure {
  error: unknown;
  aborted: boolean;
}

/**
 * Runs `attempt` until it resolves or `timeoutMs` has passed, pausing between attempts (what is
 * left when that is less): what a graceful stop does with work the database refuses, and a start
 * with a database that is not up yet. Bounded by attempts too (one per pause in the timeout, plus
 * one), so a clock a test holds still cannot make it wait for ever. Returns undefined once an
 * attempt went through, else why it gave up.
 */
export async function retryUntil(
  attempt: () => Promise<unknown>,
  clock: Clock,
  timeoutMs: number,
  o: RetryOptions = {},
): Promise<RetryFailure | undefined> {
  const pauseMs = o.pauseMs ?? RETRY_PAUSE_MS;
  const deadline = clock.monotonic() + timeoutMs;
  const most = Math.ceil(Math.max(timeoutMs, 0) / pauseMs) + 1;
  for (let n = 1; ; n++) {
    try {
      await attempt();
      return undefined;
    } catch (error) {
      const left = deadline - clock.monotonic();
      if (o.signal?.aborted) return { error, aborted: true };
      if (left <= 0 || n >= most || (o.retryable !== undefined && !o.retryable(error)))
        return { error, aborted: false };
      const wait = Math.min(pauseMs, left);
      o.onRetry?.(error, n, wait, left);
      try {
        await pause(wait, undefined, o.signal === undefined ? undefined : { signal: o.signal });
      } catch {
        return { error, aborted: true };
      }
    }
  }
}
