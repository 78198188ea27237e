const known = new Map<string, string | null>();
/** Names remembered at most: they come from stored flows and ACP bodies. */
const KNOWN_MAX = 10_000;

/**
 * `tz` as flows store and reports show it when ICU knows it: a UTC offset in one form (`+0530` →
 * `+05:30`), a name in ICU's case when only the case differs (`europe/berlin` → `Europe/Berlin`,
 * `utc` → `UTC`), any other name as given: ICU's canonical names are CLDR's older ones
 * (`Asia/Kolkata` → `Asia/Calcutta`, `Europe/Kyiv` → `Europe/Kiev`), which nobody who typed the
 * new one wants back. Undefined when ICU knows no such zone. Remembered per name: making an
 * `Intl.DateTimeFormat` costs tens of µs, and every flow compiled asks.
 */
export function canonicalTimeZone(tz: string): string | undefined {
  let zone = known.get(tz);
  if (zone === undefined) {
    try {
      const resolved = new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
      zone = /^[+-]/.test(tz) || resolved.toLowerCase() === tz.toLowerCase() ? resolved : tz;
    } catch {
      zone = null;
    }
    if (known.size < KNOWN_MAX) known.set(tz, zone);
  }
  return zone ?? undefined;
}

/** What a refusal of a zone says, the same for a flow and a report. */
export const TIME_ZONE_EXPECTED =
  'is not a time zone: an IANA name (UTC, Europe/Berlin) or a UTC offset (+02:00)';
