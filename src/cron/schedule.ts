import { Cron } from 'croner';

/**
 * Schedule maths without timers: a cron expression (5 fields, or 6 with seconds first), evaluated
 * in UTC, answering "when is the next run after this moment" for any moment a caller gives.
 */
export class Schedule {
  readonly expression: string;
  readonly #cron: Cron;

  constructor(expression: string) {
    const fields = expression.trim().split(/\s+/).length;
    if (fields !== 5 && fields !== 6) {
      throw new Error(`expected 5 fields, or 6 with seconds first; got ${fields}`);
    }
    this.expression = expression;
    this.#cron = new Cron(expression, { paused: true, timezone: 'Etc/UTC' });
  }

  /** The first run strictly after `afterMs` (epoch ms), or undefined when there is none. */
  next(afterMs: number): number | undefined {
    return this.#cron.nextRun(new Date(afterMs))?.getTime();
  }

  /** The next `n` runs after `afterMs`. */
  nextRuns(n: number, afterMs: number): number[] {
    return this.#cron.nextRuns(n, new Date(afterMs)).map((d) => d.getTime());
  }
}
