import {
  DEFAULT_RELATIVE_ACCURACY,
  type LogMapping,
  MAX_VALUE,
  MIN_VALUE,
  mappingFor,
  QuantileSketch,
} from './quantile-sketch.ts';

/**
 * How a recorded call ended. Routes tell a caller's mistake (4xx) from their own failure (5xx);
 * everything else that fails (a query, a task, an outgoing call) counts as a server error.
 */
export const OK = 0;
export const CLIENT_ERROR = 1;
export const SERVER_ERROR = 2;
export type Outcome = typeof OK | typeof CLIENT_ERROR | typeof SERVER_ERROR;

/** The outcome of an HTTP answer by its status code. */
export function outcomeOf(status: number): Outcome {
  return status >= 500 ? SERVER_ERROR : status >= 400 ? CLIENT_ERROR : OK;
}

/** The last few minutes of a recorder (`recent`, docs/telemetry.md#recent-windows). */
export interface RecentEntry {
  window_s: number;
  count: number;
  errors: number;
  server_errors: number;
  avg_ms: number;
  p95_ms: number;
}

/**
 * The seed's recorder entry, with its errors split into client and server ones and the recent
 * window.
 */
export interface RecorderEntry {
  count: number;
  errors: number;
  client_errors: number;
  server_errors: number;
  avg_ms: number;
  p95_ms: number;
  /** Present when the recorder keeps a window (routes and tasks do). */
  recent?: RecentEntry;
}

/**
 * Time cut into slots for the recent windows of a group of recorders. `current` is the slot
 * number recorders write into; it moves when {@link RecentWindow.sync} reads the clock (a timer
 * of the telemetry hub, and every read of a window), so `record()` never reads a clock itself.
 */
export class RecentWindow {
  readonly slotMs: number;
  readonly slots: number;
  readonly #now: () => number;
  current: number;

  constructor(opts: { slotMs: number; slots: number; now: () => number }) {
    this.slotMs = opts.slotMs;
    this.slots = opts.slots;
    this.#now = opts.now;
    this.current = Math.floor(opts.now() / opts.slotMs);
  }

  /** Seconds the window spans: the slot under way and the ones before it. */
  get seconds(): number {
    return (this.slotMs * this.slots) / 1000;
  }

  sync(): number {
    const slot = Math.floor(this.#now() / this.slotMs);
    // A clock stepping backwards must not reopen old slots: the window only moves forward.
    if (slot > this.current) this.current = slot;
    return this.current;
  }
}

/** One slot of a recent window: the same figures as the recorder, for that stretch of time only. */
class Slot {
  epoch = -1;
  count = 0;
  errors = 0;
  serverErrors = 0;
  sum = 0;
  readonly sketch = new QuantileSketch(DEFAULT_RELATIVE_ACCURACY);

