/**
 * The values of `ip` rules (docs/routing.md#rules): IPv4 and IPv6 addresses and CIDR blocks,
 * parsed strictly when written ({@link ipValueProblem}), compiled into sorted, merged ranges
 * ({@link compileIpRanges}) and matched per click by binary search ({@link ipRangesMatch}).
 *
 * An IPv4 address and its IPv4-mapped IPv6 form (`::ffff:a.b.c.d`) are one address, in rules and
 * in clients alike: a mapped client is looked up as IPv4, and the part of an IPv6 block that
 * covers mapped addresses (`::/0`, `::ffff:1.2.3.0/120`) is kept as IPv4 ranges too.
 *
 * Compiling is a radix sort of typed arrays and one merging pass: ~16 ms of CPU and ~1.2 MB for
 * 100,000 values (bench/routing/ip-rules.bench.ts). Node's `BlockList`, used before, took ~3.5 µs
 * and ~1.3 KB of native memory a value, and checked a click against every block in turn.
 */

/** A rule's ranges: each list sorted by start, disjoint, adjacent ranges merged. */
export interface IpRanges {
  /** IPv4 ranges, two unsigned 32-bit words each: start, end (both included). */
  readonly v4: Uint32Array;
  /** IPv6 ranges, eight words each: start and end, each as four 32-bit words, most significant first. */
  readonly v6: Uint32Array;
}

const NOT_ADDRESS = -1;
const LEADING_ZERO = -2;

/**
 * The dotted IPv4 address in `s[from, to)` as an unsigned 32-bit number; {@link NOT_ADDRESS}, or
 * {@link LEADING_ZERO} for a part written with a leading zero (`010`: some tools read it as octal).
 */
function v4At(s: string, from: number, to: number): number {
  let value = 0;
  let part = 0;
  let digits = 0;
  let parts = 0;
  let leadingZero = false;
  for (let i = from; i <= to; i++) {
    const c = i < to ? s.charCodeAt(i) : 46;
    if (c >= 48 && c <= 57) {
      if (digits === 1 && part === 0) leadingZero = true;
      part = part * 10 + (c - 48);
      if (++digits > 3 || part > 255) return NOT_ADDRESS;
    } else if (c === 46 && digits > 0 && parts < 4) {
      value = value * 256 + part;
      part = 0;
      digits = 0;
      parts++;
    } else return NOT_ADDRESS;
  }
  if (parts !== 4) return NOT_ADDRESS;
  return leadingZero ? LEADING_ZERO : value;
}

const groups = new Uint16Array(8);

/**
 * The IPv6 address in `s[from, to)` (RFC 4291 text: 1–4 hex digits a group, one `::` at most, an
 * optional dotted IPv4 tail) into `out[0..3]`; 0, {@link NOT_ADDRESS} or {@link LEADING_ZERO}.
 */
function v6At(s: string, from: number, to: number, out: Uint32Array): number {
  let n = 0;
  let gap = -1;
  let i = from;
  if (to - from < 2) return NOT_ADDRESS;
  if (s.charCodeAt(i) === 58) {
    if (s.charCodeAt(i + 1) !== 58) return NOT_ADDRESS;
    gap = 0;
    i += 2;
  }
  while (i < to) {
    const start = i;
    let v = 0;
    for (; i < to; i++) {
      const c = s.charCodeAt(i);
      const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
      if (d === -1) break;
      v = v * 16 + d;
    }
    if (i < to && s.charCodeAt(i) === 46) {
      if (n > 6) return NOT_ADDRESS;
      const x = v4At(s, start, to);
      if (x < 0) return x;
      groups[n++] = x >>> 16;
      groups[n++] = x & 0xffff;
      i = to;
      break;
    }
    const len = i - start;
    if (len === 0 || len > 4 || n === 8) return NOT_ADDRESS;
    groups[n++] = v;
    if (i === to) break;
    if (s.charCodeAt(i) !== 58) return NOT_ADDRESS;
    i++;
    if (i < to && s.charCodeAt(i) === 58) {
      if (gap !== -1) return NOT_ADDRESS;
      gap = n;
      i++;
    } else if (i === to) return NOT_ADDRESS;
  }
  if (gap === -1 ? n !== 8 : n > 7) return NOT_ADDRESS;
  const tail = gap === -1 ? 8 : 8 - (n - gap);
  for (let w = 0; w < 4; w++) {
    let word = 0;
    for (let p = 2 * w; p < 2 * w + 2; p++) {
      const g = gap === -1 || p < gap ? groups[p]! : p >= tail ? groups[p - (8 - n)]! : 0;
      word = word * 65536 + g;
    }
    out[w] = word;
  }
  return 0;
}

/** The IPv4-mapped block `::ffff:0:0/96`: its first three words. */
const isMapped = (w: Uint32Array) => w[0] === 0 && w[1] === 0 && w[2] === 0xffff;

