import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { BlockList, isIP } from 'node:net';
import { type CountryResponse, Reader } from 'maxmind';
import { ConfigError } from '../config/index.ts';
import { normalizeCountry } from './country-code.ts';

/**
 * Addresses that are no country's, from IANA's IPv4 and IPv6 special-purpose address registries
 * (RFC 6890 and later): private networks, shared and loopback addresses, link-local, benchmarking,
 * documentation, multicast and reserved space. The built-in database gives some of them a country
 * (192.168.0.0/16, 172.16.0.0/12, 198.51.100.0/24 and 203.0.113.0/24 are in Australia's whois
 * block, 2001:db8::/32 in Japan's), which would show a LAN or a documentation example as foreign
 * traffic.
 */
const NO_COUNTRY: readonly (readonly [string, number, 'ipv4' | 'ipv6'])[] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 3, 'ipv4'],
  // Unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d (the database reads those as IPv4).
  ['::', 96, 'ipv6'],
  ['64:ff9b:1::', 48, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['2001:2::', 48, 'ipv6'],
  ['2001:10::', 28, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
  ['3fff::', 20, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['5f00::', 16, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
];

const noCountry = new BlockList();
for (const [address, prefix, type] of NO_COUNTRY) noCountry.addSubnet(address, prefix, type);

/**
 * Country by client address from a MaxMind-format database (`routing.geoip: builtin`,
 * docs/routing.md#country). The built-in one is `@ip-location-db/geo-whois-asn-country-mmdb`,
 * shipped inside the npm package (no download at run time): RIR whois and ASN data by the NRO, CC
 * BY 4.0 (docs/routing.md credits it). An operator may point `routing.geoip_path` at another
 * country database (e.g. MaxMind GeoLite2 Country). Loaded once at start; a lookup is a walk of the
 * database's search tree (~0.7 µs).
 */
export class GeoCountry {
  readonly #reader: Reader<CountryResponse>;

  constructor(database: Buffer) {
    this.#reader = new Reader<CountryResponse>(database);
  }

  /** The database shipped by the npm package. */
  static builtin(): GeoCountry {
    const path = createRequire(import.meta.url).resolve(
      '@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb',
    );
    return new GeoCountry(readFileSync(path));
  }

  static open(path: string): GeoCountry {
    return new GeoCountry(readFileSync(path));
  }

  /** Upper-case ISO code for an address, or undefined (private, reserved, unknown, not an address). */
  lookup(address: string | undefined): string | undefined {
    if (address === undefined) return undefined;
    const a = address.startsWith('::ffff:') && address.indexOf('.') !== -1 ? address.slice(7) : address;
    const family = isIP(a);
    if (family === 0) return undefined;
    const r = this.#reader.get(a) as GeoRecord | null;
    const code = r?.country_code ?? r?.country?.iso_code;
    if (typeof code !== 'string') return undefined;
    // Checked only for an address the database places (~0.3 µs): most special ones it does not.
    return noCountry.check(a, family === 4 ? 'ipv4' : 'ipv6') ? undefined : normalizeCountry(code);
  }
}

/** The two record shapes in use: ip-location-db's `country_code`, MaxMind's `country.iso_code`. */
interface GeoRecord {
  country_code?: string;
  country?: { iso_code?: string };
}

/** The country database `routing.geoip` and `routing.geoip_path` ask for; undefined when off. */
export function loadGeoCountry(routing: {
  geoip: 'builtin' | 'off';
  geoip_path?: string;
}): GeoCountry | undefined {
  if (routing.geoip === 'off') return undefined;
  if (routing.geoip_path === undefined) return GeoCountry.builtin();
  try {
    return GeoCountry.open(routing.geoip_path);
  } catch (err) {
    throw new ConfigError(
      `routing.geoip_path: cannot open ${routing.geoip_path} as a country database: ${(err as Error).message}`,
    );
  }
}
