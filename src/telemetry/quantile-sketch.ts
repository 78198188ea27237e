/**
 * A relative-error quantile sketch in the manner of DDSketch (Masson, Rim, Lee, VLDB 2019,
 * https://arxiv.org/abs/1908.10693): values fall into logarithmic buckets of ratio gamma, so any
 * quantile is answered within `relativeAccuracy` of the true value, whatever the distribution.
 *
 * Memory is bounded: the dense store only spans the buckets between the smallest and the largest
 * value seen, and values are clamped to [MIN_VALUE, MAX_VALUE] (1 ns to ~11.5 days in ms), so at
 * most ~1,900 buckets at the default accuracy, typically a few hundred.
 */
export const DEFAULT_RELATIVE_ACCURACY = 0.0075;
const MIN_VALUE = 1e-6;
const MAX_VALUE = 1e9;
const INITIAL_SPAN = 64;

export class QuantileSketch {
  readonly relativeAccuracy: number;
  readonly #gamma: number;
  readonly #invLnGamma: number;
  #counts = new Float64Array(0);
  #offset = 0;
  #zero = 0;
  #count = 0;
  #min = Number.POSITIVE_INFINITY;
  #max = Number.NEGATIVE_INFINITY;

  constructor(relativeAccuracy = DEFAULT_RELATIVE_ACCURACY) {
    if (!(relativeAccuracy > 0 && relativeAccuracy < 1))
      throw new RangeError('relativeAccuracy must be in (0, 1)');
    this.relativeAccuracy = relativeAccuracy;
    this.#gamma = (1 + relativeAccuracy) / (1 - relativeAccuracy);
    this.#invLnGamma = 1 / Math.log(this.#gamma);
  }

  get count(): number {
    return this.#count;
  }

  add(value: number): void {
    this.#count++;
    if (value < this.#min) this.#min = value;
    if (value > this.#max) this.#max = value;
    if (!(value > MIN_VALUE)) {
      this.#zero++;
      return;
    }
    const index = Math.ceil(Math.log(value > MAX_VALUE ? MAX_VALUE : value) * this.#invLnGamma);
    const slot = index - this.#offset;
    if (slot >= 0 && slot < this.#counts.length) this.#counts[slot]!++;
    else this.#grow(index);
  }

  /** The value at quantile q (0..1); 0 when empty. */
  quantile(q: number): number {
    if (this.#count === 0) return 0;
    const rank = q * (this.#count - 1);
    let seen = this.#zero;
    if (seen > rank) return Math.max(this.#min, 0);
    const counts = this.#counts;
    for (let i = 0; i < counts.length; i++) {
      seen += counts[i]!;
      if (seen > rank) {
        const estimate = (2 * this.#gamma ** (i + this.#offset)) / (this.#gamma + 1);
        return Math.min(Math.max(estimate, this.#min), this.#max);
      }
    }
    return this.#max;
  }

  /** Widens the dense store to include `index` (doubling, so growth is amortised). */
  #grow(index: number): void {
    const old = this.#counts;
    if (old.length === 0) {
      this.#counts = new Float64Array(INITIAL_SPAN);
      this.#offset = index - (INITIAL_SPAN >> 1);
    } else {
      const lo = Math.min(index, this.#offset);
      const hi = Math.max(index, this.#offset + old.length - 1);
      const span = Math.max(hi - lo + 1, old.length * 2);
      const newOffset = index < this.#offset ? hi - span + 1 : lo;
      const next = new Float64Array(span);
      next.set(old, this.#offset - newOffset);
      this.#counts = next;
      this.#offset = newOffset;
    }
    this.#counts[index - this.#offset]!++;
  }
}
