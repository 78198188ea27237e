/**
 * A stop signal (SIGTERM, SIGINT) that reaches `sluice start` while it is still loading its code
 * (about a second on a cold start): held from the entry's first statement, before the imports, and
 * handed to the start, which carries it out once the node has started (or gives up a wait for the
 * database). Without it, the signal's default action killed the process, which wrote nothing and
 * did not exit 0. The start's one rule for signals until it has its own handlers: the first is
 * kept, a repeat within {@link SIGNAL_ECHO_MS} is its echo, a later one exits 1 at once. Imports
 * nothing, so that it is in place before anything heavy loads.
 */

/** A repeated stop signal within this long of the first is an echo (group + npm's forward). */
export const SIGNAL_ECHO_MS = 1000;

export interface HeldSignal {
  signal: NodeJS.Signals;
  /** When it came, on `performance.now()`. */
  at: number;
}

let held: HeldSignal | undefined;
let holding = false;
let onFirst: (() => void) | undefined;

const hold = (signal: NodeJS.Signals) => {
  if (held === undefined) {
    held = { signal, at: performance.now() };
    onFirst?.();
  } else if (performance.now() - held.at >= SIGNAL_ECHO_MS) {
    // A second signal, not an echo: someone who will not wait for the start (a database that hangs).
    process.stderr.write(`second ${signal} while starting: exiting now\n`);
    process.exit(1);
  }
};

/** Holds stop signals from now on (again: nothing more), until {@link releaseStopSignals}. */
export function holdStopSignals(): void {
  if (holding) return;
  holding = true;
  process.on('SIGTERM', hold);
  process.on('SIGINT', hold);
}

/** Calls `fn` when the first stop signal is held, at once if one was held already. */
export function onFirstStopSignal(fn: () => void): void {
  onFirst = fn;
  if (held !== undefined) fn();
}

/** Stops holding (the caller has its own handlers in place by then) and returns the first signal held. */
export function releaseStopSignals(): HeldSignal | undefined {
  holding = false;
  onFirst = undefined;
  process.off('SIGTERM', hold);
  process.off('SIGINT', hold);
  const first = held;
  held = undefined;
  return first;
}
