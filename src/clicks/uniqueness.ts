import type { Clock } from '../time/index.ts';

/** A visitor first seen on a flow, as nodes tell each other through storage. */
export interface SeenVisitor {
  flow_id: string;
  /** The visitor key (visitor-key.ts): a 52-bit integer. */
  visitor_key: number;
  /** Milliseconds since the epoch: the click that opened the visitor's window. */
  first_seen_at: number;
}

export interface UniquenessOptions {
  clock: Clock;
  /** `routing.uniqueness_ttl_hours`. */
  ttlHours: number;
  /** `routing.uniqueness_max_entries`: (flow, visitor) pairs held at most. */
  maxEntries: number;
  /**
   * Keep the pairs first seen here for {@link UniquenessWindow.takeNew} (nodes sharing storage).
   * A single node has no one to tell: off, nothing is kept for it.
   */
  share: boolean;
}

const INITIAL_CAPACITY = 1024;

/**
 * "A click is unique when the same visitor has not clicked the same flow within
 * `routing.uniqueness_ttl_hours`" (docs/clicks.md#uniqueness), per node, in memory, bounded.
 *
 * A unique click opens a window of the TTL for its (flow, visitor) pair; clicks inside it are not
 * unique, the first click after it is and opens the next. (The window does not slide with every
 * click: a visitor who clicks every hour counts one unique a day, and only first sightings need
 * to travel between nodes.) Resolution: one second of the injected clock.
 *
 * Memory: per flow a `Map` of visitor key → window end, plus a ring of pairs in the order their
 * windows were opened, so expired pairs leave from the front at O(1) each (a `Map` used as a queue
 * slows down as deleted slots pile up at its front). At `maxEntries` the oldest pair leaves before
 * its window ends — its visitor's next click there counts unique again — and is counted in
 * {@link evictedEarly}. 60–80 bytes a pair, key included (docs/clicks.md).
 *
 * Across nodes: {@link takeNew} hands over the pairs this node opened since the last call, and
 * {@link learn} takes other nodes' pairs. Where two nodes both opened a window for one pair before
 * hearing of the other, both counted a unique (the overshoot) and both keep the earlier window, so
 * they agree from then on.
 */
export class UniquenessWindow {
  readonly #clock: Clock;
  readonly #ttl: number;
  readonly #max: number;
  readonly #share: boolean;
  /** Seconds are counted from here, so window ends stay small integers (V8 keeps them unboxed). */
  readonly #base: number;
  readonly #flows = new Map<string, Map<number, number>>();
  #ringFlow: (string | undefined)[];
  #ringKey: Float64Array;
  #ringEnd: Int32Array;
  #head = 0;
  #size = 0;
  #pending: SeenVisitor[] = [];
  #unshared = 0;
  #evictedEarly = 0;

