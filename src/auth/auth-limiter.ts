import { LRUCache } from 'lru-cache';
import { ApiError } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';

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
 * 429 `rate.limited` — before its token is even looked at — until the window ends. Guessing tokens
 * (256 bits) is hopeless anyway; this keeps a guesser from costing the node database lookups and
 * log lines at line rate. `/postback` shares the count but judges its key first (`check` and
 * `failed` on a wrong one only), so a right key is never refused.
 */
export class AuthLimiter {
  readonly #o: AuthLimiterOptions;
  readonly #windows: LRUCache<string, Window>;

  constructor(o: AuthLimiterOptions) {
    this.#o = o;
    this.#windows = new LRUCache({ max: o.maxAddresses ?? 10_000 });
  }

  /** Throws `rate.limited` (with the seconds to wait) when the address is locked out. */
  check(address: string): void {
    if (this.#o.maxFailures === 0) return;
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
  failed(address: string): void {
    if (this.#o.maxFailures === 0) return;
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
   * when it fails (`auth.unauthorized`) — the one rule for the ACP and `/metrics` alike.
   */
  async guard<T>(address: string, authenticate: () => T | Promise<T>): Promise<T> {
    this.check(address);
    try {
      return await authenticate();
    } catch (err) {
      if (err instanceof ApiError && err.code === 'auth.unauthorized') this.failed(address);
      throw err;
    }
  }

  /** Addresses currently remembered (for tests and the memory bound). */
  get size(): number {
    return this.#windows.size;
  }
}
