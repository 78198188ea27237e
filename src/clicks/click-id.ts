import { randomFillSync } from 'node:crypto';
import { CLICK_ID_PATTERN } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';

/** What a `click_id` is (`CLICK_ID_PATTERN` of storage); ids made here are always {@link CLICK_ID_LENGTH} long. */
export const CLICK_ID_RE = new RegExp(CLICK_ID_PATTERN);

/**
 * The base64url alphabet in ASCII order, so that the time prefixes of ids of one length sort as
 * their milliseconds do: a string index on `click_id` is roughly time-ordered like the rows it
 * points to.
 */
const ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** The alphabet's character codes: an id is built by one `String.fromCharCode` (a flat string). */
const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));

const TIME_CHARS = 8; // 48 bits of milliseconds: until the year 10889
/** Random characters of each id: 6 bits each, 84 bits drawn for that click alone. */
export const CLICK_ID_RANDOM_CHARS = 14;
export const CLICK_ID_LENGTH = TIME_CHARS + CLICK_ID_RANDOM_CHARS;
/**
 * Random bytes drawn at once (one byte per random character, its low 6 bits used: 256 is a
 * multiple of 64, so each character is uniform): one `randomFillSync` per ~1,170 ids.
 */
const POOL_BYTES = 16_384;

/**
 * Makes `click_id`s on the hot path with no database round trip and no coordination
 * (docs/clicks.md#click-ids): milliseconds (8 characters) + 84 bits from the CSPRNG drawn for this
 * click (14 characters) — 22 characters. No part is a counter or shared between clicks, so an id
 * says nothing of any other visitor's id or of the node's volume, and cannot be guessed from ids
 * one has seen.
 *
 * Uniqueness, within a node and across nodes and restarts, rests on the random part alone: two ids
 * of the same millisecond meet with probability 2^-84 a pair (a million ids in one millisecond:
 * about one chance in 4 × 10^13). The random bytes come from a pool refilled by `randomFillSync` in
 * blocks of {@link POOL_BYTES}, each byte used once; the time prefix is encoded once per millisecond.
 */
export class ClickIdGenerator {
  readonly #clock: Clock;
  readonly #pool = Buffer.allocUnsafe(POOL_BYTES);
  #used = POOL_BYTES;
  #ms = -1;
  /** The character codes of {@link #ms}'s prefix. */
  readonly #time = new Uint8Array(TIME_CHARS);

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  next(): string {
    const now = this.#clock.now();
    if (now !== this.#ms) this.#encodeTime(now);
    let o = this.#used;
    if (o + CLICK_ID_RANDOM_CHARS > POOL_BYTES) {
      randomFillSync(this.#pool);
      o = 0;
    }
    this.#used = o + CLICK_ID_RANDOM_CHARS;
    const p = this.#pool;
    const t = this.#time;
    const c = CODES;
    return String.fromCharCode(
      t[0]!,
      t[1]!,
      t[2]!,
      t[3]!,
      t[4]!,
      t[5]!,
      t[6]!,
      t[7]!,
      c[p[o]! & 63]!,
      c[p[o + 1]! & 63]!,
      c[p[o + 2]! & 63]!,
      c[p[o + 3]! & 63]!,
      c[p[o + 4]! & 63]!,
      c[p[o + 5]! & 63]!,
      c[p[o + 6]! & 63]!,
      c[p[o + 7]! & 63]!,
      c[p[o + 8]! & 63]!,
      c[p[o + 9]! & 63]!,
      c[p[o + 10]! & 63]!,
      c[p[o + 11]! & 63]!,
      c[p[o + 12]! & 63]!,
      c[p[o + 13]! & 63]!,
    );
  }

  #encodeTime(ms: number): void {
    this.#ms = ms;
    // A clock before the epoch or past 2^48 ms is clamped: the prefix stays 8 characters.
    let v = Math.min(Math.max(0, Math.floor(ms)), 2 ** 48 - 1);
    for (let i = TIME_CHARS - 1; i >= 0; i--) {
      this.#time[i] = CODES[v % 64]!;
      v = Math.floor(v / 64);
    }
  }
}

/** When a generator's id says it was made (milliseconds since the epoch); undefined for an id not made here. */
export function clickIdTime(id: string): number | undefined {
  if (id.length !== CLICK_ID_LENGTH) return undefined;
  let ms = 0;
  for (let i = 0; i < TIME_CHARS; i++) {
    const d = ALPHABET.indexOf(id[i]!);
    if (d < 0) return undefined;
    ms = ms * 64 + d;
  }
  return ms;
}
