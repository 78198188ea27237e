/** Two-letter country codes as a click carries them, shared by the request context and the GeoIP lookup. */
const regionNames = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'none' });
/**
 * Codes ICU names that are not assigned ISO 3166-1 countries: groupings (UK, EU, EZ, UN, QO), the
 * pseudo-regions XA/XB, codes withdrawn from the standard (SU, YU, ZR, …) and reserved ones (AC,
 * IC, TA, …); and those that mean "unknown" in GeoIP and CDN headers (Cloudflare's XX/T1,
 * MaxMind's A1/A2/O1, ZZ). XK (Kosovo) stays: user-assigned, but what GeoIP databases and CDNs send.
 */
const NOT_COUNTRIES = new Set([
  ...['ZZ', 'UK', 'EU', 'EZ', 'UN', 'QO', 'XA', 'XB', 'XX', 'T1', 'A1', 'A2', 'O1'],
  ...['AN', 'BU', 'CS', 'DD', 'DY', 'FX', 'HV', 'NH', 'RH', 'SU', 'TP', 'VD', 'YD', 'YU', 'ZR'],
  ...['AC', 'CP', 'CQ', 'DG', 'EA', 'IC', 'TA'],
]);

/** True for an assigned ISO 3166-1 alpha-2 code, upper case. */
export function isCountryCode(code: string): boolean {
  if (!/^[A-Z]{2}$/.test(code) || NOT_COUNTRIES.has(code)) return false;
  try {
    return regionNames.of(code) !== undefined;
  } catch {
    return false;
  }
}
/**
 * Every assigned two-letter code once, so a buffered click holds a shared code rather than a string
 * of its own per request ("AA" at 0, "AB" at 1, …); undefined where a pair is not a country.
 */
const CODES: readonly (string | undefined)[] = Array.from({ length: 26 * 26 }, (_, i) => {
  const code = String.fromCharCode(65 + Math.floor(i / 26), 65 + (i % 26));
  return isCountryCode(code) ? code : undefined;
});

/**
 * A two-letter country code in either case as the shared upper-case code; undefined when not one,
 * not assigned (UK, EU, QM) or an "unknown" code.
 */
export function normalizeCountry(raw: string): string | undefined {
  const code = raw.length === 2 ? raw : raw.trim();
  if (code.length !== 2) return undefined;
  const a = code.charCodeAt(0) & ~0x20; // ASCII letters to upper case; anything else stays out of range
  const b = code.charCodeAt(1) & ~0x20;
  if (a < 65 || a > 90 || b < 65 || b > 90) return undefined;
  return CODES[(a - 65) * 26 + (b - 65)];
}
