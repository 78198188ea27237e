import type { Clock } from './index.ts';

/** Between two attempts of {@link retryUntil}, unless less time is left. */
export const RETRY_PAUSE_MS = 250;

/**
 * Runs `attempt` until it resolves or `timeoutMs` has passed, pausing {@link RETRY_PAUSE_MS} (or
 * what is left) between attempts: what a graceful stop does with work the database refuses.
 * Bounded by attempts too (one per pause in the timeout, plus one), so a clock a test holds still
 * cannot make a stop wait for ever. Returns undefined once an attempt went through, else what the
 * last one threw.
 */
export async function retryUntil(
  attempt: () => Promise<unknown>,
  clock: Clock,
  timeoutMs: number,
): Promise<{ error: unknown } | undefined> {
  const deadline = clock.monotonic() + timeoutMs;
  for (let tries = Math.ceil(Math.max(timeoutMs, 0) / RETRY_PAUSE_MS) + 1; ; tries--) {
    try {
      await attempt();
      return undefined;
    } catch (error) {
      const left = deadline - clock.monotonic();
      if (left <= 0 || tries <= 1) return { error };
      await new Promise((r) => setTimeout(r, Math.min(RETRY_PAUSE_MS, left)));
    }
  }
}
