import { randomBytes } from 'node:crypto';
import { CLICK_ID_PATTERN } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';

/** What a `click_id` is (§11, `CLICK_ID_PATTERN` of storage); ids made here are always {@link CLICK_ID_LENGTH} long. */
export const CLICK_ID_RE = new RegExp(CLICK_ID_PATTERN);

/**
 * The base64url alphabet in ASCII order, so that ids of one length sort as their numbers do: an id
 * made later (by a clock that agrees) sorts after, and a string index on `click_id` is roughly
 * time-ordered like the rows it points to.
 */
const ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** Every pair of alphabet characters, so the 24-bit counter costs two lookups, not four. */
const PAIRS: readonly string[] = Array.from(
  { length: 4096 },
  (_, i) => ALPHABET[i >> 6]! + ALPHABET[i & 63]!,
);

const TIME_CHARS = 8; // 48 bits of milliseconds: until the year 10889
const RANDOM_CHARS = 10; // 60 bits, new for each generator (each process)
const SEQ_LIMIT = 1 << 24; // 4 characters
export const CLICK_ID_LENGTH = TIME_CHARS + RANDOM_CHARS + 4;

function encode(value: number, chars: number): string {
  let out = '';
  for (let i = chars - 1; i >= 0; i--) out += ALPHABET[Math.floor(value / 2 ** (6 * i)) % 64]!;
  return out;
}

/**
 * Makes `click_id`s on the hot path with no database round trip and no coordination (§11):
 * milliseconds (8 characters) + this generator's random part (10 characters, 60 bits) + a
 * counter (4 characters, 24 bits) — 22 characters.
 *
 * Unique within a generator: (milliseconds, counter) only ever increases. The clock is never
 * followed backwards (a wall clock stepped back keeps the last millisecond), and when the counter
 * wraps the millisecond is moved on by one, as ULID's monotonic mode does. Unique across nodes and
 * restarts: two generators would also need the same 60 random bits (about one chance in 10^12 for
 * a thousand generators alive at once) and to hit the same millisecond and counter. The counter
 * starts at a random value, so a restart within one millisecond does not begin where the last
 * process began.
 *
 * The time and random part are cached per millisecond: a call is a clock read, an increment and one
 * string concatenation.
 */
export class ClickIdGenerator {
  readonly #clock: Clock;
  readonly #random: string;
  #ms = -1;
  #prefix = '';
  #seq: number;

  /** `random`: 11 bytes (tests pass their own to make two generators collide on purpose). */
  constructor(clock: Clock, random: Buffer = randomBytes(11)) {
    this.#clock = clock;
    this.#random = encode(random.readUIntBE(0, 6), 8) + encode(random.readUInt16BE(6) >>> 4, 2);
    this.#seq = random.readUIntBE(8, 3) & (SEQ_LIMIT - 1);
  }

  next(): string {
    const now = this.#clock.now();
    if (now > this.#ms) this.#advance(now);
    const seq = this.#seq;
    const id = this.#prefix + PAIRS[seq >> 12]! + PAIRS[seq & 4095]!;
    this.#seq = seq + 1 === SEQ_LIMIT ? 0 : seq + 1;
    // Wrapped: the next id borrows the next millisecond, so (ms, counter) still only increases.
    if (this.#seq === 0) this.#advance(this.#ms + 1);
    return id;
  }

  #advance(ms: number): void {
    this.#ms = ms;
    this.#prefix = encode(ms, TIME_CHARS) + this.#random;
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
