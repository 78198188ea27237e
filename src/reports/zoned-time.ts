/**
 * Wall-clock time in an IANA zone, both ways, from ICU (no time zone data of our own): what a
 * report's `from`/`to` mean when written without an offset, and which local day and hour a UTC
 * bucket falls in.
 */
import { zoneFormat } from '../time/index.ts';

/** Local fields of an instant in a zone. */
export function localParts(
  ms: number,
  tz: string,
): { y: number; mo: number; d: number; h: number; mi: number; s: number } {
  const out = { y: 0, mo: 0, d: 0, h: 0, mi: 0, s: 0 };
  for (const p of zoneFormat(tz).formatToParts(ms)) {
    if (p.type === 'year') out.y = Number(p.value);
    else if (p.type === 'month') out.mo = Number(p.value);
    else if (p.type === 'day') out.d = Number(p.value);
    else if (p.type === 'hour') out.h = Number(p.value) % 24;
    else if (p.type === 'minute') out.mi = Number(p.value);
    else if (p.type === 'second') out.s = Number(p.value);
  }
  return out;
}

/** The zone's offset from UTC at an instant, in ms (Berlin in winter: +3,600,000). */
export function offsetAt(ms: number, tz: string): number {
  const p = localParts(ms, tz);
  return Date.UTC(p.y, p.mo - 1, p.d, p.h, p.mi, p.s) - Math.floor(ms / 1000) * 1000;
}

/**
 * The instant a local wall-clock time names in a zone. A time skipped by a DST change moves
 * forward by the gap; a repeated one is its first occurrence.
 */
export function zonedToUtc(local: number, tz: string): number {
  const first = local - offsetAt(local, tz);
  const second = local - offsetAt(first, tz);
  return Math.min(first, second);
}

/** `YYYY-MM-DD` and `YYYY-MM-DDTHH:00` of an instant in a zone. */
export function localLabels(ms: number, tz: string): { day: string; hour: string } {
  const p = localParts(ms, tz);
  const day = `${p.y}-${String(p.mo).padStart(2, '0')}-${String(p.d).padStart(2, '0')}`;
  return { day, hour: `${day}T${String(p.h).padStart(2, '0')}:00` };
}

/**
 * An ISO-8601 `from`/`to` as an instant: with `Z` or an offset it is that instant; a date or a
 * date-time without one is wall-clock time in the report's zone. NaN when it names no date.
 */
export function parseWhen(text: string, tz: string): number {
  const m =
    /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/.exec(
      text,
    );
  if (m === null) return Number.NaN;
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '', zone] = m;
  const ms = Number(frac.padEnd(3, '0').slice(0, 3));
  const local = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  // Date.UTC rolls 2026-02-30 over to March: a date that does not exist is refused instead.
  const check = new Date(local);
  if (
    check.getUTCMonth() !== Number(mo) - 1 ||
    check.getUTCDate() !== Number(d) ||
    Number(h) > 23 ||
    Number(mi) > 59 ||
    Number(s) > 59
  )
    return Number.NaN;
  if (zone === undefined) return zonedToUtc(local, tz);
  if (zone === 'Z') return local;
  const sign = zone[0] === '-' ? -1 : 1;
  const digits = zone.slice(1).replace(':', '');
  const oh = Number(digits.slice(0, 2));
  const om = Number(digits.slice(2));
  // An offset is at most 23:59 (RFC 3339); -99:99 was read as four days and an hour and a half.
  if (oh > 23 || om > 59) return Number.NaN;
  return local - sign * (oh * 60 + om) * 60_000;
}

/** Where a zone's offset applies over a report's buckets: from `at` (epoch ms, a bucket's start) on. */
export interface OffsetRun {
  at: number;
  /** The zone's offset at that bucket's start, in seconds. */
  seconds: number;
}

/** Six hours: no zone changes its offset twice within it, so a sample this often sees every change. */
const SAMPLE_MS = 6 * 3_600_000;

/**
 * The zone's offset at the start of every bucket of `bucketMs` in [from, to), as runs: the first
 * from the first bucket, then one per change. Sampled every six hours and bisected to the bucket
 * where it changes, so a 400-day range costs ~1,600 ICU look-ups, not one per bucket.
 */
export function offsetRuns(from: number, to: number, bucketMs: number, tz: string): OffsetRun[] {
  const first = Math.floor(from / bucketMs);
  const last = Math.floor((to - 1) / bucketMs);
  const offset = (bucket: number) => offsetAt(bucket * bucketMs, tz) / 1000;
  const step = Math.max(1, Math.floor(SAMPLE_MS / bucketMs));
  const runs: OffsetRun[] = [{ at: first * bucketMs, seconds: offset(first) }];
  let b = first;
  let seconds = runs[0]!.seconds;
  while (b < last) {
    const next = Math.min(last, b + step);
    const there = offset(next);
    if (there === seconds) {
      b = next;
      continue;
    }
    // The first bucket in (b, next] whose offset is not `seconds`.
    let lo = b;
    let hi = next;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (offset(mid) === seconds) lo = mid;
      else hi = mid;
    }
    seconds = offset(hi);
    runs.push({ at: hi * bucketMs, seconds });
    b = hi;
  }
  return runs;
}
