/** Small statistics and formatting shared by the benchmarks. */

/** The middle sample (the upper one of an even count): robust to a stray slow round. */
export const median = (xs: readonly number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A whole number with thousands separators, e.g. `12,345`. */
export const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
