/**
 * Polls `check` every `intervalMs` until it holds; returns how many ms that took, or throws after
 * `timeoutMs` naming `what` was awaited.
 */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 10,
): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if (await check()) return performance.now() - t0;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
