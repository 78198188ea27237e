import { createHmac } from 'node:crypto';
import { canonicalAddress } from './request-facts.ts';

/**
 * The visitor key (docs/clicks.md#visitor-key): a hash of the client address and the user agent,
 * never the raw pair, the same on every node that shares a database (nothing node-local goes in). A
 * 52-bit number, so it is a `Map` key with no string behind it and a BIGINT (or SQLite INTEGER)
 * when nodes share it through storage.
 *
 * Keyed by the deployment's visitor-key secret (`clicks.visitor_key_secret`, or one made once and
 * kept in the database: src/clicks/visitor-secret.ts). Unkeyed, the key of a stored sighting gave
 * the whole client address back: the click beside it has the /24 and the browser, so 256 guesses
 * times a few user agents found it (a security review did, in 0.4 s) — and the click log keeps the
 * address only as a prefix.
 *
 * Two steps, because a hash per click through `node:crypto` costs ~0.5–2.7 µs, up to a whole
 * description of a click: the user agent's share is HMAC-SHA-256 once per distinct user agent
 * ({@link userAgentSeed}, kept in the user-agent cache), and each click only mixes its address
 * (IPv4-mapped IPv6 as IPv4, so a dual-stack socket does not make a new visitor) into that seed
 * with two independent 32-bit multiply–xorshift lanes and a murmur3 finaliser (~30 ns). That mix
 * can be undone: whoever reads the sightings and knows one visitor's address and exact user agent
 * learns that user agent's seed, and with it the addresses of the others who sent the same one
 * (docs/clicks.md says so).
 *
 * Collisions: two of n visitors of one flow in one window share a key with a chance of about
 * n² / 2^53 — 1 in 9,000 for a million visitors, 1 in 90 for ten million; the cost of one is one
 * unique not counted.
 */
export function userAgentSeed(userAgent: string, secret: string): number {
  const digest = createHmac('sha256', secret).update(userAgent).digest();
  return digest.readUIntBE(0, 6) * 16 + (digest[6]! >> 4); // 52 bits
}

function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** The visitor key of a client address and a user agent's {@link userAgentSeed}. */
export function visitorKeyOf(address: string | undefined, seed: number): number {
  const a = address === undefined ? '' : canonicalAddress(address);
  let h1 = Math.floor(seed / 0x100000) | 0;
  let h2 = (seed % 0x100000) ^ 0x9e3779b9;
  for (let i = 0; i < a.length; i++) {
    const c = a.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x5bd1e995);
    h1 ^= h1 >>> 15;
    h2 = Math.imul(h2 ^ c, 0x27d4eb2d);
    h2 ^= h2 >>> 13;
  }
  h1 = fmix32(h1 ^ a.length);
  h2 = fmix32(h2 ^ h1);
  return h1 * 0x100000 + (h2 >>> 12); // 32 + 20 = 52 bits
}

/** The visitor key from the raw pair (what the describer gets from its cache in two steps). */
export function visitorKey(
  address: string | undefined,
  userAgent: string | undefined,
  secret: string,
): number {
  return visitorKeyOf(address, userAgentSeed(userAgent ?? '', secret));
}
