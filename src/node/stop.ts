import type { FastifyInstance } from 'fastify';
import type { ClickLog } from '../clicks/index.ts';
import type { Scheduler } from '../cron/index.ts';
import { describeCause } from '../errors/index.ts';
import { drainServer } from '../http/index.ts';
import type { ClickCounters, Counts } from '../routing/index.ts';
import { StartAbandoned } from '../storage/index.ts';
import type { Logger } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';

/**
 * What a node holds that the database does not have yet: what a forced exit now loses. Clicks
 * buffered or in batches not yet acknowledged (a batch under way may yet have committed), and the
 * counts not yet persisted, summed over flows.
 */
export interface Unwritten {
  clicks_buffered: number;
  clicks_unacked: number;
  counts_unpersisted: Counts;
}

/**
 * How a graceful stop ended: `complete` when every answered click and every count was written;
 * else what it could not write by its deadline (the database refused them) and so lost.
 */
export interface StopOutcome {
  complete: boolean;
  clicks_lost: number;
  counts_lost: Counts;
}

/**
 * A graceful stop ends within `app.server.shutdown_timeout_ms` + this (the CLI's hard-exit timer is
 * armed for as long; README.md, "Stopping"). The click log retries its last writes (the clicks and
 * their counts), while the database refuses, for what is left of it.
 */
export const STOP_SLACK_MS = 1000;
/** Kept, of a stop's budget, for what follows the click log: the last sightings, leadership, storage, exit. */
const AFTER_CLICK_LOG_MS = 300;
/** Kept, of a stop's budget, for what follows the last sightings: leadership, storage, the log, exit. */
const AFTER_SIGHTINGS_MS = 200;
/** A failed start undoes what it made with no stop deadline: the click log's retries are this long. */
const UNDO_RETRY_MS = 1000;

/**
 * How a node stops, the one policy for a failed start and for a stop: each part, once made,
 * registers how it is undone, and both unwind the same stack in reverse order; a part that fails
 * to stop does not keep the ones below it from stopping. Made in start order, the stack stops a
 * node in this order: the server drains (with the running tasks), then the click log writes what
 * was answered and counted, then the last sightings go out, then the timers, the HTTP client,
 * telemetry, leadership, storage and the log. The stop's budget is
 * `app.server.shutdown_timeout_ms` + {@link STOP_SLACK_MS}, shared out so that each database write
 * keeps time for the parts after it.
 */
export class NodeStop {
  readonly #stack = new AsyncDisposableStack();
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #graceMs: number;
  /** When a stop must be over (monotonic ms), set when it begins; a failed start has none. */
  #deadline: number | undefined;
  #stopping: Promise<StopOutcome> | undefined;
  /** What the stop's last writes could not write, and so lost. */
  readonly #lost: StopOutcome = {
    complete: true,
    clicks_lost: 0,
    counts_lost: { clicks: 0, no_match: 0, bots: 0, uniques: 0 },
  };

  /** `graceMs`: `app.server.shutdown_timeout_ms`, what the server and the tasks get to finish. */
  constructor(opts: { clock: Clock; logger: Logger; graceMs: number }) {
    this.#clock = opts.clock;
    this.#logger = opts.logger;
    this.#graceMs = opts.graceMs;
  }

  /** How a part just made is undone: before the parts made before it. */
  defer(undo: () => unknown): void {
    this.#stack.defer(undo as () => PromiseLike<void> | void);
  }

  /** What is left of the stop's budget for a part, keeping `reserve` ms for the parts after it. */
  #left(reserve: number): number {
    const deadline = this.#deadline;
    return deadline === undefined ? UNDO_RETRY_MS : Math.max(0, deadline - this.#clock.monotonic() - reserve);
  }

  /**
   * The last sightings, written after the click log (sightings not sent cost at most a visitor
   * counted unique once more).
   */
  sightings(exchange: { stop(timeoutMs: number): Promise<void> }): void {
    this.defer(() => exchange.stop(this.#left(AFTER_SIGHTINGS_MS)));
  }

  /**
   * The click log's last writes, after the server drained: every click answered, and what it
   * counted, is in the buffer by then, whatever became of the server's close. A database that
   * refuses is retried for what is left of the stop's budget (a short outage costs no click);
   * what it never took is the stop's loss.
   */
  clickLog(log: Pick<ClickLog, 'stop'>, counters: Pick<ClickCounters, 'unpersisted' | 'pending'>): void {
    this.defer(async () => {
      const { lost: clicks } = await log.stop(this.#left(AFTER_CLICK_LOG_MS));
      const counts = counters.unpersisted();
      if (clicks === 0 && !counters.pending) return;
      this.#lost.complete = false;
      this.#lost.clicks_lost = clicks;
      this.#lost.counts_lost = counts;
    });
  }

  /** The server drains while running tasks get the same grace period. */
  server(app: FastifyInstance, scheduler: Pick<Scheduler, 'stop'>): void {
    const graceMs = this.#graceMs;
    this.defer(async () => {
      const [drained, tasks] = await Promise.allSettled([drainServer(app, graceMs), scheduler.stop(graceMs)]);
      if (drained.status === 'fulfilled' && drained.value.stalled + drained.value.cut > 0)
        this.#logger.warn(
          { ...drained.value, timeout_ms: graceMs },
          'connections closed at the stop deadline',
        );
      for (const r of [drained, tasks]) if (r.status === 'rejected') throw r.reason;
    });
  }

  /** The graceful stop (once, however often asked): says whether everything answered was written. */
  stop(): Promise<StopOutcome> {
    this.#stopping ??= (async () => {
      this.#deadline = this.#clock.monotonic() + this.#graceMs + STOP_SLACK_MS;
      this.#logger.info('sluice stopping');
      await this.#stack.disposeAsync();
      const lost = this.#lost;
      // A stop that lost answered clicks or counts is a failed one (exit 1): its last record says what.
      if (!lost.complete)
        this.#logger.error(
          { clicks_lost: lost.clicks_lost, counts_lost: lost.counts_lost },
          'sluice stopped without writing every answered click and count: the database refused them until the stop timed out; they are lost',
        );
      else this.#logger.info('sluice stopped');
      this.#logger.flush();
      return lost;
    })();
    return this.#stopping;
  }

  /** A failed start: says why (one record), then undoes what was made, with no stop deadline. */
  async undo(err: unknown): Promise<void> {
    if (err instanceof StartAbandoned)
      this.#logger.info({ reason: err.message }, 'sluice start abandoned: stopped');
    else this.#logger.error({ err: describeCause(err) }, 'sluice could not start');
    await this.#stack.disposeAsync().catch((stopErr: unknown) => {
      this.#logger.error({ err: stopErr }, 'error while undoing a failed start');
    });
  }
}

/** What is not written yet, for the last record of an exit that does not wait for the stop. */
export function unwritten(
  clickLog: Pick<ClickLog, 'stats'>,
  counters: Pick<ClickCounters, 'unpersisted'>,
): Unwritten {
  const clicks = clickLog.stats();
  return {
    clicks_buffered: clicks.buffered,
    clicks_unacked: clicks.unacked,
    counts_unpersisted: counters.unpersisted(),
  };
}
