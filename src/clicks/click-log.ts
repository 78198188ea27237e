import { type Config, ownTimerMs } from '../config/index.ts';
import { describeCause, hasCode } from '../errors/index.ts';
import {
  CLICK_BATCH_MAX_ROWS,
  type ClickBatch,
  type ClickRecord,
  type ClickStore,
  type CountRows,
  clickRecordOf,
  type NewClick,
  newBatchId,
} from '../storage/index.ts';
import type { ClicksSection, Logger, Telemetry } from '../telemetry/index.ts';
import { type Clock, retryUntil, systemClock } from '../time/index.ts';
import type { UniquenessWindow } from './uniqueness.ts';

/**
 * Attempts of one batch that failed for a reason other than the database being unavailable (a row
 * the database refuses: a constraint, bad data) before it is given up and its clicks counted as dropped:
 * a batch that can never be written must not hold up every click behind it until the buffer
 * overflows. An unavailable database is retried for as long as it takes.
 */
export const CLICK_BATCH_MAX_ATTEMPTS = 10;
/** While a full buffer drops clicks, one log record says so at most this often. */
export const OVERFLOW_REPORT_EVERY_MS = 10_000;

/**
 * What the clicks of one batch counted (the routing counters' hits, clicks, no-matches, bots,
 * uniques and daily cap counts), cut in the same turn as the batch and written in its transaction.
 */
export interface CountsCut {
  /** The counts as storage adds them; built when the batch is first sent, off the hot path. */
  rows(): Promise<CountRows>;
  /** Their batch was acknowledged: persisted. */
  acked(): void;
  /** Their batch was given up: lost. */
  lost(): void;
  /**
   * Takes in the counts of a later cut (its batch's clicks joined this one's before either was
   * sent): they are this cut's from now on, acknowledged or lost with it.
   */
  absorb(later: CountsCut): void;
}

/** Where the counts come from: cut whenever the click log cuts a batch. */
export interface CountsSource {
  /** What was counted since the last cut; undefined when nothing was. */
  cut(): CountsCut | undefined;
}

export interface ClickLogOptions {
  /** Where batches go; its `batchMaxRows`, when it has one, sizes them. */
  store: Pick<ClickStore, 'insertBatch'> & Partial<Pick<ClickStore, 'batchMaxRows'>>;
  logger: Logger;
  /** This node's id, written with each batch. */
  serverId: string | null;
  /**
   * The counts the clicks made on the hot path, written with them: each batch carries what its
   * clicks counted, so a crash loses clicks and counts together and they always agree.
   */
  counts?: CountsSource;
  /** `clicks.buffer_max`: clicks held in memory at most, buffered and cut into unacknowledged batches alike. */
  bufferMax: number;
  /** `clicks.flush_interval_ms`; 0 when something else (a task) calls {@link ClickLog.flush}. */
  flushIntervalMs: number;
  /** Clicks a batch holds at most: this, else the store's `batchMaxRows`, else {@link CLICK_BATCH_MAX_ROWS}. */
  batchMaxRows?: number;
  clock?: Clock;
  /**
   * Where the log shows its figures: the `clicks` section of system metrics and the `P_clicks_*`
   * families of the exposition, both read from {@link ClickLog.stats} so they never disagree.
   */
  telemetry?: Telemetry;
  /** The uniqueness table the clicks are judged by, shown with them (`uniqueness` of the section). */
  uniqueness?: Pick<UniquenessWindow, 'size' | 'maxEntries' | 'evictedEarly'>;
}

/** The click log's figures for system metrics (cumulative since start, except the gauges). */
export type ClickLogStats = ClicksSection;

interface Pending {
  batch: ClickBatch;
  attempts: number;
  counts: CountsCut | undefined;
}

/**
 * The click log's write path. The hot path appends a click to a bounded in-memory buffer (an array
 * push: no I/O, no allocation beyond the record); every flush interval the buffer is cut into
 * batches of at most the store's `batchMaxRows`, each with an id made at the cut, and written
 * in order. A batch that fails stays at the head, unchanged, and is sent again with the same id on
 * the next flush, so a batch whose commit went through but whose acknowledgement was lost is not
 * written twice (storage applies an id once). While the database is down clicks keep arriving into
 * the buffer until `bufferMax` clicks are held in all; past that a click is dropped and counted,
 * never silently.
 */