/** A prefix length `s[from, to)`: 1–3 decimal digits; -1 when malformed, 999 when longer. */
function prefixAt(s: string, from: number, to: number): number {
  if (to === from) return -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    n = n * 10 + (c - 48);
  }
  return to - from > 3 ? 999 : n;
}

const ADDRESS_EXPECTED = 'is not an IPv4 or IPv6 address or CIDR block';
/** Scratch words of a parsed address (writes are checked, and compiled, one value at a time). */
const scratch = new Uint32Array(4);

/** Where the address of a rule value ends (before `/` or `%`), and whether it is IPv6. */
function addressEnd(value: string): { end: number; v6: boolean } {
  const slash = value.indexOf('/');
  const zone = value.indexOf('%');
  const end = zone !== -1 && (slash === -1 || zone < slash) ? zone : slash === -1 ? value.length : slash;
  const colon = value.indexOf(':');
  return { end, v6: colon !== -1 && colon < end };
}

/** Why a rule value is not an address or CIDR block as `ip` rules take them; undefined when it is. */
export function ipValueProblem(value: string): string | undefined {
  const { end, v6 } = addressEnd(value);
  const slash = value.indexOf('/');
  if (end !== (slash === -1 ? value.length : slash))
    return `has a zone id (${value.slice(end, slash === -1 ? value.length : slash)}): a rule matches addresses, not network interfaces; write the address without it`;
  const r = v6 ? v6At(value, 0, end, scratch) : v4At(value, 0, end);
  if (r === LEADING_ZERO)
    return 'has an IPv4 part with a leading zero, which some tools read as octal (010 is 8); write it without (10)';
  if (r === NOT_ADDRESS) return ADDRESS_EXPECTED;
  if (slash === -1) return undefined;
  const bits = prefixAt(value, slash + 1, value.length);
  const max = v6 ? 128 : 32;
  if (bits === -1) return ADDRESS_EXPECTED;
  return bits <= max ? undefined : `has a prefix length outside 0–${max}`;
}

/** `w` with every bit past the first `bits` cleared (in place), or set when `ones`. */
function maskWords(w: Uint32Array, at: number, bits: number, ones: boolean): void {
  for (let k = 0; k < 4; k++) {
    const keep = Math.min(32, Math.max(0, bits - 32 * k));
    const low = keep === 32 ? 0 : keep === 0 ? 0xffffffff : 0xffffffff >>> keep;
    w[at + k] = ones ? (w[at + k]! | low) >>> 0 : (w[at + k]! & ~low) >>> 0;
  }
}

const counts = new Uint32Array(256);

/**
 * The order of `n` keys of `stride` 32-bit words each (`keys[i * stride + w]`, most significant
 * word first): an LSD radix sort by bytes, skipping a byte every key shares. Linear in `n`, on
 * typed arrays only; a comparison sort of 100,000 IPv6 blocks took ~40 ms here.
 */
function radixOrder(keys: Uint32Array, stride: number, n: number): Uint32Array {
  let order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  if (n < 2) return order;
  let next = new Uint32Array(n);
  for (let w = stride - 1; w >= 0; w--) {
    for (let shift = 0; shift < 32; shift += 8) {
      counts.fill(0);
      for (let i = 0; i < n; i++) counts[(keys[i * stride + w]! >>> shift) & 255]!++;
      if (counts[(keys[w]! >>> shift) & 255] === n) continue;
      let sum = 0;
      for (let d = 0; d < 256; d++) {
        const c = counts[d]!;
        counts[d] = sum;
        sum += c;
      }
      for (let i = 0; i < n; i++) {
        const idx = order[i]!;
        next[counts[(keys[idx * stride + w]! >>> shift) & 255]!++] = idx;
      }
      const t = order;
      order = next;
      next = t;
    }
  }
  return order;
}

/** -1, 0 or 1 as the four-word number at `a[ai]` is below, equal to or above the one at `b[bi]`. */
function compare(a: Uint32Array, ai: number, b: Uint32Array, bi: number): number {
  for (let k = 0; k < 4; k++) {
    const x = a[ai + k]!;
    const y = b[bi + k]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

const successor = new Uint32Array(4);
/** Whether the range starting at `start[si]` overlaps or touches one ending at `end[ei]` (start ≤ end + 1). */
function touches(start: Uint32Array, si: number, end: Uint32Array, ei: number): boolean {
  if (compare(start, si, end, ei) <= 0) return true;
  let carry = 1;
  for (let k = 3; k >= 0; k--) {
    const v = end[ei + k]! + carry;
    successor[k] = v >>> 0;
    carry = v > 0xffffffff ? 1 : 0;
  }
  return carry === 1 || compare(start, si, successor, 0) === 0;
}

/** Sorted, merged v4 ranges from `n` starts and ends. */
function mergeV4(starts: Uint32Array, ends: Uint32Array, n: number): Uint32Array {
  const order = radixOrder(starts, 1, n);
  const out = new Uint32Array(2 * n);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const k = order[i]!;
    const s = starts[k]!;
    const e = ends[k]!;
    if (m > 0 && s <= out[m - 1]! + 1) {
      if (e > out[m - 1]!) out[m - 1] = e;
    } else {
      out[m++] = s;
      out[m++] = e;
    }
  }
  return out.slice(0, m);
}

/** Sorted, merged v6 ranges from `n` starts and ends of four words each. */
function mergeV6(starts: Uint32Array, ends: Uint32Array, n: number): Uint32Array {
  const order = radixOrder(starts, 4, n);
  const out = new Uint32Array(8 * n);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const k = order[i]! * 4;
    if (m > 0 && touches(starts, k, out, m - 4)) {
      if (compare(ends, k, out, m - 4) > 0) for (let w = 0; w < 4; w++) out[m - 4 + w] = ends[k + w]!;
    } else {
      for (let w = 0; w < 4; w++) {
        out[m + w] = starts[k + w]!;
        out[m + 4 + w] = ends[k + w]!;
      }
      m += 8;
    }
  }
  return out.slice(0, m);
}