  constructor(options: UniquenessOptions) {
    this.#clock = options.clock;
    this.#ttl = Math.round(options.ttlHours * 3600);
    this.#max = options.maxEntries;
    this.#share = options.share;
    this.#base = Math.floor(options.clock.now() / 1000);
    const capacity = Math.min(INITIAL_CAPACITY, this.#max);
    this.#ringFlow = new Array(capacity).fill(undefined);
    this.#ringKey = new Float64Array(capacity);
    this.#ringEnd = new Int32Array(capacity);
  }

  /**
   * Whether this click of the visitor on the flow is unique; a unique click opens the pair's
   * window (and, when sharing, is kept for {@link takeNew}).
   */
  check(flowId: string, visitorKey: number): boolean {
    const nowMs = this.#clock.now();
    const now = this.#seconds(nowMs);
    const end = this.#flows.get(flowId)?.get(visitorKey);
    if (end !== undefined && end > now) return false;
    this.#sweep(now);
    this.#open(flowId, visitorKey, now + this.#ttl, now);
    if (this.#share) {
      if (this.#pending.length < this.#max)
        this.#pending.push({ flow_id: flowId, visitor_key: visitorKey, first_seen_at: nowMs });
      else this.#unshared++;
    }
    return true;
  }

  /**
   * Whether a click would be unique, changing nothing (the routing simulator,
   * docs/routing.md#simulator).
   */
  peek(flowId: string, visitorKey: number): boolean {
    const end = this.#flows.get(flowId)?.get(visitorKey);
    return end === undefined || end <= this.#seconds(this.#clock.now());
  }

  /** First sightings opened here and not yet taken by {@link takeNew}. */
  get pendingCount(): number {
    return this.#pending.length;
  }

  /** The pairs whose windows this node opened since the last call, oldest first; for other nodes. */
  takeNew(): SeenVisitor[] {
    this.#sweep(this.#seconds(this.#clock.now()));
    const out = this.#pending;
    this.#pending = [];
    return out;
  }

  /**
   * Other nodes' first sightings. A pair unknown here (or whose window here has ended) takes the
   * other node's window; a pair open on both keeps whichever window opened first.
   */
  learn(seen: Iterable<SeenVisitor>): void {
    const now = this.#seconds(this.#clock.now());
    this.#sweep(now);
    for (const s of seen) {
      const end = this.#seconds(s.first_seen_at) + this.#ttl;
      if (end <= now) continue;
      const local = this.#flows.get(s.flow_id)?.get(s.visitor_key);
      if (local !== undefined && local > now && local <= end) continue;
      this.#open(s.flow_id, s.visitor_key, end, now);
    }
  }

  /** (flow, visitor) pairs held. */
  get size(): number {
    let n = 0;
    for (const visitors of this.#flows.values()) n += visitors.size;
    return n;
  }
  /** `routing.uniqueness_max_entries`: pairs held at most. */
  get maxEntries(): number {
    return this.#max;
  }
  /**
   * Pairs that had to leave before their window ended, because `maxEntries` were held: each may
   * count its visitor's next click on that flow unique again. Shown as `clicks.uniqueness` in system
   * metrics and `P_uniqueness_early_evictions_total` (docs/telemetry.md).
   */
  get evictedEarly(): number {
    return this.#evictedEarly;
  }
  /** First sightings not kept for sharing because {@link takeNew} was not called for `maxEntries` of them. */
  get unshared(): number {
    return this.#unshared;
  }

  #seconds(ms: number): number {
    return Math.floor(ms / 1000) - this.#base;
  }

  #open(flowId: string, key: number, end: number, now: number): void {
    if (this.#size === this.#ringEnd.length) {
      if (this.#size < this.#max) this.#grow();
      else if (this.#evictHead(now)) this.#evictedEarly++;
    }
    // Looked up after any eviction: evicting a flow's last pair drops the flow's map.
    let visitors = this.#flows.get(flowId);
    if (visitors === undefined) {
      visitors = new Map();
      this.#flows.set(flowId, visitors);
    }
    visitors.set(key, end);
    const tail = (this.#head + this.#size) % this.#ringEnd.length;
    this.#ringFlow[tail] = flowId;
    this.#ringKey[tail] = key;
    this.#ringEnd[tail] = end;
    this.#size++;
  }

  /** Expired pairs leave from the front; each pair leaves once, so this is O(1) a click on average. */
  #sweep(now: number): void {
    while (this.#size > 0 && this.#ringEnd[this.#head]! <= now) this.#evictHead(now);
  }

  /** Removes the oldest ring slot; true when the pair it held was still open. */
  #evictHead(now: number): boolean {
    const h = this.#head;
    const flowId = this.#ringFlow[h]!;
    const key = this.#ringKey[h]!;
    const end = this.#ringEnd[h]!;
    this.#ringFlow[h] = undefined;
    this.#head = (h + 1) % this.#ringEnd.length;
    this.#size--;
    const visitors = this.#flows.get(flowId);
    // A pair reopened or learned since has a later slot of its own; this one no longer speaks for it.
    if (visitors === undefined || visitors.get(key) !== end) return false;
    visitors.delete(key);
    if (visitors.size === 0) this.#flows.delete(flowId);
    return end > now;
  }

  #grow(): void {
    const old = this.#ringEnd.length;
    const capacity = Math.min(old * 2, this.#max);
    const flows = new Array<string | undefined>(capacity).fill(undefined);
    const keys = new Float64Array(capacity);
    const ends = new Int32Array(capacity);
    for (let i = 0; i < this.#size; i++) {
      const from = (this.#head + i) % old;
      flows[i] = this.#ringFlow[from];
      keys[i] = this.#ringKey[from]!;
      ends[i] = this.#ringEnd[from]!;
    }
    this.#ringFlow = flows;
    this.#ringKey = keys;
    this.#ringEnd = ends;
    this.#head = 0;
  }
}
