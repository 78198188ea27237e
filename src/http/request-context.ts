import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { BlockList } from 'node:net';
import { parseCidr } from '../config/index.ts';
import type { GeoCountry } from './geo-country.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The inbound `X-Request-Id` when it is 1–128 of `[A-Za-z0-9._:-]`, otherwise a new UUID (§3). */
export function requestIdFrom(req: IncomingMessage): string {
  const inbound = req.headers['x-request-id'];
  return typeof inbound === 'string' && inbound.length <= 128 && REQUEST_ID.test(inbound)
    ? inbound
    : newRequestId();
}

/** Ids left before the counter would need more than its 12 hex digits. */
const COUNTER_SPAN = 2 ** 48;
let idPrefix = '';
let idCounter = COUNTER_SPAN;

/**
 * A new request id: a UUID in RFC 9562's version 8 layout (the custom one) whose first 74 variable
 * bits are random per process and whose last 48 are a counter. Unique as a random UUID is across
 * processes (74 random bits), and within a process by the counter; it costs a counter and a string
 * instead of `randomUUID`'s random bytes, which were ~2 % of the server's CPU on a cache hit.
 */
export function newRequestId(): string {
  if (++idCounter >= COUNTER_SPAN) {
    const r = randomBytes(10).toString('hex');
    // xxxxxxxx-xxxx-8xxx-Vxxx-: version 8, variant 10 (V is 8, 9, a or b); 74 random bits.
    const variant = (8 | (Number.parseInt(r[18]!, 16) & 3)).toString(16);
    idPrefix = `${r.slice(0, 8)}-${r.slice(8, 12)}-8${r.slice(12, 15)}-${variant}${r.slice(15, 18)}-`;
    idCounter = 0;
  }
  const n = idCounter.toString(16);
  return `${idPrefix}${n.length >= 12 ? '' : ZEROS[12 - n.length]}${n}`;
}
const ZEROS = Array.from({ length: 13 }, (_, i) => '0'.repeat(i));

/** Country codes that mean "unknown" in GeoIP and CDN headers (Cloudflare's XX/T1, MaxMind's A1/A2/O1, ZZ). */
const UNKNOWN_COUNTRIES = new Set(['XX', 'T1', 'ZZ', 'A1', 'A2', 'O1']);
const kTrusted = Symbol('sluice.trustedPeer');

/**
 * Decides the client's country: only from the configured header, only when the direct peer is a
 * trusted proxy (decided once per connection), only a well-formed ISO 3166-1 alpha-2 code.
 */
export class CountryResolver {
  readonly #header: string;
  readonly #trusted = new BlockList();
  readonly #geo: GeoCountry | undefined;

  /** `geo`: the built-in (or configured) country database, consulted when the header says nothing. */
  constructor(header: string, trustedProxies: readonly string[], geo?: GeoCountry) {
    this.#header = header.toLowerCase();
    this.#geo = geo;
    for (const cidr of trustedProxies) {
      const c = parseCidr(cidr);
      if (c) this.#trusted.addSubnet(c.address, c.prefix, c.family);
    }
  }

  isTrustedPeer(socket: Socket): boolean {
    const s = socket as Socket & { [kTrusted]?: boolean };
    let trusted = s[kTrusted];
    if (trusted === undefined) {
      trusted = this.#check(socket.remoteAddress);
      s[kTrusted] = trusted;
    }
    return trusted;
  }

  #check(address: string | undefined): boolean {
    if (!address) return false;
    const v4 = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
    try {
      return this.#trusted.check(v4, v4.includes(':') ? 'ipv6' : 'ipv4');
    } catch {
      return false; // not an address (a forged X-Forwarded-For hop): never a trusted proxy
    }
  }

  /**
   * The client's address as fastify's `request.ip` decides it with `trustProxy` set to the
   * trusted proxies (proxy-addr's rule): the peer, or, while the hop is a trusted proxy, the next
   * `X-Forwarded-For` entry from the right; the first untrusted one is the client. One function
   * for both of /go's paths, so the fast path and fastify see the same visitor.
   */
  clientAddress(req: IncomingMessage): string | undefined {
    const peer = req.socket.remoteAddress;
    if (peer === undefined || !this.isTrustedPeer(req.socket)) return peer;
    const xff = req.headers['x-forwarded-for'];
    if (typeof xff !== 'string' || xff.length === 0) return peer;
    const hops = xff.split(',');
    let addr = peer;
    for (let i = hops.length - 1; i >= 0; i--) {
      addr = hops[i]!.trim();
      if (!this.#check(addr)) return addr;
    }
    return addr;
  }

  /**
   * Upper-case country code, or undefined when unknown or not to be believed: the trusted proxy's
   * header first (§3); without one (or with an "unknown" code), the country database by the
   * client's address when `routing.geoip` is on (§13).
   */
  resolve(req: IncomingMessage): string | undefined {
    const raw = req.headers[this.#header];
    if (typeof raw === 'string' && raw.length >= 2 && raw.length <= 8 && this.isTrustedPeer(req.socket)) {
      const code = normalizeCountry(raw);
      if (code !== undefined) return code;
    }
    return this.#geo?.lookup(this.clientAddress(req));
  }
}

/**
 * Every two-letter code once, so a buffered click holds a shared code rather than a string of its
 * own per request ("AA" at 0, "AB" at 1, …).
 */
const CODES: readonly string[] = Array.from({ length: 26 * 26 }, (_, i) =>
  String.fromCharCode(65 + Math.floor(i / 26), 65 + (i % 26)),
);

/** A two-letter country code in either case as the shared upper-case code; undefined when not one or an "unknown" code. */
export function normalizeCountry(raw: string): string | undefined {
  const code = raw.length === 2 ? raw : raw.trim();
  if (code.length !== 2) return undefined;
  const a = code.charCodeAt(0) & ~0x20; // ASCII letters to upper case; anything else stays out of range
  const b = code.charCodeAt(1) & ~0x20;
  if (a < 65 || a > 90 || b < 65 || b > 90) return undefined;
  const shared = CODES[(a - 65) * 26 + (b - 65)]!;
  return UNKNOWN_COUNTRIES.has(shared) ? undefined : shared;
}
