import { isIPv4 } from 'node:net';
import { firstChars, SUB_ID_MAX_LENGTH } from '../storage/index.ts';

/**
 * What a click's request says besides its user agent: language, referrer host, sub-ids and the
 * address prefix (docs/clicks.md#describing-a-click). Each function takes the raw header or value,
 * never throws, and answers null for anything it cannot read.
 */

const COMMA = 44;
const SEMICOLON = 59;
const SPACE = 32;
const TAB = 9;
const isLetter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isOws = (c: number) => c === SPACE || c === TAB;

/**
 * The primary subtag, lower case, of the most preferred `Accept-Language` entry
 * ([RFC 9110 §12.5.4](https://www.rfc-editor.org/rfc/rfc9110#section-12.5.4)): the highest q
 * (1 when absent), the first of equals; `*`, `q=0`, malformed q-values and tags whose primary
 * subtag is not 2–8 letters are passed over. `de-CH, fr;q=0.9` → `de`; `*` alone → null.
 * Scanned in place: the only string made is the answer.
 */
export function preferredLanguage(header: string | undefined): string | null {
  if (header === undefined) return null;
  const n = header.length;
  let bestStart = -1;
  let bestEnd = -1;
  let bestQ = 0;
  let i = 0;
  while (i < n) {
    while (i < n && (isOws(header.charCodeAt(i)) || header.charCodeAt(i) === COMMA)) i++;
    if (i >= n) break;
    // The tag: its primary subtag ends at the first `-` (or `_`, as some clients send `en_US`).
    const start = i;
    let primaryEnd = -1;
    let valid = true;
    for (; i < n; i++) {
      const c = header.charCodeAt(i);
      if (c === COMMA || c === SEMICOLON || isOws(c)) break;
      if (primaryEnd < 0) {
        if (c === 45 || c === 95) primaryEnd = i;
        else if (!isLetter(c)) valid = false;
      }
    }
    if (primaryEnd < 0) primaryEnd = i;
    const primaryLength = primaryEnd - start;
    if (primaryLength < 2 || primaryLength > 8) valid = false;
    // Parameters: only q matters.
    let q = 1;
    while (i < n && header.charCodeAt(i) !== COMMA) {
      const c = header.charCodeAt(i);
      if (c !== SEMICOLON) {
        i++;
        continue;
      }
      i++;
      while (i < n && isOws(header.charCodeAt(i))) i++;
      if (i + 1 < n && (header.charCodeAt(i) | 0x20) === 113 && header.charCodeAt(i + 1) === 61) {
        i += 2;
        const qStart = i;
        while (i < n) {
          const d = header.charCodeAt(i);
          if (d === COMMA || d === SEMICOLON || isOws(d)) break;
          i++;
        }
        q = qValue(header, qStart, i);
      }
    }
    if (valid && q > bestQ) {
      bestQ = q;
      bestStart = start;
      bestEnd = primaryEnd;
    }
  }
  return bestStart < 0 ? null : languages.get(header.slice(bestStart, bestEnd).toLowerCase());
}

/** RFC 9110's qvalue: `0` to `1` with at most three decimals; anything else is NaN (never chosen). */
function qValue(s: string, start: number, end: number): number {
  const len = end - start;
  if (len < 1 || len > 5) return Number.NaN;
  const first = s.charCodeAt(start);
  if (first !== 48 && first !== 49) return Number.NaN;
  if (len === 1) return first - 48;
  if (s.charCodeAt(start + 1) !== 46) return Number.NaN;
  let frac = 0;
  let scale = 1;
  for (let i = start + 2; i < end; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return Number.NaN;
    frac = frac * 10 + d;
    scale *= 10;
  }
  const q = first - 48 + frac / scale;
  return q > 1 ? Number.NaN : q;
}

/**
 * A bounded set of shared copies of strings that repeat from click to click (referrer hosts,
 * languages, address prefixes): a buffered click holds the shared copy, not a string of its own,
 * and never a slice that keeps a whole header alive. Emptied when full, so a flood of distinct
 * values costs a rebuild, never unbounded memory.
 */
class StringPool {
  readonly #max: number;
  readonly #known = new Map<string, string>();

  constructor(max: number) {
    this.#max = max;
  }

  get(s: string): string {
    const known = this.#known.get(s);
    if (known !== undefined) return known;
    // A copy of its own (see above); the values pooled here are ASCII, so latin1 round-trips them.
    const own = Buffer.from(s, 'latin1').toString('latin1');
    if (this.#known.size >= this.#max) this.#known.clear();
    this.#known.set(own, own);
    return own;
  }
}

/** A handful of referrers (search, social, the buyer's own sites) make most clicks. */
const hosts = new StringPool(10_000);
/** Primary language subtags: a few hundred exist. */
const languages = new StringPool(1_000);
/** Visitors come in networks: many clicks share a /24 or /48. */
const prefixes = new StringPool(10_000);
/** Longer than a DNS name can be: not a host worth keeping. */
const HOST_MAX_CHARS = 253;

/**
 * The lower-case host of a `Referer` that is a valid http(s) URL (WHATWG URL parsing: IDN hosts in
 * punycode, IPv6 in brackets), else null. The common case — `http(s)://` and a host of letters,
 * digits, dots and hyphens — is read in place; anything else (ports, user info, IP addresses,
 * percent-encoding, non-ASCII, stray whitespace) goes through `URL.parse`, which decides.
 */
export function referrerHost(header: string | undefined): string | null {
  if (header === undefined || header.length === 0) return null;
  const start = schemeEnd(header);
  if (start > 0) {
    let i = start;
    let lastLabel = start;
    let plain = true;
    for (; i < header.length; i++) {
      const c = header.charCodeAt(i);
      if (c === 47 || c === 63 || c === 35) break; // / ? #
      if (c === 46) lastLabel = i + 1;
      else if (!(isLetter(c) || (c >= 48 && c <= 57) || c === 45)) {
        plain = false;
        break;
      }
    }
    // A last label starting with a digit may make an IPv4 address (`1.2.3.4`, `0x7f`; with a
    // trailing dot, the label before it), and `xn--` labels are checked by the IDN rules: all of
    // these are for the URL parser.
    const digitLast = lastLabel === i || header.charCodeAt(lastLabel) <= 57;
    if (plain && i > start && !digitLast && i - start <= HOST_MAX_CHARS) {
      const host = header.slice(start, i);
      if (!host.includes('xn--') && !host.includes('XN--')) return hosts.get(host.toLowerCase());
    }
  }
  const url = URL.parse(header);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) return null;
  const host = url.hostname;
  return host.length > 0 && host.length <= HOST_MAX_CHARS ? hosts.get(host) : null;
}

