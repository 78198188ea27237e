import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * How long a background loop may hold the event loop before it lets timers and I/O run: well
 * under the 20 ms that no task, refresh or reload may exceed (#12), leaving room for the one
 * step (a query, a compiled flow) that is already under way when the budget runs out.
 */
export const SLICE_BUDGET_MS = 5;

/**
 * Cooperative time slicing for long loops on the main thread. Awaiting a promise that is already
 * resolved (every `node:sqlite` call behind the async storage interface) runs as a microtask, so
 * a loop of them never lets the event loop reach a timer, a socket or a task's timeout;
 * {@link TimeSlice.pause} yields a whole event-loop turn (`setImmediate`) once the slice has used
 * its budget, and costs a clock read otherwise.
 *
 * It reads `performance.now()` rather than the injected Clock on purpose: the budget is about the
 * real thread, and a ManualClock standing still in a test must not stop a loop from yielding.
 */
export class TimeSlice {
  readonly #budgetMs: number;
  #since = performance.now();

  constructor(budgetMs = SLICE_BUDGET_MS) {
    this.#budgetMs = budgetMs;
  }

  /** Whether this slice has used its budget (a loop may stop taking on more work). */
  get spent(): boolean {
    return performance.now() - this.#since >= this.#budgetMs;
  }

  /** Yields one event-loop turn when the budget is spent, then starts a new slice. */
  async pause(): Promise<void> {
    if (!this.spent) return;
    await nextTurn();
    this.#since = performance.now();
  }
}
