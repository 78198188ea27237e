import { QuantileSketch } from './quantile-sketch.ts';

/** The seed's recorder entry: what the ACP shows per route and per list response. */
export interface RecorderEntry {
  count: number;
  errors: number;
  avg_ms: number;
  p95_ms: number;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

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
  readonly sketch = new QuantileSketch();
  /** Pre-escaped exposition label set for this recorder, e.g. `route="/go/:slug"`. */
  labels = '';

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.buckets = new Float64Array(bounds.length + 1);
  }

  record(durationMs: number, isError: boolean): void {
    const ms = durationMs > 0 ? durationMs : 0;
    this.count++;
    this.sum += ms;
    if (isError) this.errors++;
    this.sketch.add(ms);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && ms > bounds[i]!) i++;
    this.buckets[i]!++;
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
