import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { BlockList } from 'node:net';
import { parseCidr } from '../config/index.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The inbound `X-Request-Id` when it is 1–128 of `[A-Za-z0-9._:-]`, otherwise a new UUID (§3). */
export function requestIdFrom(req: IncomingMessage): string {
  const inbound = req.headers['x-request-id'];
  return typeof inbound === 'string' && inbound.length <= 128 && REQUEST_ID.test(inbound)
    ? inbound
    : randomUUID();
}

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

  constructor(header: string, trustedProxies: readonly string[]) {
    this.#header = header.toLowerCase();
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
    return this.#trusted.check(v4, v4.includes(':') ? 'ipv6' : 'ipv4');
  }

  /** Upper-case country code, or undefined when unknown or not to be believed. */
  resolve(req: IncomingMessage): string | undefined {
    const raw = req.headers[this.#header];
    if (typeof raw !== 'string' || raw.length < 2 || raw.length > 8) return undefined;
    if (!this.isTrustedPeer(req.socket)) return undefined;
    return normalizeCountry(raw);
  }
}

export function normalizeCountry(raw: string): string | undefined {
  const code = raw.trim().toUpperCase();
  if (code.length !== 2) return undefined;
  const a = code.charCodeAt(0);
  const b = code.charCodeAt(1);
  if (a < 65 || a > 90 || b < 65 || b > 90 || UNKNOWN_COUNTRIES.has(code)) return undefined;
  return code;
}