/**
 * A rule's values as ranges. Values are checked when written; one that does not parse (a row
 * written otherwise) matches nothing, and a zone id is ignored, as Node's `BlockList` did.
 */
export function compileIpRanges(values: readonly string[]): IpRanges {
  const n = values.length;
  const v4Starts = new Uint32Array(n);
  const v4Ends = new Uint32Array(n);
  const v6Starts = new Uint32Array(4 * n);
  const v6Ends = new Uint32Array(4 * n);
  let n4 = 0;
  let n6 = 0;
  const addV4 = (start: number, bits: number) => {
    const low = bits === 0 ? 0xffffffff : bits === 32 ? 0 : 0xffffffff >>> bits;
    v4Starts[n4] = (start & ~low) >>> 0;
    v4Ends[n4++] = (start | low) >>> 0;
  };
  for (const value of values) {
    const { end, v6 } = addressEnd(value);
    const slash = value.indexOf('/');
    const bits = slash === -1 ? (v6 ? 128 : 32) : prefixAt(value, slash + 1, value.length);
    if (bits < 0 || bits > (v6 ? 128 : 32)) continue;
    if (!v6) {
      const a = v4At(value, 0, end);
      if (a >= 0) addV4(a, bits);
      continue;
    }
    if (v6At(value, 0, end, scratch) !== 0) continue;
    if (bits >= 96 && isMapped(scratch)) {
      addV4(scratch[3]!, bits - 96);
      continue;
    }
    const at = 4 * n6++;
    for (let w = 0; w < 4; w++) v6Starts[at + w] = v6Ends[at + w] = scratch[w]!;
    maskWords(v6Starts, at, bits, false);
    maskWords(v6Ends, at, bits, true);
    // A block wider than ::ffff:0:0/96 that holds it holds every IPv4 address.
    if (bits < 96) {
      scratch[0] = scratch[1] = scratch[3] = 0;
      scratch[2] = 0xffff;
      maskWords(scratch, 0, bits, false);
      if (compare(scratch, 0, v6Starts, at) === 0) addV4(0, 0);
    }
  }
  return { v4: mergeV4(v4Starts, v4Ends, n4), v6: mergeV6(v6Starts, v6Ends, n6) };
}

function inV4(r: Uint32Array, x: number): boolean {
  let lo = 0;
  let hi = (r.length >> 1) - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (r[2 * mid]! <= x) {
      if (x <= r[2 * mid + 1]!) return true;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return false;
}

function inV6(r: Uint32Array, x: Uint32Array): boolean {
  let lo = 0;
  let hi = (r.length >> 3) - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (compare(r, 8 * mid, x, 0) <= 0) {
      if (compare(x, 0, r, 8 * mid + 4) <= 0) return true;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return false;
}

/**
 * The client last parsed: a click is judged by every `ip` rule of every stream it meets, so its
 * address is parsed once, not once a rule. Family 0: not an address.
 */
let lastClient: string | undefined;
let lastFamily = 0;
let lastV4 = 0;
const lastV6 = new Uint32Array(4);

function readClient(client: string): number {
  if (client === lastClient) return lastFamily;
  lastClient = client;
  let end = client.indexOf('%');
  if (end === -1) end = client.length;
  if (client.indexOf(':') === -1) {
    const a = v4At(client, 0, end);
    lastV4 = a;
    lastFamily = a >= 0 ? 4 : 0;
  } else if (v6At(client, 0, end, lastV6) !== 0) lastFamily = 0;
  else if (isMapped(lastV6)) {
    lastV4 = lastV6[3]!;
    lastFamily = 4;
  } else lastFamily = 6;
  return lastFamily;
}

/** Whether the client address is in the ranges; undefined when it is not an IP address. */
export function ipRangesMatch(r: IpRanges, client: string): boolean | undefined {
  const family = readClient(client);
  if (family === 4) return inV4(r.v4, lastV4);
  if (family === 6) return inV6(r.v6, lastV6);
  return undefined;
}
