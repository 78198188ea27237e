/**
 * Polls `check` every `intervalMs` until it holds; returns how many ms that took, or throws after
 * `timeoutMs` naming `what` was awaited. The check always gets one last look after the limit has
 * passed: a test process stalled past the limit (a busy machine) must not fail a condition that
 * holds by then.
 */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 10,
): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const last = performance.now() - t0 >= timeoutMs;
    if (await check()) return performance.now() - t0;
    if (last) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