  reset(epoch: number): void {
    this.epoch = epoch;
    this.count = 0;
    this.errors = 0;
    this.serverErrors = 0;
    this.sum = 0;
    this.sketch.clear();
  }
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * For each sketch bucket, how many histogram bounds lie below every value it can hold: the
 * histogram bucket of a value is then that hint plus at most a comparison or two, instead of a scan
 * of all bounds. Built once per bounds array (recorders of a group share it).
 */
interface BucketHints {
  first: number;
  hints: Uint8Array;
}
const hintCache = new WeakMap<readonly number[], BucketHints>();
function bucketHints(bounds: readonly number[], mapping: LogMapping): BucketHints {
  let h = hintCache.get(bounds);
  if (h === undefined) {
    const first = mapping.index(MIN_VALUE) - 1;
    const last = mapping.index(MAX_VALUE) + 1;
    const hints = new Uint8Array(last - first + 1);
    let b = 0;
    for (let k = first; k <= last; k++) {
      const low = mapping.lowerBound(k);
      while (b < bounds.length && bounds[b]! < low) b++;
      hints[k - first] = Math.min(b, 255);
    }
    h = { first, hints };
    hintCache.set(bounds, h);
  }
  return h;
}

/**
 * Latency and error statistics for one thing measured (a route, a query kind, a task).
 * One {@link Recorder.record} call updates the JSON view (count, errors, average, p95 from a
 * relative-error sketch) and the cumulative histogram the exposition renders, so the two views
 * are the same counters and cannot disagree.
 */
export class Recorder {
  count = 0;
  errors = 0;
  clientErrors = 0;
  serverErrors = 0;
  /** The sum in ms as added up; it drifts (`4573.646766999998`): read it through {@link sum}. */
  #sum = 0;
  /** Upper bounds in ms; frozen, shared by every recorder of a group. */
  readonly bounds: readonly number[];
  /** Per-bucket (non-cumulative) counts; the last slot is +Inf. */
  readonly buckets: Float64Array;
  /**
   * The p95 sketch since start. With a recent window it holds only what has left the window's
   * slots: each value is added to one sketch (its slot's), and a slot is merged in here when it is
   * reused, so the window costs `record()` almost nothing; reads merge the slots back in.
   */
  readonly #sketch = new QuantileSketch(DEFAULT_RELATIVE_ACCURACY);
  /** Pre-escaped exposition label set for this recorder, e.g. `route="/go/:slug"`. */
  labels = '';
  readonly #mapping: LogMapping;
  readonly #hints: Uint8Array;
  readonly #firstHint: number;
  readonly #window: RecentWindow | undefined;
  /** The ring of the recent window (empty without one); slot `epoch % length` holds that epoch. */
  readonly #slots: Slot[];
  /** The slot written last, kept so that a record in the same slot costs one comparison. */
  #slot: Slot | undefined;

