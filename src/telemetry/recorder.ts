import {
  DEFAULT_RELATIVE_ACCURACY,
  type LogMapping,
  MAX_VALUE,
  MIN_VALUE,
  mappingFor,
  QuantileSketch,
} from './quantile-sketch.ts';

/** The seed's recorder entry: what the ACP shows per route and per list response. */
export interface RecorderEntry {
  count: number;
  errors: number;
  avg_ms: number;
  p95_ms: number;
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
  sum = 0;
  /** Upper bounds in ms; frozen, shared by every recorder of a group. */
  readonly bounds: readonly number[];
  /** Per-bucket (non-cumulative) counts; the last slot is +Inf. */
  readonly buckets: Float64Array;
  readonly sketch = new QuantileSketch(DEFAULT_RELATIVE_ACCURACY);
  /** Pre-escaped exposition label set for this recorder, e.g. `route="/go/:slug"`. */
  labels = '';
  readonly #mapping: LogMapping;
  readonly #hints: Uint8Array;
  readonly #firstHint: number;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.buckets = new Float64Array(bounds.length + 1);
    this.#mapping = mappingFor(DEFAULT_RELATIVE_ACCURACY);
    const h = bucketHints(bounds, this.#mapping);
    this.#hints = h.hints;
    this.#firstHint = h.first;
  }

  record(durationMs: number, isError: boolean): void {
    const ms = durationMs > 0 ? durationMs : 0;
    this.count++;
    this.sum += ms;
    if (isError) this.errors++;
    const bounds = this.bounds;
    let b = 0;
    if (ms > MIN_VALUE) {
      const k = this.#mapping.index(ms > MAX_VALUE ? MAX_VALUE : ms);
      this.sketch.addIndexed(ms, k);
      b = this.#hints[k - this.#firstHint]!;
    } else {
      this.sketch.addIndexed(ms, undefined);
    }
    // `le` is inclusive: a value equal to a bound belongs to that bound's bucket.
    while (b < bounds.length && ms > bounds[b]!) b++;
    this.buckets[b]!++;
  }

  quantile(q: number): number {
    return this.sketch.quantile(q);
  }

  entry(): RecorderEntry {
    return {
      count: this.count,
      errors: this.errors,
      avg_ms: this.count === 0 ? 0 : round3(this.sum / this.count),
      p95_ms: round3(this.sketch.quantile(0.95)),
    };
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
  readonly #byKey = new Map<string, Recorder>();

  constructor(label: string, bounds: readonly number[]) {
    this.label = label;
    this.bounds = Object.freeze([...bounds]);
  }

  get(key: string): Recorder {
    let r = this.#byKey.get(key);
    if (r === undefined) {
      r = new Recorder(this.bounds);
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

  /** `{key: {count, errors, avg_ms, p95_ms}}`, keys sorted for stable output. */
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
