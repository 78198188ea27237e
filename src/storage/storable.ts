/**
 * What both backends store and compare alike. PostgreSQL is the narrower of the two: its TEXT cannot
 * hold U+0000, its INTEGER is 32-bit, and a parameter compared with a typed column must be of that
 * type; SQLite quietly takes any of these. Inputs are held to these bounds before a query is sent,
 * so a value one backend would refuse is a 400 on both, never a 500 on one.
 */

/** PostgreSQL INTEGER (int4): `version`, `position`, `weight`, `redirect_code`. */
export const INT4_MAX = 2_147_483_647;
export const INT4_MIN = -2_147_483_648;

/** Ids are generated here (UUIDs); a caller may only pass one back. */
export const ID_PATTERN = '^[A-Za-z0-9-]{1,64}$';
const ID = new RegExp(ID_PATTERN);

/**
 * A click id (docs/clicks.md#click-ids): 1–64 characters of `[A-Za-z0-9_-]`. Defined here once,
 * where it is stored; whoever makes click ids, and whoever takes one from outside (a postback, the
 * ACP), checks it against this.
 */
export const CLICK_ID_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
const CLICK_ID = new RegExp(CLICK_ID_PATTERN);

/** Why `value` is not a click id; undefined when it is one. */
export function clickIdProblem(value: unknown): string | undefined {
  return typeof value === 'string' && CLICK_ID.test(value) ? undefined : `must match ${CLICK_ID_PATTERN}`;
}

/** The kind of a column a keyset cursor compares against. */
export type ColumnKind = 'text' | 'int4' | 'int8' | 'timestamp';

// Year 0001 to 9999: PostgreSQL has no year 0000 (it would be 1 BC).
const ISO_MS = /^(?!0000)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/**
 * Why `value` cannot be stored in, or compared with, a column of that kind on both backends;
 * undefined when it can. `int8` is bounded to what a JSON number holds exactly.
 */
export function storableProblem(kind: ColumnKind, value: unknown): string | undefined {
  switch (kind) {
    case 'text':
      if (typeof value !== 'string') return 'must be a string';
      return value.includes('\u0000') ? 'must not contain U+0000' : undefined;
    case 'int4':
      return Number.isInteger(value) && (value as number) >= INT4_MIN && (value as number) <= INT4_MAX
        ? undefined
        : `must be an integer from ${INT4_MIN} to ${INT4_MAX}`;
    case 'int8':
      return Number.isSafeInteger(value)
        ? undefined
        : `must be an integer from ${Number.MIN_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}`;
    case 'timestamp':
      // Exactly what the stores write (toISOString), so SQLite's text order is PostgreSQL's time order.
      return typeof value === 'string' &&
        ISO_MS.test(value) &&
        !Number.isNaN(Date.parse(value)) &&
        new Date(value).toISOString() === value
        ? undefined
        : 'must be a UTC timestamp as the store writes it (YYYY-MM-DDTHH:MM:SS.sssZ)';
  }
}

/** Why `value` is not an id this store could have made; undefined when it is one. */
export function idProblem(value: unknown): string | undefined {
  return typeof value === 'string' && ID.test(value) ? undefined : `must match ${ID_PATTERN}`;
}

/**
 * Free text the node writes itself (an error message from a task or a target check): U+0000,
 * which PostgreSQL refuses, becomes U+FFFD, so the write succeeds on both backends.
 */
export function storableText(text: string): string;
export function storableText(text: string | null): string | null;
export function storableText(text: string | null): string | null {
  if (text === null) return null;
  const t = text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
  // A lone surrogate reaches either database as U+FFFD: replaced here, so that a click's row, its
  // hourly rollup's key and its buffered record agree with what is stored (two texts differing
  // only by one were two rollup keys in JavaScript and one in the database).
  return t.isWellFormed() ? t : t.toWellFormed();
}

/**
 * The first `max` characters of `text` (Unicode code points, as a sub-id's 256 are counted): a
 * pair of UTF-16 surrogates is one character and is never cut in two. Text no longer than `max`
 * UTF-16 units is returned as it is, without a walk.
 */
export function firstChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let i = 0;
  for (let n = 0; n < max && i < text.length; n++) {
    const c = text.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length;
    const low = pair ? text.charCodeAt(i + 1) : 0;
    i += pair && low >= 0xdc00 && low <= 0xdfff ? 2 : 1;
  }
  return text.slice(0, i);
}
