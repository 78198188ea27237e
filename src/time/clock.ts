/**
 * Time as a dependency: everything that reads the clock takes a {@link Clock}, so tests can drive
 * time by hand and only the scheduler and the server touch real timers.
 */
export interface Clock {
  /** Wall-clock milliseconds since the epoch (for timestamps shown to people). */
  now(): number;
  /** Monotonic milliseconds with sub-millisecond precision (for durations). */
  monotonic(): number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
};

/** A clock that only moves when told to; for tests. */
export class ManualClock implements Clock {
  #wall: number;
  #mono = 0;
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#wall = start;
  }
  now(): number {
    return this.#wall;
  }
  monotonic(): number {
    return this.#mono;
  }
  advance(ms: number): void {
    this.#wall += ms;
    this.#mono += ms;
  }
  set(wallMs: number): void {
    this.#mono += wallMs - this.#wall;
    this.#wall = wallMs;
  }
}
