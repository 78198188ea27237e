import { PerformanceObserver } from 'node:perf_hooks';

/** How long `fn` held the event loop, judged turn by turn (see {@link loopHolds}). */
export interface LoopHolds {
  /** Turns seen while `fn` ran. */
  turns: number;
  /** The longest main-thread CPU time between two turns, collections included. */
  maxCpuMs: number;
  /** The collector's pause time inside that longest gap. */
  gcInMaxMs: number;
  /** The longest main-thread CPU time between two turns less the collector's pauses in that gap. */
  maxNetMs: number;
  /** The longest collector pause time inside any one gap. */
  gcMs: number;
}

/**
 * Runs `fn` while a tick (`setImmediate`, or a 1 ms timer) reads this thread's CPU time
 * (`process.threadCpuUsage()`: CPU, so a machine too busy to schedule the process does not inflate
 * it) at every turn, and V8's `gc` entries say when the collector paused the thread. A collection's
 * length depends on the heap, not on the task, so it is reported apart from the task's own hold.
 */
export async function loopHolds(
  fn: () => Promise<unknown>,
  { tick = 'immediate' }: { tick?: 'immediate' | 'timer' } = {},
): Promise<LoopHolds> {
  const gcs: [start: number, end: number][] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration]);
  });
  observer.observe({ entryTypes: ['gc'] });
  const next =
    tick === 'immediate' ? (f: () => void) => setImmediate(f) : (f: () => void) => setTimeout(f, 1);
  const gaps: [start: number, end: number, cpuMs: number][] = [];
  let cpu = process.threadCpuUsage();
  let at = performance.now();
  let on = true;
  const read = () => {
    const nowCpu = process.threadCpuUsage();
    const now = performance.now();
    gaps.push([at, now, (nowCpu.user - cpu.user + nowCpu.system - cpu.system) / 1000]);
    cpu = nowCpu;
    at = now;
    if (on) next(read);
  };
  next(read);
  try {
    await fn();
  } finally {
    on = false;
  }
  await new Promise((r) => setImmediate(r)); // the turn that ends with fn is counted too
  await new Promise((r) => setTimeout(r, 10)); // and the collector's entries delivered
  observer.disconnect();
  const out: LoopHolds = { turns: gaps.length, maxCpuMs: 0, gcInMaxMs: 0, maxNetMs: 0, gcMs: 0 };
  for (const [start, end, cpuMs] of gaps) {
    let paused = 0;
    for (const [gs, ge] of gcs) paused += Math.max(0, Math.min(end, ge) - Math.max(start, gs));
    if (cpuMs > out.maxCpuMs) {
      out.maxCpuMs = cpuMs;
      out.gcInMaxMs = paused;
    }
    out.gcMs = Math.max(out.gcMs, paused);
    out.maxNetMs = Math.max(out.maxNetMs, cpuMs - paused);
  }
  return out;
}