/** Where the host begins after an exact `http://` or `https://` (any case); 0 when it is not one. */
function schemeEnd(s: string): number {
  if (s.length < 8) return 0;
  const lower = (i: number) => s.charCodeAt(i) | 0x20;
  if (lower(0) !== 104 || lower(1) !== 116 || lower(2) !== 116 || lower(3) !== 112) return 0;
  let i = 4;
  if (lower(4) === 115) i = 5;
  return s.charCodeAt(i) === 58 && s.charCodeAt(i + 1) === 47 && s.charCodeAt(i + 2) === 47 ? i + 3 : 0;
}

/** Incoming query parameters as fastify and `node:querystring` give them. */
export type QueryLike = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * Control characters (Unicode Cc), the class `TEXT_PATTERN` (config/schema.ts) keeps out of
 * stored text. The HTTP parser lets C1 controls through in header values (read as latin1), and a
 * query string can carry any of them percent-encoded.
 */
const CONTROL_CLASS = '[\\u0000-\\u001f\\u007f-\\u009f]';
const CONTROL = new RegExp(CONTROL_CLASS);
const CONTROLS = new RegExp(CONTROL_CLASS, 'g');
/** `text` without its control characters. */
export function withoutControls(text: string): string {
  return CONTROL.test(text) ? text.replace(CONTROLS, '') : text;
}

/**
 * One `subN` value as the click log stores it: the first value when the parameter is repeated,
 * cut at {@link SUB_ID_MAX_LENGTH} characters (code points: never in the middle of a surrogate pair), control
 * characters removed (PostgreSQL cannot store U+0000, and no sub-id needs one) and lone
 * surrogates replaced, so every value can be stored and percent-encoded. Absent or empty: null.
 */
export function subValue(raw: string | readonly string[] | undefined): string | null {
  let v = typeof raw === 'string' ? raw : raw?.[0];
  if (v === undefined || v.length === 0) return null;
  v = withoutControls(firstChars(v, SUB_ID_MAX_LENGTH));
  if (!v.isWellFormed()) v = v.toWellFormed();
  return v.length > 0 ? v : null;
}

/** IPv4-mapped IPv6 (`::ffff:203.0.113.9`, `::ffff:cb00:7109`) as the IPv4 address it carries; others as given. */
export function canonicalAddress(address: string): string {
  if (address.length > 7 && (address.charCodeAt(0) === 58 || address.charCodeAt(0) === 48)) {
    const groups = ipv6Groups(address);
    if (groups !== null && isMappedV4(groups)) {
      return `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`;
    }
  }
  return address;
}

/**
 * The client address as the click log keeps it (docs/clicks.md#describing-a-click): IPv4 to /24,
 * IPv6 to /48 (RFC 5952 text), IPv4-mapped IPv6 as IPv4 — `203.0.113.0/24`, `2001:db8:1::/48`.
 * Null for no or a malformed address.
 */
export function ipPrefix(address: string | undefined): string | null {
  if (address === undefined || address.length === 0) return null;
  if (isIPv4(address)) return prefixes.get(`${address.slice(0, address.lastIndexOf('.'))}.0/24`);
  const groups = ipv6Groups(address);
  if (groups === null) return null;
  if (isMappedV4(groups))
    return prefixes.get(`${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.0/24`);
  // The five zero groups after /48 are always the longest run, so RFC 5952 compresses them.
  let last = 2;
  while (last >= 0 && groups[last] === 0) last--;
  let out = '';
  for (let g = 0; g <= last; g++) out += `${groups[g]!.toString(16)}:`;
  return last < 0 ? '::/48' : prefixes.get(`${out}:/48`);
}

function isMappedV4(g: readonly number[]): boolean {
  return g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff;
}

/** The eight 16-bit groups of an IPv6 address (zone id dropped, `::` and a dotted IPv4 tail expanded). */
function ipv6Groups(address: string): number[] | null {
  const zone = address.indexOf('%');
  const text = zone >= 0 ? address.slice(0, zone) : address;
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string): number[] | null => {
    if (part.length === 0) return [];
    const out: number[] = [];
    const pieces = part.split(':');
    for (let i = 0; i < pieces.length; i++) {
      const p = pieces[i]!;
      if (i === pieces.length - 1 && p.includes('.')) {
        if (!isIPv4(p)) return null;
        const [a, b, c, d] = p.split('.').map(Number) as [number, number, number, number];
        out.push((a << 8) | b, (c << 8) | d);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return null;
        out.push(Number.parseInt(p, 16));
      }
    }
    return out;
  };
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  if (head === null || tail === null) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}
