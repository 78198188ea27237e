import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { BlockList } from 'node:net';
import { parseCidr } from '../config/index.ts';
import { normalizeCountry } from './country-code.ts';
import type { GeoCountry } from './geo-country.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The inbound `X-Request-Id` when it is 1–128 of `[A-Za-z0-9._:-]`, otherwise a new UUID
 * (docs/telemetry.md#headers-every-response-2xx-3xx-404-errors-metrics).
 */
export function requestIdFrom(req: IncomingMessage): string {
  const inbound = req.headers['x-request-id'];
  return typeof inbound === 'string' && inbound.length <= 128 && REQUEST_ID.test(inbound)
    ? inbound
    : newRequestId();
}

/**
 * A new request id: a random (version 4) UUID, as `crypto.randomUUID` makes them. A per-process
 * prefix with a counter, in the version 8 layout, was tried and saved ~50–100 ns a request (0.3 %
 * of a redirect); but docs/telemetry.md promises a UUID, and the validators clients use often take
 * versions 1–5 only, so the id is the ordinary kind.
 */
export function newRequestId(): string {
  return randomUUID();
}

const kTrusted = Symbol('sluice.trustedPeer');

/**
 * The client's country: what the configured header says, only when the direct peer is a trusted
 * proxy (decided once per connection), only an assigned ISO 3166-1 alpha-2 code
 * (docs/deployment.md#behind-a-reverse-proxy); and, for a click without one, the country database
 * by the client's address (docs/routing.md#country).
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
   * What a trusted proxy's header says (docs/deployment.md#behind-a-reverse-proxy): an assigned
   * upper-case code, or undefined when there is no header, the peer is not a trusted proxy, or the
   * value is malformed or means "unknown". This alone is `X-Client-Country-Code`.
   */
  fromHeader(req: IncomingMessage): string | undefined {
    const raw = req.headers[this.#header];
    return typeof raw === 'string' && raw.length >= 2 && raw.length <= 8 && this.isTrustedPeer(req.socket)
      ? normalizeCountry(raw)
      : undefined;
  }

  /**
   * The client's country by its address, from the country database (`routing.geoip`,
   * docs/routing.md#country).
   */
  byAddress(client: string | undefined): string | undefined {
    return this.#geo?.lookup(client);
  }
}
