import { describeCause } from '../errors/index.ts';
import { OK, Recorder, SERVER_ERROR } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';

/** What an executor times its statements with: {@link QueryStats}, or nothing (a writer thread's). */
export interface QueryTimer {
  readonly clock: Clock;
  ok(startedAt: number): void;
  failed(startedAt: number, err: unknown, unavailable: boolean): void;
}

/**
 * Every query of either backend is timed here, with the same recorder type as the routes, and
 * the last failure is kept for the `db` section. `up` follows the most recent outcome.
 */
export class QueryStats implements QueryTimer {
  readonly recorder = new Recorder([]);
  readonly clock: Clock;
  lastError: string | null = null;
  up = true;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  ok(startedAt: number): void {
    this.recorder.record(this.clock.monotonic() - startedAt, OK);
    this.up = true;
  }

  failed(startedAt: number, err: unknown, unavailable: boolean): void {
    this.recorder.record(this.clock.monotonic() - startedAt, SERVER_ERROR);
    this.lastError = describeCause(err);
    if (unavailable) this.up = false;
  }
}
