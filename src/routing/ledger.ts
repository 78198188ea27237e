import type { ClickLog } from '../clicks/index.ts';
import { type Config, ownTimerMs } from '../config/index.ts';
import type { Aggregates, FlowRecord, Storage, StreamRecord } from '../storage/index.ts';
import type { FlowsSection, Logger, StreamsSection } from '../telemetry/index.ts';
import { type Clock, systemClock } from '../time/index.ts';
import { ClickCounters } from './click-counters.ts';
import { DailyCaps, type StreamCap } from './daily-caps.ts';
import { SlugMisses } from './slug-misses.ts';

export interface LedgerOptions {
  storage: Pick<Storage, 'streamDays'>;
  logger: Logger;
  /** The time daily caps count days by (the hot path's clock). */
  clock?: Clock;
  /**
   * How often the ledger reads every node's daily cap counts itself; 0 when a `stats.flush` task
   * does it (after writing the click log, which carries the counts).
   */
  capsIntervalMs?: number;
}

/** How often a node reads the daily cap counts back when no `stats.flush` task does. */
const CAPS_INTERVAL_MS = 1000;

/**
 * What `/go` counts, beside the clicks it logs: the click counters (written with the clicks that
 * made them: the click log cuts them with each batch, docs/routing.md#counting), the daily caps of
 * the streams this node routes and their read-back of every node's counts, and the slugs that
 * route nowhere. Also the counted parts of the `streams` and `traffic_flows` metrics sections, and
 * of the flows and streams lists (what this node counted and has not written yet).
 */
export class RoutingLedger {
  readonly counters = new ClickCounters();
  /** Daily caps of the streams this node has compiled (docs/routing.md#daily-caps). */
  readonly caps = new DailyCaps(this.counters);
  /** Requests for slugs that route nowhere (`/go` notes them; `traffic_flows.unknown_slugs`). */
  readonly slugMisses = new SlugMisses();
  readonly #storage: Pick<Storage, 'streamDays'>;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #capsMs: number;
  #timer: NodeJS.Timeout | undefined;
  #serial: Promise<unknown> = Promise.resolve();

  /** The ledger as the configuration asks: its caps timer off when a `stats.flush` task reads them. */
  static fromConfig(config: Config, deps: Omit<LedgerOptions, 'capsIntervalMs'>): RoutingLedger {
    return new RoutingLedger({
      ...deps,
      capsIntervalMs: ownTimerMs(config.cron.tasks, 'stats.flush', CAPS_INTERVAL_MS),
    });
  }

  constructor(opts: LedgerOptions) {
    this.#storage = opts.storage;
    this.#log = opts.logger;
    this.#clock = opts.clock ?? systemClock;
    this.#capsMs = opts.capsIntervalMs ?? CAPS_INTERVAL_MS;
    this.counters.onDaysAcked = (days) => this.caps.acked(days);
  }

  /** Starts the caps timer (when no task reads them); its failures are logged, never thrown. */
  start(): void {
    if (this.#capsMs <= 0 || this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.#refreshCapsQuietly(), this.#capsMs);
    this.#timer.unref();
  }

  /**
   * Stops the timer. What was counted is written with the clicks it counted, by the click log's
   * stop (see {@link ClickCounters}).
   */
  stop(): void {
    clearInterval(this.#timer);
  }

  /**
   * Background reads of routing data, one at a time: the caps read-back and the routing service's
   * totals share this queue, so a slow database has at most one of them under way.
   */
  inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(fn, fn);
    this.#serial = run.catch(() => {});
    return run;
  }

  /**
   * Persists what was counted (the `stats.flush` task, and tests): the click log's buffer, which
   * carries the counts with their clicks, then every node's daily cap counts read back. When it
   * ends, every click answered before it started is counted in storage; a refusing database
   * throws, the counts kept for the next time. Returns the clicks written.
   */
  async flush(clickLog: Pick<ClickLog, 'persist'>): Promise<number> {
    const rows = await clickLog.persist();
    await this.refreshCaps();
    return rows;
  }

  /**
   * Reads every capped stream's clicks of its day, as every node has written them (other nodes'
   * clicks on capped streams arrive here); a failure is thrown (the `stats.flush` task's run fails).
   */
  refreshCaps(): Promise<void> {
    return this.inTurn(() => this.caps.refresh(this.#storage, this.#clock.now()));
  }

  /** {@link refreshCaps} for the ledger's own timer: a failure is logged, never thrown. */
  async #refreshCapsQuietly(): Promise<void> {
    try {
      await this.refreshCaps();
    } catch (err) {
      this.#log.warn(
        { err: (err as Error).message },
        'reading daily cap counts failed; read again in a second',
      );
    }
  }

  /** The cap a compiled stream counts its clicks against; undefined when it has none. */
  capOf(streamId: string, cap: number, timezone: string): StreamCap | undefined {
    return this.caps.of(streamId, cap, timezone);
  }

  /** New caps learn their day's count before their flow routes; a failed read counts from zero. */
  async loadNewCaps(): Promise<void> {
    try {
      await this.caps.loadFresh(this.#storage, this.#clock.now());
    } catch (err) {
      this.#log.warn(
        { err: (err as Error).message },
        'reading daily cap counts failed; read again at the next refresh',
      );
    }
  }

  /** A flow as lists show it: with what this node counted and has not written. */
  flowView(f: FlowRecord): FlowRecord {
    const p = this.counters.pendingFlow(f.id);
    return p.clicks || p.no_match || p.bots
      ? {
          ...f,
          clicks: f.clicks + p.clicks,
          no_match: f.no_match + p.no_match,
          bots: f.bots + p.bots,
          uniques: f.uniques + p.uniques,
        }
      : f;
  }

  /**
   * A stream as lists show it: with what this node counted and has not written, and, for a capped
   * stream this node routes, `cap_today` — the clicks of its current day in the flow's time zone
   * as the hot path sees them (null when this node has not compiled its flow: no traffic here).
   */
  streamView(s: StreamRecord): StreamRecord & { cap_today?: number | null } {
    const p = this.counters.pendingStream(s.id);
    const viewed = p.hits ? { ...s, hits: s.hits + p.hits, uniques: s.uniques + p.uniques } : s;
    if (!(s.daily_cap > 0)) return viewed;
    return { ...viewed, cap_today: this.caps.get(s.id)?.used(this.#clock.now()) ?? null };
  }

  /** The `streams` section: `totals` from storage, hits counted by this node since it started. */
  streamsSection(totals: Aggregates['streams']): StreamsSection {
    return {
      total: totals.total,
      active: totals.active,
      hits: this.counters.totalHits,
      uniques: this.counters.totalUniques,
    };
  }

  /**
   * The `traffic_flows` section: `totals` from storage, the routing service's flows without a
   * default stream, and the clicks, no-matches and unknown slugs of this node since it started.
   */
  flowsSection(
    totals: Aggregates['traffic_flows'],
    withoutDefault: FlowsSection['without_default_stream'],
  ): FlowsSection {
    return {
      total: totals.total,
      active: totals.active,
      clicks: this.counters.totalClicks,
      no_match: this.counters.totalNoMatch,
      bots: this.counters.totalBots,
      uniques: this.counters.totalUniques,
      without_default_stream: withoutDefault,
      unknown_slugs: this.slugMisses.section(),
    };
  }
}