export class ClickLog {
  readonly #store: Pick<ClickStore, 'insertBatch'>;
  readonly #log: Logger;
  readonly #serverId: string | null;
  readonly #counts: CountsSource | undefined;
  readonly #batchMax: number;
  readonly #intervalMs: number;
  readonly #clock: Clock;
  #max: number;
  #buf: NewClick[] = [];
  readonly #pending: Pending[] = [];
  #held = 0;
  #persisted = 0;
  #dropped = 0;
  /** Clicks dropped by a full buffer, and how many of them a log record has told of, and when. */
  #overflowed = 0;
  #overflowTold = 0;
  #overflowToldAt: number | undefined;
  #failed = 0;
  #lastError: string | null = null;
  #failingSince: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #chain: Promise<unknown> = Promise.resolve();
  /** The batch being sent now (its counts being built, or its write under way). */
  #sending: Pending | undefined;
  readonly #uniqueness: ClickLogOptions['uniqueness'];

  /**
   * The log as `clicks` asks; its own timer off when an enabled `clicks.flush` task writes it
   * (docs/cron.md).
   */
  static fromConfig(
    config: Config,
    deps: Omit<ClickLogOptions, 'bufferMax' | 'flushIntervalMs' | 'batchMaxRows'>,
  ): ClickLog {
    return new ClickLog({
      ...deps,
      bufferMax: config.clicks.buffer_max,
      flushIntervalMs: ownTimerMs(config.cron.tasks, 'clicks.flush', config.clicks.flush_interval_ms),
    });
  }

  constructor(opts: ClickLogOptions) {
    this.#store = opts.store;
    this.#log = opts.logger;
    this.#serverId = opts.serverId;
    this.#counts = opts.counts;
    this.#max = opts.bufferMax;
    this.#batchMax = opts.batchMaxRows ?? opts.store.batchMaxRows ?? CLICK_BATCH_MAX_ROWS;
    this.#intervalMs = opts.flushIntervalMs;
    this.#clock = opts.clock ?? systemClock;
    this.#uniqueness = opts.uniqueness;
    if (opts.telemetry !== undefined) this.#report(opts.telemetry);
  }

