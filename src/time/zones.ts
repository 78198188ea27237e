/**
 * One formatter per zone name as given, null for a name ICU does not know: the one cache of zones
 * that flows, rules, daily caps and reports share. Making an `Intl.DateTimeFormat` costs tens of
 * µs; a flow compiled, a rule checked or a report asks again and again.
 */
const formats = new Map<string, Intl.DateTimeFormat | null>();
/** Names remembered at most: they come from stored flows and ACP bodies. */
const KNOWN_MAX = 10_000;

/**
 * The formatter of `tz`, with every field a caller reads: weekday (short), year, month, day, hour
 * (00–23), minute, second. Throws a RangeError, as `Intl.DateTimeFormat` does, when ICU knows no
 * such zone: callers pass zones {@link canonicalTimeZone} accepted.
 */
export function zoneFormat(tz: string): Intl.DateTimeFormat {
  const f = lookup(tz);
  if (f === null) throw new RangeError(`Invalid time zone specified: ${tz}`);
  return f;
}

function lookup(tz: string): Intl.DateTimeFormat | null {
  let f = formats.get(tz);
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone: tz,
        weekday: 'short',
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
    } catch {
      f = null;
    }
    if (formats.size < KNOWN_MAX) formats.set(tz, f);
  }
  return f;
}

/**
 * `tz` as flows store and reports show it when ICU knows it: a UTC offset in one form (`+0530` →
 * `+05:30`), a name in ICU's case when only the case differs (`europe/berlin` → `Europe/Berlin`,
 * `utc` → `UTC`), any other name as given: ICU's canonical names are CLDR's older ones
 * (`Asia/Kolkata` → `Asia/Calcutta`, `Europe/Kyiv` → `Europe/Kiev`), which nobody who typed the
 * new one wants back. Undefined when ICU knows no such zone.
 */
export function canonicalTimeZone(tz: string): string | undefined {
  const resolved = lookup(tz)?.resolvedOptions().timeZone;
  if (resolved === undefined) return undefined;
  return /^[+-]/.test(tz) || resolved.toLowerCase() === tz.toLowerCase() ? resolved : tz;
}

/** What a refusal of a zone says, the same for a flow and a report. */
export const TIME_ZONE_EXPECTED =
  'is not a time zone: an IANA name (UTC, Europe/Berlin) or a UTC offset (+02:00)';