  constructor(bounds: readonly number[], window?: RecentWindow) {
    this.bounds = bounds;
    this.#window = window;
    this.#slots = window === undefined ? [] : Array.from({ length: window.slots }, () => new Slot());
    this.buckets = new Float64Array(bounds.length + 1);
    this.#mapping = mappingFor(DEFAULT_RELATIVE_ACCURACY);
    const h = bucketHints(bounds, this.#mapping);
    this.#hints = h.hints;
    this.#firstHint = h.first;
  }

  /**
   * Sum of the recorded durations in ms, to the microsecond: the JSON's `duration_ms_sum` and every
   * exposition `_sum` print this same number (the two views never disagree). Rounded when read,
   * not when recorded: `record()` is on every request's path and has a 50 ns budget.
   */
  get sum(): number {
    return Math.round(this.#sum * 1000) / 1000;
  }

  /** Records one call; `outcome` is {@link OK}, {@link CLIENT_ERROR} or {@link SERVER_ERROR}. */
  record(durationMs: number, outcome: Outcome): void {
    const ms = durationMs > 0 ? durationMs : 0;
    this.count++;
    this.#sum += ms;
    if (outcome !== OK) {
      this.errors++;
      if (outcome === SERVER_ERROR) this.serverErrors++;
      else this.clientErrors++;
    }
    const k = ms > MIN_VALUE ? this.#mapping.index(ms > MAX_VALUE ? MAX_VALUE : ms) : undefined;
    if (this.#window === undefined) this.#sketch.addIndexed(ms, k);
    else this.#recordRecent(ms, k, outcome, this.#window.current);
    const bounds = this.bounds;
    let b = k === undefined ? 0 : this.#hints[k - this.#firstHint]!;
    // `le` is inclusive: a value equal to a bound belongs to that bound's bucket.
    while (b < bounds.length && ms > bounds[b]!) b++;
    this.buckets[b]!++;
  }

  #recordRecent(ms: number, k: number | undefined, outcome: Outcome, epoch: number): void {
    let slot = this.#slot;
    if (slot === undefined || slot.epoch !== epoch) {
      slot = this.#slots[epoch % this.#slots.length]!;
      if (slot.epoch !== epoch) {
        this.#sketch.merge(slot.sketch);
        slot.reset(epoch);
      }
      this.#slot = slot;
    }
    slot.count++;
    slot.sum += ms;
    if (outcome !== OK) {
      slot.errors++;
      if (outcome === SERVER_ERROR) slot.serverErrors++;
    }
    slot.sketch.addIndexed(ms, k);
  }

  /** A quantile of every value recorded since start. */
  quantile(q: number): number {
    if (this.#window === undefined) return this.#sketch.quantile(q);
    const all = new QuantileSketch(DEFAULT_RELATIVE_ACCURACY);
    all.merge(this.#sketch);
    for (const slot of this.#slots) all.merge(slot.sketch);
    return all.quantile(q);
  }

  /** The recent window's figures (undefined without a window), merged from its live slots. */
  recent(): RecentEntry | undefined {
    const w = this.#window;
    if (w === undefined) return undefined;
    const now = w.sync();
    const merged = new QuantileSketch(DEFAULT_RELATIVE_ACCURACY);
    let count = 0;
    let errors = 0;
    let serverErrors = 0;
    let sum = 0;
    for (const slot of this.#slots) {
      if (slot.epoch <= now - w.slots || slot.epoch > now || slot.count === 0) continue;
      count += slot.count;
      errors += slot.errors;
      serverErrors += slot.serverErrors;
      sum += slot.sum;
      merged.merge(slot.sketch);
    }
    return {
      window_s: w.seconds,
      count,
      errors,
      server_errors: serverErrors,
      avg_ms: count === 0 ? 0 : round3(sum / count),
      p95_ms: round3(merged.quantile(0.95)),
    };
  }

  entry(): RecorderEntry {
    const out: RecorderEntry = {
      count: this.count,
      errors: this.errors,
      client_errors: this.clientErrors,
      server_errors: this.serverErrors,
      avg_ms: this.count === 0 ? 0 : round3(this.sum / this.count),
      p95_ms: round3(this.quantile(0.95)),
    };
    const recent = this.recent();
    if (recent !== undefined) out.recent = recent;
    return out;
  }

  /** Cumulative counts per bound, the last one (+Inf) equal to `count`. */
  cumulative(): number[] {
    const out = new Array<number>(this.buckets.length);
    let acc = 0;
    for (let i = 0; i < this.buckets.length; i++) out[i] = acc += this.buckets[i]!;
    return out;
  }

  /** `{"5": n, ..., "+Inf": count}` — the JSON shape of cumulative buckets. */
  bucketsObject(): Record<string, number> {
    const cum = this.cumulative();
    const out: Record<string, number> = {};
    this.bounds.forEach((b, i) => {
      out[String(b)] = cum[i]!;
    });
    out['+Inf'] = cum.at(-1)!;
    return out;
  }
}

/**
 * Recorders keyed by a bounded name (a route template, a task name), all with the same bounds.
 * The label name is what the exposition uses (`route`, `task`).
 */
export class RecorderGroup {
  readonly bounds: readonly number[];
  readonly label: string;
  /** The recent window every recorder of the group keeps, when the group has one. */
  readonly window: RecentWindow | undefined;
  readonly #byKey = new Map<string, Recorder>();

  constructor(label: string, bounds: readonly number[], window?: RecentWindow) {
    this.label = label;
    this.bounds = Object.freeze([...bounds]);
    this.window = window;
  }

  get(key: string): Recorder {
    let r = this.#byKey.get(key);
    if (r === undefined) {
      r = new Recorder(this.bounds, this.window);
      r.labels = `${this.label}="${escapeLabelValue(key)}"`;
      this.#byKey.set(key, r);
    }
    return r;
  }

  has(key: string): boolean {
    return this.#byKey.has(key);
  }

  get size(): number {
    return this.#byKey.size;
  }

  entries(): IterableIterator<[string, Recorder]> {
    return this.#byKey.entries();
  }

  /** `{key: {count, errors, client_errors, server_errors, avg_ms, p95_ms, recent?}}`, keys sorted. */
  snapshot(): Record<string, RecorderEntry> {
    const out: Record<string, RecorderEntry> = {};
    for (const key of [...this.#byKey.keys()].sort()) out[key] = this.#byKey.get(key)!.entry();
    return out;
  }
}

/** Escapes a label value per the exposition formats: backslash, double quote and newline. */
export function escapeLabelValue(v: string): string {
  return /[\\"\n]/.test(v) ? v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : v;
}