  #report(telemetry: Telemetry): void {
    telemetry.setSection('clicks', () => this.stats());
    telemetry.addFamilies((w) => {
      const s = this.stats();
      w.counter('clicks_persisted', 'Clicks whose batch the database acknowledged.', [['', s.persisted]]);
      w.counter(
        'clicks_dropped',
        'Clicks lost: buffer full, a batch given up, or a stop with the database down.',
        [['', s.dropped]],
      );
      w.counter('clicks_failed_flushes', 'Click log flush attempts that failed (each is retried).', [
        ['', s.failed_flushes],
      ]);
      w.gauge('clicks_buffered', 'Clicks in the buffer, not yet cut into a batch.', [['', s.buffered]]);
      w.gauge('clicks_unacked', 'Clicks in batches sent or waiting, not yet acknowledged.', [
        ['', s.unacked],
      ]);
      w.gauge('clicks_buffer_max', 'clicks.buffer_max: clicks held in memory at most.', [['', s.buffer_max]]);
      w.counter(
        'uniqueness_early_evictions',
        'Visitor pairs evicted from the full uniqueness table before their window ended: each may count a later click unique again.',
        [['', s.uniqueness.early_evictions]],
      );
      w.gauge('uniqueness_entries', 'Visitor pairs held in the uniqueness table.', [
        ['', s.uniqueness.entries],
      ]);
      w.gauge('uniqueness_max_entries', 'routing.uniqueness_max_entries: visitor pairs held at most.', [
        ['', s.uniqueness.max_entries],
      ]);
    });
  }

  /** Takes a click for the log; false when the buffer is full and the click was dropped (counted). */
  append(click: NewClick): boolean {
    if (this.#buf.length + this.#held >= this.#max) {
      this.#dropped++;
      this.#overflowed++;
      return false;
    }
    this.#buf.push(click);
    // A batch is cut whole at its size, with the counts of exactly its clicks (one array and
    // three maps every batchMax clicks).
    if (this.#buf.length >= this.#batchMax) this.#cut();
    return true;
  }

  /** A click not yet written (for a postback that arrives before the flush), as it will be stored. */
  find(clickId: string): ClickRecord | undefined {
    for (let i = this.#buf.length - 1; i >= 0; i--) {
      if (this.#buf[i]!.click_id === clickId) return clickRecordOf(this.#buf[i]!, this.#serverId);
    }
    for (const p of this.#pending) {
      const c = p.batch.rows.find((r) => r.click_id === clickId);
      if (c !== undefined) return clickRecordOf(c, p.batch.server_id);
    }
    return undefined;
  }

  stats(): ClickLogStats {
    return {
      buffered: this.#buf.length,
      unacked: this.#held,
      buffer_max: this.#max,
      persisted: this.#persisted,
      dropped: this.#dropped,
      failed_flushes: this.#failed,
      last_error: this.#lastError,
      failing_since: this.#failingSince === undefined ? null : new Date(this.#failingSince).toISOString(),
      uniqueness: {
        entries: this.#uniqueness?.size ?? 0,
        max_entries: this.#uniqueness?.maxEntries ?? 0,
        early_evictions: this.#uniqueness?.evictedEarly ?? 0,
      },
    };
  }

  /**
   * Starts the periodic flush (none when the interval is 0): every half interval, so that a click
   * waits at most half of it to be cut and its batch has the other half to be written. A crash
   * loses what is not written: cut once an interval, a kill under full load lost the interval plus
   * the write under way (up to 1.03 s; docs/RELIABILITY.md, "Killed under load"). Flushes never
   * overlap: behind a slow write the next one cuts everything that came meanwhile, so batches grow
   * back to their full size when the database is the bottleneck.
   */
  start(): void {
    if (this.#intervalMs <= 0 || this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.flush(), this.#intervalMs / 2);
    this.#timer.unref();
  }

  /**
   * Cuts what is buffered into batches and writes every unacknowledged batch, oldest first; returns
   * the clicks written. Throws the first failure that stopped it (the batches stay for the next
   * flush); flushes never overlap.
   */
  persist(): Promise<number> {
    const run = this.#chain.then(() => this.#flushOnce());
    this.#chain = run.catch(() => {});
    return run;
  }

  /** {@link persist} for background use: a failure is logged, never thrown. */
  async flush(): Promise<number> {
    try {
      return await this.persist();
    } catch (err) {
      this.#log.warn(
        { err: describeCause(err), buffered: this.#buf.length, unacked: this.#held },
        'click log flush failed; its batches are kept and sent again',
      );
      return 0;
    }
  }

  /**
   * Graceful stop: no more clicks are taken, and everything held is written, retried until
   * `timeoutMs` has passed while the database refuses. What could not be written by then is
   * counted as dropped and logged. Returns the clicks written and lost: those still held at the
   * end, and those of batches given up during the stop (a database that refuses every attempt).
   */
  async stop(timeoutMs = 5000): Promise<{ persisted: number; lost: number }> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#reportOverflow(true);
    this.#max = 0;
    const droppedBefore = this.#dropped;
    let persisted = 0;
    // A flush that went through wrote everything held (no click is taken any more).
    const failed = await retryUntil(
      async () => {
        persisted += await this.persist();
      },
      this.#clock,
      timeoutMs,
    );
    if (failed === undefined || this.#buf.length + this.#held === 0)
      return { persisted, lost: this.#dropped - droppedBefore };
    const held = this.#buf.length + this.#held;
    this.#dropped += held;
    const lost = this.#dropped - droppedBefore;
    this.#log.error(
      { lost, err: this.#lastError },
      'click log stopped with clicks it could not write: the database refused them until the stop timed out',
    );
    this.#buf = [];
    this.#pending.length = 0;
    this.#held = 0;
    this.#failingSince = undefined;
    return { persisted, lost };
  }

  /**
   * One `error` record for the clicks a full buffer dropped since the last one: at the first flush
   * after a drop, then at most every {@link OVERFLOW_REPORT_EVERY_MS} while drops go on (a drop
   * is counted on the hot path, which writes no log), and at the stop whatever is left untold.
   * The figures in system metrics reset with the process; these records stay.
   */
  #reportOverflow(force: boolean): void {
    const untold = this.#overflowed - this.#overflowTold;
    if (untold === 0) return;
    const now = this.#clock.monotonic();
    if (!force && this.#overflowToldAt !== undefined && now - this.#overflowToldAt < OVERFLOW_REPORT_EVERY_MS)
      return;
    this.#overflowTold = this.#overflowed;
    this.#overflowToldAt = now;
    this.#log.error(
      {
        dropped: untold,
        dropped_total: this.#dropped,
        held: this.#buf.length + this.#held,
        buffer_max: this.#max,
      },
      'click log buffer full: clicks were dropped, never to be stored (clicks.buffer_max)',
    );
  }

  async #flushOnce(): Promise<number> {
    this.#reportOverflow(false);
    this.#cut();
    let written = 0;
    while (this.#pending.length > 0) {
      const p = this.#pending[0]!;
      const rows = p.batch.rows.length;
      this.#sending = p;
      try {
        if (p.counts !== undefined) p.batch.counts ??= await p.counts.rows();
        await this.#store.insertBatch(p.batch);
      } catch (err) {
        this.#failed++;
        p.attempts++;
        // With its cause: "the database is unavailable" alone cannot tell a full disk from a refused
        // connection (a review found the console's "failing since" row saying no more).
        this.#lastError = describeCause(err);
        this.#failingSince ??= this.#clock.now();
        if (hasCode(err, 'db.unavailable') || p.attempts < CLICK_BATCH_MAX_ATTEMPTS) throw err;
        this.#pending.shift();
        this.#held -= rows;
        this.#dropped += rows;
        // The clicks are given up, not their counts (hits stay the clicks answered): these are
        // sent again alone, under an id of their own, and given up in turn if refused as often.
        const countsAlone = rows > 0 && p.counts !== undefined;
        if (countsAlone) {
          const batch = { id: newBatchId(), server_id: this.#serverId, rows: [], counts: p.batch.counts };
          this.#pending.unshift({ batch, attempts: 0, counts: p.counts });
        } else p.counts?.lost();
        this.#log.error(
          { err: this.#lastError, batch_id: p.batch.id, clicks: rows, attempts: p.attempts },
          countsAlone
            ? 'click batch given up: the database refused it on every attempt; its clicks are counted as dropped, its counts sent alone'
            : 'click batch given up: the database refused it on every attempt; its clicks and counts are dropped',
        );
        continue;
      } finally {
        this.#sending = undefined;
      }
      // Applied now or before (a retry of a batch whose acknowledgement was lost): written either way.
      p.counts?.acked();
      this.#pending.shift();
      this.#held -= rows;
      this.#persisted += rows;
      written += rows;
    }
    this.#failingSince = undefined;
    return written;
  }

  /**
   * Moves the buffer (at most batchMax clicks: {@link append} cuts at that size) into a batch with
   * its id and the counts made since the last cut; counts alone (clicks a full buffer dropped) make
   * a batch of no clicks. The last batch waiting, when it was never sent (the database is down and
   * the head keeps failing), takes them instead, up to a batch's size: an outage of hours at a few
   * clicks a flush made thousands of batches, each read in turn by every capped stream's check of
   * every click (its pending counts) and written one transaction each once the database was back.
   */
  #cut(): void {
    const counts = this.#counts?.cut();
    if (this.#buf.length === 0 && counts === undefined) return;
    const rows = this.#buf;
    this.#buf = [];
    this.#held += rows.length;
    const tail = this.#pending.at(-1);
    if (
      tail !== undefined &&
      tail !== this.#sending &&
      tail.attempts === 0 &&
      tail.batch.counts === undefined &&
      tail.batch.rows.length + rows.length <= this.#batchMax
    ) {
      // Never sent: its id was never used, and its clicks and counts still go together.
      if (rows.length > 0) tail.batch.rows = tail.batch.rows.concat(rows);
      if (counts !== undefined) {
        if (tail.counts === undefined) tail.counts = counts;
        else tail.counts.absorb(counts);
      }
      return;
    }
    this.#pending.push({ batch: { id: newBatchId(), server_id: this.#serverId, rows }, attempts: 0, counts });
  }
}
