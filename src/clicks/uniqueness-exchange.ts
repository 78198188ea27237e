import type { Config } from '../config/index.ts';
import type { Sighting, SightingStore } from '../storage/index.ts';
import type { Logger } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import type { UniquenessWindow } from './uniqueness.ts';

/** Sightings read per query; a round reads pages until it is level, at most {@link MAX_PAGES_A_ROUND}. */
const PAGE_ROWS = 5000;
/**
 * Open windows read per query at the start: a node loading a million of them holds one page of
 * rows at a time (in one go they took ~850 MB of RSS on top of the windows themselves).
 */
const OPEN_PAGE_ROWS = 10_000;
/** Bounds one round's reading after an outage; the rest follows on the next rounds. */
const MAX_PAGES_A_ROUND = 20;
/** How often a node deletes sightings whose window has ended (any node may; it is idempotent). */
export const SIGHTINGS_PRUNE_EVERY_MS = 10 * 60_000;

export interface UniquenessExchangeOptions {
  window: Pick<UniquenessWindow, 'takeNew' | 'learn' | 'pendingCount'>;
  store: SightingStore;
  serverId: string;
  clock: Clock;
  logger: Logger;
  /**
   * `clicks.flush_interval_ms`. A round (write this node's new sightings, read the others') runs
   * every half of it, so a sighting reaches every other node within one interval plus two round
   * trips; 0: no timer, rounds only when called.
   */
  flushIntervalMs: number;
  /** `routing.uniqueness_ttl_hours`: how long a sighting matters (loaded at start, pruned after). */
  ttlHours: number;
  /** `routing.uniqueness_max_entries`: sightings held at most (loaded at start; kept while the database refuses). */
  maxEntries: number;
  pageRows?: number;
  /** Open windows read per query at the start ({@link OPEN_PAGE_ROWS}). */
  openPageRows?: number;
}

export interface UniquenessExchangeStats {
  sent: number;
  learned: number;
  /** Sightings lost while the database refused them for longer than `maxEntries` of them piled up. */
  unsent: number;
  failed_rounds: number;
  last_error: string | null;
}

/**
 * Makes nodes sharing PostgreSQL agree on uniques (docs/clicks.md#across-nodes). Each node decides at once and alone on the
 * hot path ({@link UniquenessWindow.check}); this class, off the hot path, writes the windows the
 * node opened ({@link UniquenessWindow.takeNew}) to `click_sightings` and feeds the other nodes'
 * to {@link UniquenessWindow.learn}. A starting node first loads the windows still open, so a
 * restart or a new node does not count returning visitors unique again.
 *
 * Overshoot bound: a click on node A at t is written by A's next round (≤ t + interval/2) and
 * read by B's first round after that commit (≤ another interval/2), so two clicks of one visitor
 * on one flow are both counted unique only when they reach different nodes within about one
 * `clicks.flush_interval_ms` (plus two round trips) of each other — at most N − 1 extra uniques
 * per window for N nodes, never fewer uniques than a single node would count (docs/clicks.md).
 *
 * A sighting written twice (a write whose acknowledgement was lost, then retried) is harmless:
 * learning a pair twice keeps one window.
 */
