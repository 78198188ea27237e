import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { ApiError, hasCode } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import { parseBearer } from './tokens.ts';

export interface AuthLimiterOptions {
  /** Failed authentications one address may make per window; 0 turns the limit off. */
  maxFailures: number;
  windowMs: number;
  clock: Clock;
  /** Addresses remembered at once; the least recently seen is forgotten first (bounded memory). */
  maxAddresses?: number;
}

interface Window {
  failures: number;
  resetAt: number;
}

/**
 * The key an address is counted under: IPv4 as it is (an IPv4-mapped IPv6 address as its IPv4),
 * IPv6 by its /64 — one host usually holds a whole /64 and could otherwise walk through it.
 */
export function addressKey(address: string): string {
  if (!address.includes(':')) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail = ''] = address.toLowerCase().split('%')[0]!.split('::');
  const left = head ? head.split(':') : [];
  const right = address.includes('::') && tail ? tail.split(':') : [];
  const groups = address.includes('::')
    ? [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/**
 * Failed-authentication limiting per client address (`request.ip`: the peer, or the client a
 * trusted proxy names). An address that failed `maxFailures` times in a window is refused with
 * 429 `rate.limited` — before its token is even looked at — until the window ends, but for a
 * credential that authenticated from there before (see {@link AuthLimiter.guard}). Guessing tokens
 * (256 bits) is hopeless anyway; this keeps a guesser from costing the node database lookups and
 * log lines at line rate. `/postback` has a limiter of its own (see {@link proven}). An address
 * that is undefined (the client left before its request was read whole) is neither refused nor
 * counted: nothing will reach it, and there is nothing to count it under.
 */
export class AuthLimiter {
  readonly #o: AuthLimiterOptions;
  readonly #windows: LRUCache<string, Window>;
  readonly #proven: LRUCache<string, true>;

  constructor(o: AuthLimiterOptions) {
    this.#o = o;
    this.#windows = new LRUCache({ max: o.maxAddresses ?? 10_000 });
    this.#proven = new LRUCache({ max: o.maxAddresses ?? 10_000 });
  }

  /**
   * Remembers that the address has authenticated with `credential` (an ACP or `/metrics` token, a
   * postback key; kept only as its SHA-256), bounded, least recently seen forgotten first. That
   * credential from that address then passes a lockout: whoever sent it from there has nothing
   * left to guess, and a network's postbacks keep converting while a guesser elsewhere is held
   * off. Any other credential from the address is refused like a guess while it is locked out, so
   * a lockout says nothing about the credentials tried in it.
   */
  prove(address: string | undefined, credential: string): void {
    if (address !== undefined) this.#proven.set(proofOf(address, credential), true);
  }

  /** Whether {@link prove} was called for the address and credential (and not forgotten since). */
  proven(address: string | undefined, credential: string): boolean {
    return address !== undefined && this.#proven.get(proofOf(address, credential)) === true;
  }

  /** Throws `rate.limited` (with the seconds to wait) when the address is locked out. */
  check(address: string | undefined): void {
    if (this.#o.maxFailures === 0 || address === undefined) return;
    const key = addressKey(address);
    const w = this.#windows.get(key);
    if (w === undefined || w.failures < this.#o.maxFailures) return;
    const waitMs = w.resetAt - this.#o.clock.monotonic();
    if (waitMs <= 0) {
      this.#windows.delete(key);
      return;
    }
    const retryAfter = Math.ceil(waitMs / 1000);
    throw new ApiError(
      'rate.limited',
      `Too many failed authentications from this address; retry in ${retryAfter} s.`,
      {
        cause: `${w.failures} failed authentications from ${key} within ${this.#o.windowMs} ms`,
        details: { retry_after_seconds: retryAfter },
      },
    );
  }

  /** Counts one failed authentication of the address. */
  failed(address: string | undefined): void {
    if (this.#o.maxFailures === 0 || address === undefined) return;
    // Monotonic: a wall-clock step must not stretch or cut a lockout.
    const now = this.#o.clock.monotonic();
    const key = addressKey(address);
    const w = this.#windows.get(key);
    if (w === undefined || w.resetAt <= now)
      this.#windows.set(key, { failures: 1, resetAt: now + this.#o.windowMs });
    else w.failures++;
  }

  /**
   * Runs one authentication for an address: refused while the address is locked out, and counted
   * when it fails (`auth.unauthorized`) — the one rule for the ACP and `/metrics` alike. Two
   * exceptions keep the lockout on guessers only. A request that presents no credential (no
   * `Authorization`, or an empty one) guesses nothing: it is answered 401 and not counted (a client
   * probing which routes need a token, or a test of every route's 401, locked its address out of a
   * valid token for a whole window). And a credential that has authenticated from this address
   * before passes its lockout: whoever holds it there has nothing to guess. Any other credential is
   * refused like a guess, so a proven address is no place to guess from, and a credential that
   * fails (a revoked token) is no longer proven. `header` is the request's `Authorization`.
   */
  async guard<T>(
    address: string | undefined,
    authenticate: () => T | Promise<T>,
    header?: string,
  ): Promise<T> {
    // No credential (or an empty header) guesses nothing: 401, never counted.
    if (header === undefined || header.trim() === '') return authenticate();
    // The token itself, however the header spells `Bearer`: one holder of one token is one proof,
    // its key computed once for the look-up and the update that follow.
    const proof = address === undefined ? undefined : proofOf(address, parseBearer(header) ?? header.trim());
    // Through a lockout only with a credential this address has already authenticated with.
    if (proof === undefined || this.#proven.get(proof) !== true) this.check(address);
    try {
      const result = await authenticate();
      if (proof !== undefined) this.#proven.set(proof, true);
      return result;
    } catch (err) {
      if (hasCode(err, 'auth.unauthorized')) {
        this.failed(address);
        if (proof !== undefined) this.#proven.delete(proof);
      }
      throw err;
    }
  }

  /** Addresses currently remembered (for tests and the memory bound). */
  get size(): number {
    return this.#windows.size;
  }
}

/** The key a proof is kept under: the address (an IPv6 host by its /64) and the credential's digest. */
function proofOf(address: string, credential: string): string {
  return `${addressKey(address)} ${createHash('sha256').update(credential).digest('base64')}`;
}
