import type { Storage } from '../storage/index.ts';
import type { ClickCounters } from './click-counters.ts';
import { localTime } from './rules.ts';

/**
 * One stream's daily cap (docs/routing.md#daily-caps): the clicks of its current day in the flow's
 * time zone are what storage said after the last flush (every node's flushed clicks) plus what this
 * node counted and has not had acknowledged. Shared by every compiled version of the stream, so a
 * recompile keeps its counts. The hot path reads {@link reached} and calls {@link count}: a map
 * lookup or two.
 */
export class StreamCap {
  readonly streamId: string;
  cap: number;
  timezone: string;
  #counters: ClickCounters;
  /** Flushed clicks of `#day` by every node, as last read. */
  #day = '';
  #flushed = 0;

  constructor(streamId: string, cap: number, timezone: string, counters: ClickCounters) {
    this.streamId = streamId;
    this.cap = cap;
    this.timezone = timezone;
    this.#counters = counters;
  }

  /** Clicks on the day of `at` so far, as this node knows them. */
  used(at: number): number {
    const day = localTime(at, this.timezone).day;
    return (day === this.#day ? this.#flushed : 0) + this.#counters.pendingDay(this.streamId, day);
  }

  reached(at: number): boolean {
    return this.used(at) >= this.cap;
  }

  /** A person's click this stream took. */
  count(at: number): void {
    this.#counters.dayHit(this.streamId, localTime(at, this.timezone).day);
  }

  /** The day to read back, and what was read. */
  dayAt(at: number): string {
    return localTime(at, this.timezone).day;
  }
  settle(day: string, flushed: number): void {
    this.#day = day;
    this.#flushed = flushed;
  }
  /** This node's clicks storage just acknowledged: no longer pending, not yet read back. */
  acked(day: string, clicks: number): void {
    if (day === this.#day) this.#flushed += clicks;
    else this.settle(day, clicks);
  }
}

/**
 * The capped streams this node routes: one {@link StreamCap} per stream, made when its flow is
 * compiled, refreshed from storage after each counter flush. How far a cap can be overshot:
 * every other node's clicks of one flush interval (plus the read that follows it), since a node
 * learns them only then; on a single node, never.
 */
export class DailyCaps {
  readonly #caps = new Map<string, StreamCap>();
  /** Caps made since the last {@link loadFresh}: their day's count is not known yet. */
  #fresh: StreamCap[] = [];
  readonly #counters: ClickCounters;

  constructor(counters: ClickCounters) {
    this.#counters = counters;
  }

  /** The cap of a stream as just compiled; undefined (and forgotten) when it has none. */
  of(streamId: string, cap: number, timezone: string): StreamCap | undefined {
    if (cap <= 0) {
      this.#caps.delete(streamId);
      return undefined;
    }
    let c = this.#caps.get(streamId);
    if (c === undefined) {
      c = new StreamCap(streamId, cap, timezone, this.#counters);
      this.#caps.set(streamId, c);
      this.#fresh.push(c);
    } else {
      c.cap = cap;
      c.timezone = timezone;
    }
    return c;
  }

  /** A counter batch was acknowledged: its day counts move from pending to flushed at once. */
  acked(days: readonly { stream_id: string; day: string; clicks: number }[]): void {
    for (const d of days) this.#caps.get(d.stream_id)?.acked(d.day, d.clicks);
  }

  get size(): number {
    return this.#caps.size;
  }

  /** The cap of a stream this node routes (its flow compiled), if it has one. */
  get(streamId: string): StreamCap | undefined {
    return this.#caps.get(streamId);
  }

  /**
   * Reads the day's count of the caps made since the last call: a flow is compiled, then its caps
   * learn what every node (this one before a restart included) already counted, before it routes.
   */
  loadFresh(storage: Pick<Storage, 'streamDays'>, now: number): Promise<void> {
    if (this.#fresh.length === 0) return Promise.resolve();
    const fresh = this.#fresh;
    this.#fresh = [];
    return this.#read(storage, now, fresh);
  }

  /** Reads every capped stream's clicks of its current day from storage (after a flush). */
  refresh(storage: Pick<Storage, 'streamDays'>, now: number): Promise<void> {
    this.#fresh = [];
    return this.#read(storage, now, [...this.#caps.values()]);
  }

  async #read(storage: Pick<Storage, 'streamDays'>, now: number, caps: StreamCap[]): Promise<void> {
    if (caps.length === 0) return;
    const pairs = caps.map((c) => ({ stream_id: c.streamId, day: c.dayAt(now) }));
    const counts = await storage.streamDays(pairs);
    for (const [i, c] of caps.entries()) {
      const p = pairs[i]!;
      c.settle(p.day, counts.get(`${p.stream_id}\u0000${p.day}`) ?? 0);
    }
  }
}
