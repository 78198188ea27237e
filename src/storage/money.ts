/**
 * Money is stored as integer micro-units (millionths of the currency unit) in BIGINT / INTEGER
 * columns, so sums over millions of rows are exact on both backends (a float sum drifts, and
 * SQLite has no exact decimal type); it is shown as a decimal number. Six decimals cover every
 * ISO 4217 currency and fractional cost per click (CPM / 1000), and a JSON number holds any
 * micro amount up to 9 billion units exactly.
 */
export const MICROS = 1_000_000;

/** Currencies ICU knows (ISO 4217 alphabetic codes), so no hand-kept list goes stale. */
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));
/** An upper-case ISO 4217 alphabetic code ICU knows (`USD`, `EUR`); `usd` or `XYZ` is not. */
export const isCurrency = (code: string): boolean => /^[A-Z]{3}$/.test(code) && CURRENCIES.has(code);

/** The largest amount storable exactly: 9,007,199,254.740991 units. */
export const MAX_MONEY = Number.MAX_SAFE_INTEGER / MICROS;

/**
 * A decimal amount to micro-units, rounded to the nearest micro-unit (a value parsed from a decimal
 * with up to six places comes back exactly); undefined when it is negative, not finite, or beyond
 * {@link MAX_MONEY}.
 */
export function toMicros(amount: number): number | undefined {
  if (!Number.isFinite(amount) || amount < 0 || amount > MAX_MONEY) return undefined;
  return Math.round(amount * MICROS);
}

/** Micro-units as read back (a number from SQLite, a string for BIGINT from PostgreSQL) to a decimal. */
export function fromMicros(micros: unknown): number {
  return Number(micros ?? 0) / MICROS;
}

/**
 * An exact sum of micro-units (see `sumMicros`), or a difference of two (a profit), as a decimal
 * amount: exact up to {@link MAX_MONEY}, beyond it the JSON number nearest the exact decimal.
 */
export function fromMicrosSum(micros: bigint): number {
  const size = micros < 0n ? -micros : micros;
  const amount = Number(`${size / 1_000_000n}.${String(size % 1_000_000n).padStart(6, '0')}`);
  return micros < 0n ? -amount : amount;
}
