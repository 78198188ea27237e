import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { type CountryResponse, Reader } from 'maxmind';
import { normalizeCountry } from './request-context.ts';

/**
 * Country by client address from a MaxMind-format database (§13 `routing.geoip: builtin`). The
 * built-in one is `@ip-location-db/geo-whois-asn-country-mmdb`, shipped inside the npm package (no
 * download at run time): RIR whois and ASN data by the NRO, CC BY 4.0 (docs/routing.md credits it).
 * An operator may point `routing.geoip_path` at another country database (e.g. MaxMind GeoLite2
 * Country). Loaded once at start; a lookup is a walk of the database's search tree (~0.7 µs).
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
    if (isIP(a) === 0) return undefined;
    const r = this.#reader.get(a) as GeoRecord | null;
    const code = r?.country_code ?? r?.country?.iso_code;
    return typeof code === 'string' ? normalizeCountry(code) : undefined;
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
    throw new Error(
      `routing.geoip_path: cannot open ${routing.geoip_path} as a country database: ${(err as Error).message}`,
    );
  }
}
