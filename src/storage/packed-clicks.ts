import type { NewClick } from './types.ts';

/**
 * Clicks as they cross to a SQLite node's writer thread: each distinct text of a chunk once, and
 * per click its texts' positions, its two numbers and its flags in typed arrays that are moved,
 * not copied. Posted as objects, every click was copied field by field with each field's name and
 * each of its strings (a flow's id, the browser's name) once per click, and the writer thread
 * collected all of it again (docs/PERFORMANCE.md).
 */
export interface PackedClicks {
  n: number;
  /** The chunk's distinct texts; `refs` holds a text's index + 1, 0 for none (null or absent). */
  texts: string[];
  /** {@link TEXT_FIELDS} then the ten sub-ids, per click. */
  refs: Uint32Array;
  /** `at`, `cost` per click. */
  nums: Float64Array;
  /** Bit 0: `is_unique`, bit 1: `is_bot`, bit 2: the click has sub-ids (`subs` not null). */
  flags: Uint8Array;
}

const TEXT_FIELDS = [
  'click_id',
  'flow_id',
  'stream_id',
  'outcome',
  'country',
  'device_type',
  'os',
  'browser',
  'language',
  'referrer_host',
  'ip_prefix',
] as const;
const SUBS = 10;
const WIDTH = TEXT_FIELDS.length + SUBS;

export function packClicks(rows: readonly NewClick[]): PackedClicks {
  const n = rows.length;
  const texts: string[] = [];
  const index = new Map<string, number>();
  const refs = new Uint32Array(n * WIDTH);
  const nums = new Float64Array(n * 2);
  const flags = new Uint8Array(n);
  const ref = (v: string | null | undefined): number => {
    if (v === null || v === undefined) return 0;
    let i = index.get(v);
    if (i === undefined) {
      i = texts.push(v);
      index.set(v, i);
    }
    return i;
  };
  for (let r = 0; r < n; r++) {
    const c = rows[r]!;
    const o = r * WIDTH;
    for (let f = 0; f < TEXT_FIELDS.length; f++) refs[o + f] = ref(c[TEXT_FIELDS[f]!]);
    const subs = c.subs;
    if (subs !== null) for (let s = 0; s < SUBS; s++) refs[o + TEXT_FIELDS.length + s] = ref(subs[s]);
    nums[r * 2] = c.at;
    nums[r * 2 + 1] = c.cost;
    flags[r] = (c.is_unique ? 1 : 0) | (c.is_bot ? 2 : 0) | (subs === null ? 0 : 4);
  }
  return { n, texts, refs, nums, flags };
}

/** The buffers to move with a packed chunk (`postMessage`'s transfer list). */
export const packedBuffers = (p: PackedClicks): ArrayBuffer[] => [
  p.refs.buffer as ArrayBuffer,
  p.nums.buffer as ArrayBuffer,
  p.flags.buffer as ArrayBuffer,
];

/**
 * The clicks again, as storage writes them: equal to the packed ones field by field, but for sub-ids
 * past the last one given (absent before, null now: both are stored as NULL).
 */
export function unpackClicks(p: PackedClicks): NewClick[] {
  const { texts, refs, nums, flags } = p;
  const text = (i: number) => (i === 0 ? null : texts[i - 1]!);
  const out = new Array<NewClick>(p.n);
  for (let r = 0; r < p.n; r++) {
    const o = r * WIDTH;
    let subs: (string | null)[] | null = null;
    if ((flags[r]! & 4) !== 0) {
      subs = new Array<string | null>(SUBS);
      for (let s = 0; s < SUBS; s++) subs[s] = text(refs[o + TEXT_FIELDS.length + s]!);
    }
    out[r] = {
      click_id: text(refs[o]!)!,
      flow_id: text(refs[o + 1]!)!,
      stream_id: text(refs[o + 2]!),
      outcome: text(refs[o + 3]!) as NewClick['outcome'],
      country: text(refs[o + 4]!),
      device_type: text(refs[o + 5]!) as NewClick['device_type'],
      os: text(refs[o + 6]!)!,
      browser: text(refs[o + 7]!)!,
      language: text(refs[o + 8]!),
      referrer_host: text(refs[o + 9]!),
      ip_prefix: text(refs[o + 10]!),
      subs,
      at: nums[r * 2]!,
      cost: nums[r * 2 + 1]!,
      is_unique: (flags[r]! & 1) !== 0,
      is_bot: (flags[r]! & 2) !== 0,
    };
  }
  return out;
}
