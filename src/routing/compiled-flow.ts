import type { FlowRecord, StreamRecord } from '../storage/index.ts';
import { MACROS, type Macro, normaliseTargetUrl } from './validation.ts';

/** What a target URL's macros are filled from. */
export interface MacroValues {
  country: string | undefined;
  flow: string;
  stream: string;
  request_id: string;
}

/** A stream ready for the hot path: filters as sets, the target URL with its macro positions. */
export interface RoutableStream {
  id: string;
  weight: number;
  redirectCode: number;
  include: ReadonlySet<string> | undefined;
  exclude: ReadonlySet<string> | undefined;
  /** The target URL in its normalised form (§14): plain visible ASCII, always a valid header value. */
  target: string;
  /**
   * Where its macros are: [start, end, macro number] per macro, in order; empty when it has none.
   * Positions, not pieces: 100k cached streams would otherwise hold 100k arrays of substrings.
   */
  marks: readonly number[];
}

/** A flow ready for the hot path; built once per cache fill, never per request. */
export interface CompiledFlow {
  id: string;
  slug: string;
  active: boolean;
  rotation: 'position' | 'weight';
  forced: readonly RoutableStream[];
  regular: readonly RoutableStream[];
  fallback: readonly RoutableStream[];
  /**
   * Active streams left out of routing because their stored target cannot be sent (a row written
   * before targets were normalised and checked): the service logs them once per cache fill.
   */
  refused: readonly { id: string; problem: string }[];
}

const MACRO_RE = new RegExp(`\\{(${MACROS.join('|')})\\}`, 'g');
/**
 * Country sets interned by content: flows tend to repeat the same lists, and a Set costs a few
 * hundred bytes. Bounded, so a store of all-different lists cannot grow it without end.
 */
const INTERN_MAX = 50_000;
const countrySets = new Map<string, ReadonlySet<string>>();
function countrySet(list: readonly string[] | undefined): ReadonlySet<string> | undefined {
  if (!list?.length) return undefined;
  const key = [...list].sort().join(',');
  let set = countrySets.get(key);
  if (set === undefined) {
    set = new Set(list);
    if (countrySets.size < INTERN_MAX) countrySets.set(key, set);
  }
  return set;
}

function macroMarks(url: string): number[] {
  const marks: number[] = [];
  for (const m of url.matchAll(MACRO_RE))
    marks.push(m.index, m.index + m[0].length, MACROS.indexOf(m[1] as Macro));
  return marks;
}

const byPosition = (a: StreamRecord, b: StreamRecord) => a.position - b.position || (a.id < b.id ? -1 : 1);

const NONE_REFUSED: CompiledFlow['refused'] = Object.freeze([]);

export function compileFlow(flow: FlowRecord, streams: readonly StreamRecord[]): CompiledFlow {
  const active = streams.filter((s) => s.status === 'active').sort(byPosition);
  // Normalised again here, not trusted as stored: rows from before the write-time check may hold
  // a raw IDN host, a CR/LF or a macro in the host, and a click must never carry those.
  const targets = new Map<StreamRecord, string>();
  const refused: { id: string; problem: string }[] = [];
  for (const s of active) {
    const target = normaliseTargetUrl(s.target_url);
    if ('problem' in target) refused.push({ id: s.id, problem: target.problem });
    else targets.set(s, target.url);
  }
  const routable = (s: StreamRecord): RoutableStream => {
    const target = targets.get(s)!;
    return {
      id: s.id,
      weight: s.weight,
      redirectCode: s.redirect_code,
      include: countrySet(s.filters.countries_include),
      exclude: countrySet(s.filters.countries_exclude),
      target,
      marks: macroMarks(target),
    };
  };
  // filter then map: arrays of exactly their length, as the cache holds three per flow.
  const ofType = (type: StreamRecord['type']) =>
    active.filter((s) => s.type === type && targets.has(s)).map(routable);
  return {
    id: flow.id,
    slug: flow.slug,
    active: flow.status === 'active',
    rotation: flow.rotation,
    forced: ofType('forced'),
    regular: ofType('regular'),
    fallback: ofType('default'),
    refused: refused.length > 0 ? refused : NONE_REFUSED,
  };
}

/** An unknown country passes no include filter and every exclude filter (§8). */
function passes(s: RoutableStream, country: string | undefined): boolean {
  if (s.include !== undefined && (country === undefined || !s.include.has(country))) return false;
  return s.exclude === undefined || country === undefined || !s.exclude.has(country);
}

function firstPassing(
  list: readonly RoutableStream[],
  country: string | undefined,
): RoutableStream | undefined {
  for (let i = 0; i < list.length; i++) if (passes(list[i]!, country)) return list[i];
  return undefined;
}

/**
 * The routing decision (§8): forced streams in position order, then regular ones (first by
 * position, or weighted random among those whose filters pass), then the default stream.
 * `random` returns [0, 1); it is injected so tests can seed it.
 */
export function decide(
  flow: CompiledFlow,
  country: string | undefined,
  random: () => number,
): RoutableStream | undefined {
  const forced = firstPassing(flow.forced, country);
  if (forced !== undefined) return forced;
  const regular = flow.regular;
  if (regular.length > 0) {
    if (flow.rotation === 'position') {
      const s = firstPassing(regular, country);
      if (s !== undefined) return s;
    } else {
      let total = 0;
      for (let i = 0; i < regular.length; i++)
        if (regular[i]!.weight > 0 && passes(regular[i]!, country)) total += regular[i]!.weight;
      if (total > 0) {
        let pick = random() * total;
        for (let i = 0; i < regular.length; i++) {
          const s = regular[i]!;
          if (s.weight > 0 && passes(s, country)) {
            pick -= s.weight;
            if (pick < 0) return s;
          }
        }
      }
    }
  }
  return firstPassing(flow.fallback, country);
}

/**
 * The redirect location: the normalised target, each macro replaced by its value percent-encoded
 * (`encodeURIComponent`: never a raw value, so no value can add a CR/LF or leave the component).
 * Throws `URIError` on a lone surrogate, before anything is counted.
 */
export function buildTarget(stream: RoutableStream, values: MacroValues): string {
  const { target, marks } = stream;
  if (marks.length === 0) return target;
  let out = '';
  let last = 0;
  for (let i = 0; i < marks.length; i += 3) {
    out += target.slice(last, marks[i]) + encodeURIComponent(values[MACROS[marks[i + 2]!]!] ?? '');
    last = marks[i + 1]!;
  }
  return last < target.length ? out + target.slice(last) : out;
}