export class UniquenessExchange {
  readonly #o: UniquenessExchangeOptions;
  readonly #ttlMs: number;
  readonly #page: number;
  #cursor: string | undefined;
  #unsentRows: Sighting[] = [];
  #timer: NodeJS.Timeout | undefined;
  #chain: Promise<unknown> = Promise.resolve();
  /** The first round after the start prunes: a node restarted more often than the interval still does. */
  #lastPrune = Number.NEGATIVE_INFINITY;
  #stopped = false;
  readonly #stats: UniquenessExchangeStats = {
    sent: 0,
    learned: 0,
    unsent: 0,
    failed_rounds: 0,
    last_error: null,
  };

  /** The exchange as `clicks` and `routing` ask: a round every half `clicks.flush_interval_ms`. */
  static fromConfig(
    config: Config,
    deps: Pick<UniquenessExchangeOptions, 'window' | 'store' | 'serverId' | 'clock' | 'logger'>,
  ): UniquenessExchange {
    return new UniquenessExchange({
      ...deps,
      flushIntervalMs: config.clicks.flush_interval_ms,
      ttlHours: config.routing.uniqueness_ttl_hours,
      maxEntries: config.routing.uniqueness_max_entries,
    });
  }

  constructor(opts: UniquenessExchangeOptions) {
    this.#o = opts;
    this.#ttlMs = opts.ttlHours * 3_600_000;
    this.#page = opts.pageRows ?? PAGE_ROWS;
  }

  /** Loads the windows still open (retried by later rounds if the database refuses), then starts the rounds. */
  async start(): Promise<void> {
    await this.#background();
    const every = Math.floor(this.#o.flushIntervalMs / 2);
    if (every <= 0 || this.#stopped) return;
    this.#timer = setInterval(() => void this.#background(), every);
    this.#timer.unref();
  }

  /** One round: write this node's new sightings, learn the others'. Throws what stopped it; rounds never overlap. */
  round(): Promise<{ sent: number; learned: number }> {
    const run = this.#chain.then(() => this.#roundOnce());
    this.#chain = run.catch(() => {});
    return run;
  }

  /**
   * Stops the rounds and sends what this node saw last: one write, after any round under way (a
   * stopping node has nothing more to learn or prune). Best effort, for at most `timeoutMs`: a
   * node stopping does not wait on a refusing or slow database past that; what was not sent is
   * logged (the other nodes may count those visitors unique once more).
   */
  async stop(timeoutMs?: number): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const run = this.#chain.then(() => this.#sendLast());
    this.#chain = run.catch(() => {});
    const last = run.then(
      () => true,
      (err: unknown) => {
        this.#o.logger.warn(
          { err: (err as Error).message, unsent: this.#unsent() },
          'uniqueness exchange: the last sightings could not be sent at the stop',
        );
        return true;
      },
    );
    if (timeoutMs === undefined) {
      await last;
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((r) => {
      timer = setTimeout(() => r(false), timeoutMs);
    });
    const done = await Promise.race([last, late]);
    clearTimeout(timer);
    if (!done)
      this.#o.logger.warn(
        { timeout_ms: timeoutMs, unsent: this.#unsent() },
        'uniqueness exchange: the last sightings were not sent by the end of the stop',
      );
  }

  /** Sightings not written: queued after a failed send, and those the window has not handed over yet. */
  #unsent(): number {
    return this.#unsentRows.length + this.#o.window.pendingCount;
  }

  /** The stop's write: this node's new sightings, and those still unsent. */
  async #sendLast(): Promise<void> {
    this.#queue(this.#o.window.takeNew());
    if (this.#unsentRows.length === 0) return;
    const sent = await this.#o.store.add(this.#o.serverId, this.#unsentRows);
    this.#unsentRows = [];
    this.#stats.sent += sent;
  }

  stats(): UniquenessExchangeStats {
    return { ...this.#stats };
  }

  async #background(): Promise<void> {
    try {
      await this.round();
    } catch (err) {
      this.#o.logger.warn(
        { err: (err as Error).message, unsent: this.#unsent() },
        'uniqueness exchange failed; its sightings are kept and sent again',
      );
    }
  }

  async #roundOnce(): Promise<{ sent: number; learned: number }> {
    const { store, window, serverId, clock } = this.#o;
    try {
      let learned = 0;
      let cursor = this.#cursor;
      const loading = cursor === undefined;
      if (cursor === undefined) {
        // Oldest first, as the window keeps its entries (each ends after the one before), from
        // where only the newest maxEntries remain; `after` follows on from the first page's snapshot.
        const since = clock.now() - this.#ttlMs;
        const max = this.#o.maxEntries;
        const pageRows = this.#o.openPageRows ?? OPEN_PAGE_ROWS;
        let open = await store.open(since, Math.min(pageRows, max), await store.openStart(since, max));
        const top = open.cursor;
        for (;;) {
          window.learn(open.rows);
          learned += open.rows.length;
          if (open.next === undefined || learned >= max) break;
          open = await store.open(since, Math.min(pageRows, max - learned), open.next);
        }
        cursor = top;
        this.#cursor = top;
      }
      this.#queue(window.takeNew());
      let sent = 0;
      if (this.#unsentRows.length > 0) {
        // Rounds never overlap and only a round takes new sightings: the queue is still this one.
        sent = await store.add(serverId, this.#unsentRows);
        this.#unsentRows = [];
        this.#stats.sent += sent;
      }
      for (let page = 0; page < MAX_PAGES_A_ROUND; page++) {
        const got = await store.after(cursor, serverId, this.#page);
        if (got.rows.length > 0) window.learn(got.rows);
        learned += got.rows.length;
        cursor = got.cursor;
        this.#cursor = cursor;
        if (!got.more) break;
      }
      this.#stats.learned += learned;
      // Not in the loading round, which a start waits for.
      if (!loading) await this.#prune();
      return { sent, learned };
    } catch (err) {
      this.#stats.failed_rounds++;
      this.#stats.last_error = (err as Error).message;
      throw err;
    }
  }

  /** Keeps what could not be sent yet, the oldest given up past `maxEntries` (counted). */
  #queue(rows: Sighting[]): void {
    if (rows.length === 0) return;
    this.#unsentRows = this.#unsentRows.length === 0 ? rows : this.#unsentRows.concat(rows);
    const over = this.#unsentRows.length - this.#o.maxEntries;
    if (over > 0) {
      this.#unsentRows = this.#unsentRows.slice(over);
      this.#stats.unsent += over;
    }
  }

  async #prune(): Promise<void> {
    const now = this.#o.clock.now();
    if (now - this.#lastPrune < SIGHTINGS_PRUNE_EVERY_MS) return;
    this.#lastPrune = now;
    const gone = await this.#o.store.prune(now - this.#ttlMs);
    if (gone > 0) this.#o.logger.debug({ gone }, 'expired uniqueness sightings deleted');
  }
}
